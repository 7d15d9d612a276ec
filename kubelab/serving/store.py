"""A service's folder, `$KUBELAB_HOME/services/<id>/`: the record the CLI, server and supervisor share.

- `service.json`: the validated spec and what it serves (lineage), never changed after creation.
- `state.json`: the service's state and each replica's (pid, port, restarts), written atomically
  by its supervisor only; `driver.lock` is held by that supervisor for its whole life, so a
  supervisor killed by SIGKILL is told apart from a live one without trusting a pid.
- `stop-requested`, `driver.log` (the supervisor's output), `replica-<n>.log` (each replica's),
  and `capability` (0600): the secret in the proxy's view URL for pages that render HTML.

The folder and its files follow the sweep and pipeline drivers' discipline (`driver_store.py`).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubelab.driver_store import FAILED as FAILED
from kubelab.driver_store import RUNNING as RUNNING
from kubelab.driver_store import STOPPED as STOPPED
from kubelab.driver_store import DriverDirectory, DriverStore, write_json
from kubelab.records import PENDING, utcnow

STARTING = PENDING  # replicas started, not all answering yet
SERVICE_STATES = (STARTING, RUNNING, FAILED, STOPPED)
ENDED = frozenset({FAILED, STOPPED})
READY, RESTARTING = "Ready", "Restarting"  # a replica's states beside STARTING, FAILED, STOPPED


def service_id(name: str, version: str) -> str:
    """One id per name and version: `iris-v2` (a URL path segment and a folder name)."""
    return f"{name}-v{version}"


@dataclass
class Replica:
    """One supervised process of a service."""

    index: int
    port: int = 0
    pid: int | None = None
    state: str = STARTING
    restarts: int = 0
    started_at: str = field(default_factory=utcnow)
    ready_at: str | None = None
    exit_code: int | None = None


@dataclass
class ServiceState:
    """What `state.json` holds."""

    state: str = STARTING
    reason: str = "starting"
    created_at: str = field(default_factory=utcnow)
    ready_at: str | None = None
    finished_at: str | None = None
    supervisor_pid: int | None = None
    replicas: list[Replica] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServiceState:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["replicas"] = [Replica(**r) for r in known.get("replicas") or []]
        return cls(**known)


class ServiceDirectory(DriverDirectory):
    spec_name = "service.json"

    def replica_log(self, index: int) -> Path:
        return self.path / f"replica-{index}.log"

    @property
    def capability_file(self) -> Path:
        return self.path / "capability"

    @property
    def server_folder(self) -> Path:
        """The model server's settings (MLServer's settings.json and model-settings.json)."""
        return self.path / "model-server"

    def create(self, record: dict[str, Any]) -> None:
        """Write the spec and a first state; the folder appears whole (renamed into place)."""
        staging = self.path.with_name(f".{self.id}.new")
        staging.mkdir(parents=True, mode=0o700)
        write_json(staging / self.spec_name, record)
        fd = os.open(staging / "capability", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(32))
        write_json(staging / "state.json", ServiceState().to_dict())
        os.replace(staging, self.path)

    def state(self) -> ServiceState:
        return ServiceState.from_dict(self.state_data())

    def write_state(self, state: ServiceState) -> None:
        write_json(self.state_file, state.to_dict())

    def capability(self) -> str:
        return self.capability_file.read_text().strip()


def service_store(home: Path) -> DriverStore[ServiceDirectory]:
    return DriverStore(home, "services", ServiceDirectory)
