"""Where the magics send their work: the Jupyter server's REST API, or the `Experiments` directly.

Inside a Jupyter server the kernel has `KUBELAB_API_URL`, and going through the server keeps
one index, one event stream and one set of TensorBoard sessions for the sidebar and the
notebook. In a plain IPython with no server, the magics use the `Experiments` as the CLI does.
Both sides offer the same verbs, so the magics do not care which one they hold.
"""

from __future__ import annotations

import builtins
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelab.errors import FieldError, NotFound, ValidationError
from kubelab.records import TERMINAL
from kubelab.sweeps.store import RUNNING as SWEEP_RUNNING
from kubelab.sweeps.store import SWEEP_STATES
from kubelab.system_series import DEFAULT_POINTS

if TYPE_CHECKING:
    from kubelab.pipelines.service import Pipelines
    from kubelab.sweeps.service import Sweeps


class RestService:
    remote = True

    def __init__(self, client: Any = None) -> None:
        from kubelab.rest_client import RestClient

        self.client = client or RestClient()

    def __getattr__(self, name: str) -> Any:  # submit, get, list, stop, logs, metrics, resources, ...
        return getattr(self.client, name)

    def tensorboard(self, request: dict[str, Any]) -> dict[str, Any]:
        return self.client.tensorboard(request)


class LocalService:
    """The magics without a server: the `Experiments` in this process."""

    remote = False

    def __init__(self, lab: Any = None) -> None:
        from kubelab.experiments import Experiments

        self.lab = lab or Experiments()
        self._tensorboards: Any = None

    def submit(self, spec: dict[str, Any], base_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        return self.lab.submit(spec, base_dir=Path(base_dir or os.getcwd()))

    def get(self, run_id: str) -> dict[str, Any]:
        return self.lab.get(run_id)

    def list(
        self, query: str = "", sort: str = "", limit: int | None = None, offset: int = 0
    ) -> tuple[builtins.list[dict[str, Any]], int]:
        return self.lab.list(query, sort, limit, offset)

    def stop(self, run_id: str) -> dict[str, Any]:
        return self.lab.stop(run_id)

    def logs(self, run_id: str, replica: int = 0, follow: bool = False) -> Iterator[str]:
        return self.lab.logs(run_id, replica, follow)

    def metrics(self, run_id: str) -> builtins.list[dict[str, Any]]:
        return self.lab.metrics(run_id)

    def system(self, run_id: str, points: int | None = None) -> dict[str, Any]:
        return self.lab.system(run_id, points or DEFAULT_POINTS)

    def resources(self) -> dict[str, Any]:
        return self.lab.resources()

    # -- sweeps: the same service the `kubelab sweep` command uses ------------------------
    def _sweeps(self) -> Sweeps:
        try:
            from kubelab.sweeps.service import Sweeps
        except ImportError:
            raise ValidationError(
                "sweeps need the kubelab sweep service",
                [
                    FieldError(
                        "sweep",
                        "kubelab.sweeps.service is not installed; run the sweep from a Jupyter server",
                    )
                ],
            ) from None
        return Sweeps(self.lab)

    def submit_sweep(
        self, spec: dict[str, Any], base_dir: str | os.PathLike[str] | None = None
    ) -> dict[str, Any]:
        return self._sweeps().submit(spec, base_dir=Path(base_dir or os.getcwd()))

    def sweep(self, sweep_id: str) -> dict[str, Any]:
        return self._sweeps().get(sweep_id)

    def stop_sweep(self, sweep_id: str) -> dict[str, Any]:
        return self._sweeps().stop(sweep_id)

    # -- pipelines and schedules: the services the `kubelab pipeline` command uses ----------
    def _pipelines(self) -> Pipelines:
        from kubelab.pipelines.service import Pipelines

        return Pipelines(self.lab)

    def submit_pipeline(
        self,
        spec: dict[str, Any],
        base_dir: str | os.PathLike[str] | None = None,
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return self._pipelines().create(spec, Path(base_dir or os.getcwd()), params=params)

    def pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return self._pipelines().get(pipeline_id)

    def stop_pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return self._pipelines().stop(pipeline_id)

    def resume_pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return self._pipelines().resume(pipeline_id)

    def submit_schedule(
        self,
        spec: dict[str, Any],
        base_dir: str | os.PathLike[str] | None = None,
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        from kubelab.schedules.service import Schedules

        return Schedules(self.lab).create(None, spec, Path(base_dir or os.getcwd()), params=params)

    # -- TensorBoard: a session supervised by this process, on a loopback port -----------
    def tensorboard(self, request: dict[str, Any]) -> dict[str, Any]:
        from kubelab.tensorboard.supervisor import TensorBoardSupervisor

        if self._tensorboards is None:
            self._tensorboards = TensorBoardSupervisor(self.lab)
        supervisor = self._tensorboards
        session = supervisor.start(request)
        supervisor.wait_ready(session)
        data: dict[str, Any] = session.to_json()
        data["url"] = session.direct_url
        return data

    def page_url(self, path: str) -> str:
        return path

    def events(self, interval: float = 0.5) -> Iterator[tuple[str, Any]]:
        """The server's event kinds, by looking at the run records (there is no server)."""
        seen: dict[str, tuple[Any, ...]] = {}
        yield "connected", None
        while True:
            self.lab.refresh()
            for record in self.lab.index.records():
                key = (record["status"], record.get("step"), str(record.get("metrics")))
                if seen.get(record["id"]) != key:
                    seen[record["id"]] = key
                    yield "experiment", record
            time.sleep(interval)


def connect() -> RestService | LocalService:
    """The REST API when this kernel belongs to a kubelab Jupyter server; else the experiments service."""
    if os.environ.get("KUBELAB_API_URL"):
        return RestService()
    return LocalService()


def wait_until_done(service: Any, run_id: str, poll: float = 0.2) -> dict[str, Any]:
    while True:
        record = service.get(run_id)
        if record["status"] in TERMINAL:
            return dict(record)
        time.sleep(poll)


SWEEP_TERMINAL = frozenset(SWEEP_STATES) - {SWEEP_RUNNING}


def wait_for_sweep(service: Any, sweep_id: str, poll: float = 0.5) -> dict[str, Any]:
    while True:
        record = service.sweep(sweep_id)
        if record.get("status") in SWEEP_TERMINAL:
            return dict(record)
        time.sleep(poll)


def find_kind(service: Any, ident: str) -> str:
    """Whether `ident` names an experiment or a sweep (`experiment`/`sweep`), or NotFound."""
    try:
        service.get(ident)
        return "experiment"
    except NotFound as first:
        try:
            service.sweep(ident)
            return "sweep"
        except (NotFound, ValidationError):
            raise first from None
