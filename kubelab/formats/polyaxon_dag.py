"""Polyaxon v1 DAGs (`run: {kind: dag}`) as kubelab pipelines, and `schedule:` as schedules.

A component whose run is a DAG (or an operation running one) becomes a pipeline: the
component's inputs (with the operation's params as values) are the pipeline's params, each
of `run.operations` a step (its component inline, by `dagRef` from `run.components`, or by
`pathRef`; with a `matrix` it is a sweep step), `dependencies` its `depends_on`. A param
`{ref: ops.NAME, value: outputs.M}` is `{{ steps.NAME.metrics.M }}` (what the upstream
logged with `log_outputs`; a sweep's best trial's), `{ref: dag, value: inputs.P}` is
`{{ params.P }}`. Names with dashes get underscores (pipeline step names are identifiers).

A schedule `kind: cron` maps onto a kubelab schedule (`cron`, `startAt` -> start, `endAt`
-> end; Polyaxon reads cron strings in UTC); `kind: datetime` (one run at `startAt`) onto a
cron firing on that minute with start and end bounding it to the one fire. `interval` is
refused: a period counted from `startAt` has no cron form in general. Everything else
kubelab has no equivalent for is refused by name with the reason.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean

DAG_RUN = (
    "kind",
    "operations",
    "components",
    "concurrency",
    "earlyStopping",
    "environment",
    "connections",
    "volumes",
    "init",
    "sidecars",
)
DAG_RUN_REFUSED = {
    "concurrency": "kubelab starts every step whose dependencies succeeded; there is no cap",
    "earlyStopping": "early stopping of a DAG is not supported",
    "environment": "set the environment on each operation's component",
    "connections": "connections need Polyaxon's servers",
    "volumes": "set volumes on each component",
    "init": "init containers are not supported",
    "sidecars": "sidecars are not supported",
}
OP_REFUSED = {
    "trigger": "kubelab starts a step when all its dependencies succeeded (all_succeeded) only",
    "conditions": "conditional steps are not supported",
    "skipOnUpstreamSkip": "kubelab does not skip steps",
    "schedule": "schedule the whole DAG, not one of its operations",
    "events": "event-driven runs are not supported",
    "hooks": "hooks are not supported",
    "joins": "joins read other runs' outputs from Polyaxon's API",
    "hubRef": "components from Polyaxon Hub need Polyaxon's servers; write it inline, in components, "
    "or pathRef",
    "urlRef": "kubelab does not fetch components over the network; use pathRef",
}
SCHEDULE_KINDS = ("cron", "interval", "datetime")
SCHEDULE_FIELDS = {
    "cron": ("kind", "cron", "startAt", "endAt", "maxRuns", "dependsOnPast"),
    "datetime": ("kind", "startAt"),
}


def is_dag(data: Any, base: Path) -> bool:
    """A v1 component running a DAG, or an operation whose component (inline or pathRef) does."""
    from kubelab.formats import polyaxon_version

    if polyaxon_version(data) != "v1":
        return False
    component = data if data.get("kind") == "component" else data.get("component")
    if data.get("kind") == "operation" and component is None and isinstance(data.get("pathRef"), str):
        from kubelab.formats.specfile import load_document

        try:
            component = load_document((base / data["pathRef"]).resolve(), "pathRef")
        except ValidationError:
            return False
    run = component.get("run") if isinstance(component, dict) else None
    return isinstance(run, dict) and run.get("kind") == "dag"


def schedule(section: Any, path: str = "schedule") -> dict[str, Any]:
    """A Polyaxon schedule section as a kubelab schedule mapping, or ValidationError by field."""
    if not isinstance(section, dict):
        raise ValidationError("invalid Polyaxon schedule", [FieldError(path, "must be a mapping with kind")])
    kind = section.get("kind")
    problems = []
    if kind == "interval":
        problems.append(
            FieldError(
                f"{path}.kind",
                "interval schedules (every `frequency` from startAt) "
                "have no cron form in general; write it as kind: cron",
            )
        )
    elif kind not in SCHEDULE_KINDS:
        problems.append(
            FieldError(
                f"{path}.kind",
                f"must be cron or datetime, not {kind!r}" + did_you_mean(str(kind), SCHEDULE_KINDS),
            )
        )
    else:
        problems += [
            FieldError(f"{path}.{k}", "unknown field" + did_you_mean(str(k), SCHEDULE_FIELDS[kind]))
            for k in section
            if k not in SCHEDULE_FIELDS[kind]
        ]
    if problems:
        raise ValidationError("invalid Polyaxon schedule", problems)
    if section.get("maxRuns") is not None:
        problems.append(
            FieldError(f"{path}.maxRuns", "a cap on the number of runs is not supported; give endAt instead")
        )
    if section.get("dependsOnPast"):
        problems.append(
            FieldError(
                f"{path}.dependsOnPast",
                "kubelab does not wait for the last run; concurrency forbid skips a fire while it runs",
            )
        )
    if kind == "cron":
        result = {"cron": section.get("cron"), "timezone": "UTC", "concurrency": "allow"}
        for key, target in (("startAt", "start"), ("endAt", "end")):
            if section.get(key) is not None:
                result[target] = section[key]
    else:
        at = _moment(section.get("startAt"))
        if at is None:
            problems.append(FieldError(f"{path}.startAt", "is required: an ISO-8601 time"))
        elif at.second or at.microsecond:
            problems.append(
                FieldError(f"{path}.startAt", "schedules fire on whole minutes; drop the seconds")
            )
        else:
            result = {
                "cron": f"{at.minute} {at.hour} {at.day} {at.month} *",
                "timezone": "UTC",
                "start": _iso(at),
                "end": _iso(at + timedelta(seconds=59)),
            }
    if problems:
        raise ValidationError("invalid Polyaxon schedule", problems)
    return result


def pipeline(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """The pipeline spec mapping a DAG component or operation stands for (with its schedule)."""
    from kubelab.formats.polyaxon_v1 import OPERATION, UNSUPPORTED, _Converter

    p = _Converter(base)
    values: dict[str, Any] = {}
    result: dict[str, Any] = {}
    if data.get("kind") == "operation":
        for key in data:
            if key in ("schedule", "dependencies") or key not in UNSUPPORTED or data[key] in (None, [], {}):
                if key not in OPERATION:
                    p.fail(key, "unknown field" + did_you_mean(str(key), OPERATION))
                continue
            p.fail(key, UNSUPPORTED[key])
        if data.get("matrix") is not None:
            p.fail("matrix", "a DAG with a matrix (many pipelines) is not supported")
        values = p.params(data.get("params"))
        component = p.operation_component(data) or {}
        prefix = "component."
        if data.get("schedule") is not None:
            try:
                result["schedule"] = schedule(data["schedule"])
            except ValidationError as exc:
                p.m.errors.extend(exc.fields)
    else:
        component, prefix = data, ""
    name = data.get("name") or component.get("name")
    if name:
        result["name"] = name
    if data.get("description") or component.get("description"):
        result["description"] = data.get("description") or component.get("description")
    params = {}
    for decl in p.inputs(component.get("inputs"), f"{prefix}inputs"):
        params[decl["name"]] = values.get(decl["name"], decl.get("default"))
    params.update({k: v for k, v in values.items() if k not in params})
    if params:
        result["params"] = params
    run = component.get("run") or {}
    for key in run:
        if key in DAG_RUN_REFUSED and run[key] not in (None, [], {}):
            p.fail(f"{prefix}run.{key}", DAG_RUN_REFUSED[key])
        elif key not in DAG_RUN:
            p.fail(f"{prefix}run.{key}", "unknown field" + did_you_mean(str(key), DAG_RUN))
    result["steps"] = _steps(p, run, f"{prefix}run", base)
    p.raise_errors()
    return result


def _steps(p: Any, run: dict[str, Any], path: str, base: Path) -> list[dict[str, Any]]:
    from kubelab.formats import polyaxon_v1

    library = {c.get("name"): c for c in run.get("components") or [] if isinstance(c, dict)}
    operations = run.get("operations")
    if not isinstance(operations, list) or not operations:
        p.fail(f"{path}.operations", "must be a non-empty list of operations")
        return []
    names = {
        str(op.get("name")): _step_name(str(op.get("name"))) for op in operations if isinstance(op, dict)
    }
    steps: list[dict[str, Any]] = []
    outputs: dict[str, list[str]] = {}
    for index, op in enumerate(operations):
        where = f"{path}.operations[{index}]"
        if not isinstance(op, dict) or not op.get("name"):
            p.fail(where, "must be a mapping with a name")
            continue
        for key, reason in OP_REFUSED.items():
            if op.get(key) not in (None, [], {}) and not (key == "trigger" and op[key] == "all_succeeded"):
                p.fail(f"{where}.{key}", reason)
        document = {k: v for k, v in op.items() if k not in (*OP_REFUSED, "dependencies", "dagRef", "params")}
        document.update(version=1.1, kind="operation")
        if op.get("dagRef") is not None:
            if op["dagRef"] not in library:
                p.fail(
                    f"{where}.dagRef",
                    f"no component named {op['dagRef']!r} in {path}.components"
                    + did_you_mean(str(op["dagRef"]), [str(n) for n in library]),
                )
                continue
            document["component"] = copy.deepcopy(library[op["dagRef"]])
        depends = [names.get(str(d), _step_name(str(d))) for d in op.get("dependencies") or []]
        params = {}
        for param, item in (op.get("params") or {}).items():
            if isinstance(item, dict) and "ref" in item:
                template, upstream = _reference(p, f"{where}.params.{param}", item, names)
                if template is None:
                    continue
                if upstream:
                    depends.append(upstream)
                    outputs.setdefault(upstream, []).append(template.split(".")[-1].rstrip(" }"))
                item = {"value": template}
            params[param] = item
        if params:
            document["params"] = params
        convert = polyaxon_v1.sweep if op.get("matrix") is not None else polyaxon_v1.experiment
        try:
            spec = convert(document, base)
        except ValidationError as exc:
            p.m.errors.extend(FieldError(f"{where}.{f.path}", f.reason) for f in exc.fields)
            continue
        step: dict[str, Any] = {
            "name": names[str(op["name"])],
            "sweep" if op.get("matrix") is not None else "experiment": spec,
        }
        if depends:
            step["depends_on"] = list(dict.fromkeys(depends))
        steps.append(step)
    for step in steps:
        if step["name"] in outputs:
            step["outputs"] = list(dict.fromkeys(outputs[step["name"]]))
    sweeps = {s["name"] for s in steps if "sweep" in s}
    for step in steps:  # a sweep's outputs are its best trial's
        kind = "sweep" if "sweep" in step else "experiment"
        step[kind] = _best(step[kind], sweeps)
    return steps


def _best(value: Any, sweeps: set[str]) -> Any:
    if isinstance(value, str):
        for name in sweeps:
            value = value.replace(f"{{{{ steps.{name}.metrics.", f"{{{{ steps.{name}.best.metrics.")
        return value
    if isinstance(value, dict):
        return {k: _best(v, sweeps) for k, v in value.items()}
    if isinstance(value, list):
        return [_best(v, sweeps) for v in value]
    return value


def _reference(p: Any, where: str, item: dict[str, Any], names: dict[str, str]) -> tuple[str | None, str]:
    """The pipeline template a `{ref, value}` param stands for, and the step it reads."""
    ref, value = str(item.get("ref")), str(item.get("value") or "")
    extra = [k for k in item if k not in ("ref", "value")]
    if extra:
        p.fail(f"{where}.{extra[0]}", "is not supported with ref")
        return None, ""
    if ref == "dag" and value.startswith("inputs."):
        return f"{{{{ params.{value.split('.', 1)[1]} }}}}", ""
    if ref.startswith("ops.") and value.startswith("outputs."):
        upstream = ref.split(".", 1)[1]
        if upstream not in names:
            p.fail(
                f"{where}.ref",
                f"no operation named {upstream!r} in this DAG" + did_you_mean(upstream, list(names)),
            )
            return None, ""
        return f"{{{{ steps.{names[upstream]}.metrics.{value.split('.', 1)[1]} }}}}", names[upstream]
    p.fail(
        f"{where}.ref",
        "kubelab reads `ref: ops.NAME` with `value: outputs.METRIC` and `ref: dag` with "
        "`value: inputs.NAME`; other runs and artifacts need Polyaxon's API",
    )
    return None, ""


def _step_name(name: str) -> str:
    return name.replace("-", "_")


def _moment(value: Any) -> datetime | None:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def translate(data: Any, base: Path) -> Any:
    """The kubelab mapping of a Polyaxon v1 DAG, or of a v1 operation with a schedule (the
    schedule mapped too); any other document unchanged, for its own reader."""
    from kubelab.formats.detect import experiment_mapping, is_sweep, polyaxon_version, sweep_mapping

    if polyaxon_version(data) != "v1":
        return data
    if is_dag(data, base):
        return pipeline(data, base)
    if data.get("schedule") is None:
        return data
    body = {k: v for k, v in data.items() if k != "schedule"}
    problems: list[FieldError] = []
    mapped: dict[str, Any] = {}
    try:
        mapped = sweep_mapping(body, base) if is_sweep(body) else experiment_mapping(body, base)
    except ValidationError as exc:
        problems += exc.fields
    try:
        when = schedule(data["schedule"])
    except ValidationError as exc:
        problems += exc.fields
    if problems:
        raise ValidationError("invalid Polyaxon v1 file", problems)
    return {**mapped, "schedule": when}
