"""Polyaxon's tracking client, provided by kubelab: trial code written for Polyaxon runs as is.

Shared by `polyaxon.tracking` (v1: `tracking.init()`, `tracking.log_metrics(...)`) and
`polyaxon_client.tracking` (v0: `Experiment().log_metrics(...)`). Standard library only and
no network, like kubelab's `nni` module beside it: the runner puts this folder first on a
trial's PYTHONPATH. Everything is recorded into the run directory:

- metrics -> `metrics.jsonl` lines (`{"step": n, "metrics": {...}}`), what kubelab plots,
  queries (`metrics.loss`) and sweeps optimise; numeric outputs are metrics too (PQL's
  `outputs.loss` reads `metrics.loss`);
- params, tags and non-numeric outputs -> `tracking.json`, which the run's record merges;
- artifacts and models -> copies under the run's `outputs/`;
- data references (`log_data_ref`, `log_code_ref`) -> `tracking.json`'s `data_refs` (name ->
  content hash or path) and a tag `data:NAME`, so runs are found by the data they read;
  a name and description set by the trial -> `tracking.json`'s `outputs` (`name`, `description`).

Outside a kubelab run (`KUBELAB_RUN_DIR` unset) calls print what they would record, as
Polyaxon's offline mode keeps runs local. Calls that need Polyaxon's servers raise an error
naming the call, never fail silently.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import time
from typing import Any

from _kubelab_numbers import number

_TRACKING = "tracking.json"
_LIMIT = 1 << 20  # tracking.json stays small: it is read for every listing


def run_dir() -> str | None:
    return os.environ.get("KUBELAB_RUN_DIR") or None


def note(message: str) -> None:
    print(f"polyaxon (kubelab): {message}", file=sys.stderr)


def write_metrics(metrics: dict[str, Any], step: int | None = None) -> None:
    numbers = {str(k): n for k, n in ((k, number(v)) for k, v in metrics.items()) if n is not None}
    skipped = sorted(str(k) for k in metrics if str(k) not in numbers)
    if skipped:
        note(f"log_metrics keeps numbers only; skipped {', '.join(skipped)}")
    directory = run_dir()
    if not directory:
        note(f"metrics {numbers} (step {step})")
        return
    if not numbers:
        return
    entry: dict[str, Any] = {"metrics": numbers, "time": round(time.time(), 3)}
    if step is not None:
        entry["step"] = int(step)
    rank = os.environ.get("RANK")
    if rank not in (None, "0"):
        entry["replica"] = int(rank)
    fd = os.open(os.path.join(directory, "metrics.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())  # one write: replicas never interleave
    finally:
        os.close(fd)


def update(section: str, values: Any, reset: bool = False) -> None:
    """Merge `values` into `tracking.json`'s section (params/outputs: mappings; tags: a list)."""
    directory = run_dir()
    if not directory:
        note(f"{section}: {values}")
        return
    path = os.path.join(directory, _TRACKING)
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (FileNotFoundError, ValueError):
        data = {}
    if section == "tags":
        tags = [] if reset else list(data.get("tags") or [])
        data["tags"] = list(dict.fromkeys(tags + [str(t) for t in values]))
    else:
        merged = {} if reset else dict(data.get(section) or {})
        merged.update({str(k): _plain(v) for k, v in values.items()})
        data[section] = merged
    text = json.dumps(data)
    if len(text) > _LIMIT:
        raise ValueError(f"polyaxon (kubelab): {_TRACKING} would exceed {_LIMIT} bytes; log less")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _plain(value: Any) -> Any:
    found = number(value)
    if found is not None:
        return found
    return value if isinstance(value, (str, bool)) or value is None else str(value)


def params() -> dict[str, Any]:
    raw = os.environ.get("KUBELAB_PARAMS")
    return json.loads(raw) if raw else {}


def outputs_path() -> str:
    """The run's outputs; outside a run a folder of this account's own (`polyaxon-outputs` in
    `$XDG_RUNTIME_DIR`, else the home), `0700`: never a shared name such as /tmp's, which
    another account could create first and read."""
    path = os.environ.get("KUBELAB_OUTPUTS_DIR")
    if path:
        return path
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    base = runtime if runtime and _own_folder(runtime) else os.path.expanduser("~")
    path = os.path.join(base, "polyaxon-outputs")
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    if not _own_folder(path):
        raise RuntimeError(
            f"{path} is not a folder of this account's own (a link, or another account's); "
            "polyaxon outputs outside a kubelab run will not go there: remove it"
        )
    os.chmod(path, 0o700)
    return path


