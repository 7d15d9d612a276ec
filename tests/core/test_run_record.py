"""`RunRecord` is the one description of a run's record: what `summary()` builds, what PQL
queries, what the OpenAPI document says and what the sidebar's TypeScript declares."""

from __future__ import annotations

import re
from pathlib import Path

from kubelab import query, records
from kubelab.experiments import Experiments
from kubelab.run_record import RunRecord, field_kinds, json_schema, typescript_fields
from kubelab.server_extension.openapi import document
from kubelab.server_extension.routes import API_ROUTES

ROOT = Path(__file__).resolve().parents[2]


def typescript_interface(source: Path, name: str) -> dict[str, str]:
    """The fields of `export interface NAME { ... }` as {field: type} (one field a line)."""
    text = source.read_text()
    match = re.search(rf"export interface {name} \{{\n(.*?)\n\}}", text, re.S)
    assert match, f"{source} declares no interface {name}"
    fields = {}
    for line in match.group(1).splitlines():
        line = line.strip()
        if not line or line.startswith(("//", "/*", "*")):
            continue
        found = re.fullmatch(r"(\w+)(\??): (.+);", line)
        assert found, f"cannot read {line!r} in {name}"
        fields[found.group(1)] = found.group(3)
    return fields


def test_summary_has_exactly_the_record_fields(lab: Experiments) -> None:
    record = lab.submit({"name": "r", "command": ["python", "-c", "pass"]})
    run = records.RunDirectory(lab.runs_root / record["id"])
    built = records.summary(run)
    assert list(built) == list(RunRecord.__annotations__)
    assert list(built["resources"]) == ["gpus", "gpu_type", "cpu", "memory"]


def test_query_fields_follow_the_record() -> None:
    assert field_kinds() == query.FIELDS
    assert query.SECTIONS == ("params", "metrics")
    assert query.FIELDS["resources.gpus"] == "number" and query.FIELDS["status"] == "status"
    # every top-level field but the two open sections can be queried
    nested = {"resources"}
    assert {f.split(".")[0] for f in query.FIELDS} == set(RunRecord.__annotations__) - {"params", "metrics"}
    assert nested <= {f.split(".")[0] for f in query.FIELDS if "." in f}


def test_states_agree() -> None:
    schema = json_schema()
    assert tuple(schema["properties"]["status"]["enum"]) == records.STATES == query.STATUSES
    assert set(records.STATES) > records.TERMINAL


def test_openapi_record_schema_is_the_record() -> None:
    schema = document(API_ROUTES)["components"]["schemas"]["Record"]
    assert schema == json_schema()
    assert schema["required"] == list(RunRecord.__annotations__)
    assert schema["properties"]["exit_code"] == {"type": ["integer", "null"]}
    assert schema["properties"]["metrics"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert schema["properties"]["resources"]["properties"]["cpu"] == {
        "type": ["string", "integer", "number", "null"]
    }


def test_typescript_record_declares_what_the_server_sends() -> None:
    declared = typescript_interface(ROOT / "labextension" / "src" / "model.ts", "IExperimentRecord")
    sent = typescript_fields()
    unknown = set(declared) - set(sent)
    assert not unknown, f"IExperimentRecord declares fields the server never sends: {sorted(unknown)}"
    for name, spelled in declared.items():
        expected = sent[name]
        if name == "resources" and spelled == "Record<string, unknown>":
            continue  # the sidebar reads the sub-record loosely, which every record satisfies
        assert spelled == expected, f"IExperimentRecord.{name} is {spelled}, the server sends {expected}"
    # the fields the sidebar sorts, filters and renders by must be declared
    assert {"id", "name", "status", "created_at", "metrics", "params", "resources"} <= set(declared)


def test_typescript_states_are_the_records_states() -> None:
    source = (ROOT / "labextension" / "src" / "vocabulary.ts").read_text()

    def quoted(name: str) -> list[str]:
        match = re.search(rf"export const {name}[^=]*=[^\[]*\[(.*?)\]", source, re.S)
        assert match, f"vocabulary.ts declares no {name}"
        return re.findall(r"'(\w+)'", match.group(1))

    assert tuple(quoted("STATES")) == records.STATES
    assert set(quoted("TERMINAL_STATES")) == records.TERMINAL
