"""Services: what `kubelab serve`, `kubelab service`, `%serve` and `/kubelab/api/services` call.

`start` checks everything it can before anything runs (the spec, the run and its file, the
runtime package, a fixed port already taken, a name and version already serving) and answers
with a `ValidationError` naming the field; then it writes the service's folder (its spec and
lineage: which run and file it serves) and starts the service's detached supervisor
(`supervisor.py`). What only running can tell (a file that does not load, a predictor raising
in `load`) turns the service Failed with the library's error line as its reason.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from kubelab.daemon import start_module
from kubelab.errors import FieldError, NotFound, ValidationError
from kubelab.home import default_home
from kubelab.pids import pid_alive
from kubelab.records import parse_iso, utcnow
from kubelab.serving.replicas import port_in_use, runtime_problems, write_server_settings
from kubelab.serving.spec import NAME as NAME_PATTERN
from kubelab.serving.spec import ServiceSpec
from kubelab.serving.store import (
    ENDED,
    FAILED,
    RUNNING,
    STOPPED,
    ServiceDirectory,
    service_id,
    service_store,
)

SERVICE_ID = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?-v[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?$")
SUPERVISOR_START = 30.0  # seconds a new service may wait for its supervisor to take the folder
NAME = re.compile(NAME_PATTERN)
MAX_LOG = 1 << 20


class Services:
    """The services of one `$KUBELAB_HOME`."""

    def __init__(self, home: Path | None = None, lab: Any = None):
        """`lab`: an `Experiments` to find runs in (made on first need)."""
        self.home = Path(home) if home else Path(lab.home) if lab is not None else default_home()
        self._lab = lab
        self.store = service_store(self.home)

    @property
    def lab(self) -> Any:
        if self._lab is None:
            from kubelab.experiments import Experiments

            self._lab = Experiments(self.home)
        return self._lab

    # -- starting ---------------------------------------------------------------------
    def start(self, data: Any, base_dir: Path | None = None, confine: bool = False) -> dict[str, Any]:
        """Validate, write the service's folder and start its supervisor; the service's view."""
        spec = ServiceSpec.parse(data)
        base = Path(base_dir or os.getcwd()).resolve()
        problems: list[FieldError] = []
        run_dir, lineage = self._run(spec, problems)
        cwd = base
        if spec.folder:
            cwd = (base / Path(spec.folder).expanduser()).resolve()
            if confine and cwd != base and base not in cwd.parents:
                problems.append(FieldError("folder", f"'{spec.folder}' is outside the workspace"))
            elif not cwd.is_dir():
                problems.append(FieldError("folder", f"'{spec.folder}' is not a folder"))
        elif run_dir is not None:
            cwd = run_dir
        model_path = None
        if spec.model is not None:
            model_path = ((run_dir or cwd) / spec.model.path).resolve()
            if confine and run_dir is None and base not in model_path.parents:
                problems.append(FieldError("model.path", f"'{spec.model.path}' is outside the workspace"))
            lineage.update(file=spec.model.path, path=str(model_path))
        if not problems:
            problems += runtime_problems(spec, model_path)
        if spec.ports and not spec.serves_model:
            if max(spec.replicas.min, 1) > 1:
                reason = "replicas on one machine cannot share a fixed port: leave ports out to get one each"
                problems.append(FieldError("ports", reason))
            elif port_in_use(spec.ports[0]):
                reason = f"port {spec.ports[0]} is already in use on this machine"
                problems.append(FieldError("ports[0]", reason))
        sid = service_id(spec.name, spec.version)
        directory = self.store.item(sid)
        if directory.exists():
            state = self._view(directory)["state"]
            if state not in ENDED:
                reason = f"{spec.name} version {spec.version} is {state}: stop it, or give another version"
                problems.append(FieldError("name", reason))
        if problems:
            raise ValidationError("cannot start the service", problems)
        if spec.predictor:
            lineage["predictor"] = spec.predictor
        record = {"id": sid, "spec": spec.to_dict(), "cwd": str(cwd), "lineage": lineage}
        record["created_at"] = utcnow()
        if directory.path.exists():
            shutil.rmtree(directory.path)  # an ended service of the same name and version
        try:
            directory.create(record)
        except FileExistsError:  # another start of the same name and version won the race
            reason = f"{spec.name} version {spec.version} is being started already"
            raise ValidationError("cannot start the service", [FieldError("name", reason)]) from None
        if spec.serves_model:
            write_server_settings(directory, spec, model_path)
        start_module("kubelab.serving.supervisor", str(directory.path), directory.log_file)
        return self._view(directory)

    def _run(self, spec: ServiceSpec, problems: list[FieldError]) -> tuple[Path | None, dict[str, Any]]:
        """The run a model comes from (a sweep's best trial when `model.run` names a sweep): its
        folder, and the lineage the service records."""
        if spec.model is None or spec.model.run is None:
            return None, {}
        run_id, lineage = spec.model.run, {}
        try:
            run = self.lab.run(run_id)
        except NotFound:
            best = self._best_trial(run_id, problems)
            if best is None:
                return None, {}
            run, lineage = self.lab.run(best["id"]), {"sweep": run_id, "trial": best["trial"]}
        status = run.status()
        lineage = {"run": run.id, "run_name": run.spec().get("name", ""), "sweep": status.sweep, **lineage}
        if status.trial is not None:
            lineage["trial"] = status.trial
        return run.path.resolve(), lineage

    def _best_trial(self, sweep_id: str, problems: list[FieldError]) -> dict[str, Any] | None:
        from kubelab.sweeps.service import Sweeps

        try:
            best: dict[str, Any] | None = Sweeps(self.lab).get(sweep_id, with_importance=False)["best"]
        except NotFound:
            problems.append(FieldError("model.run", f"no experiment or sweep '{sweep_id}'"))
            return None
        if best is None:
            problems.append(
                FieldError("model.run", f"sweep '{sweep_id}' has no finished trial with a value yet")
            )
        return best

    # -- reading ----------------------------------------------------------------------
    def directory(self, sid: str) -> ServiceDirectory:
        """A service by id (`iris-v2`), or by name alone: its newest version."""
        if isinstance(sid, str) and NAME.match(sid) and not self.store.item(sid).exists():
            versions = [d for d in self.store.all() if d.id.startswith(f"{sid}-v")]
            named = [d for d in versions if d.spec_data()["spec"]["name"] == sid]
            if named:
                return max(named, key=lambda d: d.spec_data()["created_at"])
        if not isinstance(sid, str) or not SERVICE_ID.match(sid):
            raise NotFound(f"no service '{sid}'", [FieldError("id", "is not a service id, e.g. iris-v1")])
        directory = self.store.item(sid)
        if not directory.exists():
            raise NotFound(f"no service '{sid}'")
        return directory

    def get(self, sid: str) -> dict[str, Any]:
        return self._view(self.directory(sid))

    def list(self) -> builtins.list[dict[str, Any]]:
        views = []
        for directory in self.store.all():
            with contextlib.suppress(OSError, ValueError, KeyError):  # one being deleted
                views.append(self._view(directory))
        return sorted(views, key=lambda v: v["created_at"], reverse=True)

    def _view(self, directory: ServiceDirectory) -> dict[str, Any]:
        record, state = directory.spec_data(), directory.state()
        spec = record["spec"]
        if state.state not in ENDED and not self._supervised(directory, state.supervisor_pid, record):
            state.state, state.reason = FAILED, "its supervisor ended (was the machine restarted?)"
            for replica in state.replicas:
                replica.pid = None
        serves_model = bool(spec.get("model") or spec.get("predictor"))
        return {
            "id": directory.id,
            "name": spec["name"],
            "version": spec["version"],
            "kind": "model" if serves_model else "command",
            "url": f"/kubelab/services/{directory.id}/",
            "endpoint": f"v2/models/{spec['name']}/infer" if serves_model else "",
            "replicas_wanted": spec["replicas"],
            "lineage": record.get("lineage", {}),
            "spec": spec,
            **state.to_dict(),
            "created_at": record["created_at"],
        }

    @staticmethod
    def _supervised(directory: ServiceDirectory, pid: int | None, record: dict[str, Any]) -> bool:
        if pid is None:  # its supervisor has not taken the folder yet
            return time.time() - parse_iso(record["created_at"]) < SUPERVISOR_START
        return directory.driver_alive()

    def port(self, sid: str) -> int | None:
        """The port of a ready replica of a running service (the proxy's upstream), round robin."""
        view = self.get(sid)
        ready = [r["port"] for r in view["replicas"] if r["state"] == "Ready" and r["port"]]
        if view["state"] != RUNNING or not ready:
            return None
        return int(ready[int(time.monotonic() * 1000) % len(ready)])

    def upstream(self, sid: str) -> str | None:
        """The base URL the Jupyter server's proxy forwards to: a ready replica on loopback."""
        port = self.port(sid)
        return f"http://127.0.0.1:{port}" if port else None

    def wait(self, sid: str, timeout: float = 120.0, poll: float = 0.05) -> dict[str, Any]:
        """The service's view once it is Running or has ended, or when `timeout` has passed."""
        deadline = time.monotonic() + timeout
        while True:
            view = self.get(sid)
            if view["state"] in (RUNNING, *ENDED) or time.monotonic() >= deadline:
                return view
            time.sleep(poll)

    def logs(self, sid: str, replica: int = 0) -> str:
        """A replica's output (its last megabyte)."""
        directory = self.directory(sid)
        count = len(directory.state().replicas) or 1
        if not isinstance(replica, int) or not 0 <= replica < count:
            reason = f"must be between 0 and {count - 1} for this service"
            raise ValidationError("invalid replica", [FieldError("replica", reason)])
        path = directory.replica_log(replica)
        try:
            with open(path, "rb") as handle:
                handle.seek(max(0, path.stat().st_size - MAX_LOG))
                return handle.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    # -- changing -----------------------------------------------------------------------
    def stop(self, sid: str, wait: float = 10.0) -> dict[str, Any]:
        """Ask the supervisor to stop every replica; without a live one, stop what it left."""
        directory = self.directory(sid)
        if self._view(directory)["state"] in ENDED:
            return self._view(directory)
        directory.request_stop()
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and directory.driver_alive():
            time.sleep(0.05)
        with directory.driver_lock() as free:
            if free:  # no supervisor: record the stop and end what it left behind
                state = directory.state()
                if state.state not in ENDED:
                    for replica in state.replicas:
                        if replica.pid and pid_alive(replica.pid):
                            with contextlib.suppress(ProcessLookupError, PermissionError):
                                os.killpg(replica.pid, signal.SIGKILL)
                        replica.pid, replica.state = None, STOPPED
                    state.state, state.reason, state.finished_at = STOPPED, "stopped on request", utcnow()
                    directory.write_state(state)
        return self._view(directory)

    def traffic(self, name: str, weights: Any, mirror: Any = ()) -> builtins.list[dict[str, Any]]:
        """Refused here: on this machine each version answers at its own URL, and no router
        stands in front of a service's versions (on a cluster, `ClusterServices.traffic`)."""
        reason = "versions share traffic on Kubernetes (KUBELAB_BACKEND=kubernetes); locally each has its URL"
        raise ValidationError("cannot split traffic here", [FieldError("traffic", reason)])

    def delete(self, sid: str) -> None:
        """Remove an ended service's folder (its logs with it)."""
        directory = self.directory(sid)
        if self._view(directory)["state"] not in ENDED:
            self.stop(sid)
        shutil.rmtree(directory.path, ignore_errors=True)