def _own_folder(path: str) -> bool:
    import stat

    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def copy_artifact(path: str, name: str | None = None) -> str:
    """Copy a file or folder into the run's outputs; returns where it went."""
    target = os.path.join(outputs_path(), name or os.path.basename(os.path.normpath(path)))
    if os.path.isdir(path):
        shutil.copytree(path, target, dirs_exist_ok=True)
    else:
        shutil.copy2(path, target)
    return target


class Run:
    """What Polyaxon's `Run` (v1) and `Experiment` (v0) record, written into the run directory."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.run_uuid = os.environ.get("KUBELAB_RUN_ID", "offline")
        self.experiment_id = self.run_uuid

    def log_metrics(self, step: int | None = None, timestamp: Any = None, **metrics: Any) -> None:
        write_metrics(metrics, step)

    def log_metric(self, name: str, value: Any, step: int | None = None, timestamp: Any = None) -> None:
        write_metrics({name: value}, step)

    def log_inputs(self, reset: bool = False, **inputs: Any) -> None:
        update("params", inputs, reset)

    log_params = log_inputs  # v0's name

    def log_outputs(self, reset: bool = False, **outputs: Any) -> None:
        numeric = {k: v for k, v in outputs.items() if number(v) is not None}
        if numeric:
            write_metrics(numeric)
        others = {k: v for k, v in outputs.items() if k not in numeric}
        if others or reset:
            update("outputs", others, reset)

    def log_tags(self, tags: Any, reset: bool = False) -> None:
        update("tags", [tags] if isinstance(tags, str) else list(tags), reset)

    def get_params(self) -> dict[str, Any]:
        return params()

    get_declarations = get_params
    get_inputs = get_params

    def get_outputs_path(self) -> str:
        return outputs_path()

    get_artifacts_path = get_outputs_path

    def log_artifact(self, path: str, name: str | None = None, **kwargs: Any) -> str:
        return copy_artifact(path, name)

    log_model = log_artifact

    def log_data_ref(
        self,
        data: Any = None,
        data_name: str | None = None,
        reset: bool = False,
        *,
        content: Any = None,
        name: str | None = None,
        hash: str | None = None,
        path: str | None = None,
        **kwargs: Any,
    ) -> None:
        """v0 `log_data_ref(data, data_name)`, v1 `log_data_ref(name=, content=, hash=, path=)`."""
        label = str(name or data_name or "data")
        value = content if content is not None else data
        reference = hash or path
        if reference is None and value is not None:
            reference = "sha256:" + hashlib.sha256(repr(value).encode()).hexdigest()[:16]
        update("data_refs", {label: reference or ""}, reset)
        update("tags", [f"data:{label}"])

    def log_code_ref(self, code_ref: Any = None, **kwargs: Any) -> None:
        """The code the run ran: kubelab snapshots it into the run's `code/` already."""
        commit = (code_ref or {}).get("commit") if isinstance(code_ref, dict) else None
        if commit:
            update("data_refs", {"code": str(commit)})

    def set_name(self, name: str) -> None:
        update("outputs", {"name": str(name)})

    def set_description(self, description: str) -> None:
        update("outputs", {"description": str(description)})

    def log_progress(self, value: float) -> None:
        write_metrics({"progress": value})

    def log_env(self, *args: Any, **kwargs: Any) -> None:
        """The run's environment is in its record (spec, environment.json) already."""

    log_run_env = log_env
    log_status = log_env

    def get_tensorboard_path(self) -> str:
        return os.environ.get("KUBELAB_TENSORBOARD_DIR") or outputs_path()

    @property
    def outputs_store(self) -> Run:
        """v0's `experiment.outputs_store.upload_file(path)` / `upload_dir(path)`."""
        return self

    def upload_file(self, path: str, *args: Any, **kwargs: Any) -> str:
        return copy_artifact(path)

    upload_dir = upload_file

    def log_succeeded(self, *args: Any, **kwargs: Any) -> None:
        """The run's state is its process's exit code here, as for every kubelab run."""

    log_failed = log_stopped = end = succeeded = failed = log_succeeded

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"polyaxon (kubelab): {name} is not provided: kubelab records metrics, params, tags, "
            "outputs, data references and artifacts; save other files under get_outputs_path()"
        )
