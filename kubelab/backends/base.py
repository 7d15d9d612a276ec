"""What every backend does: turn a run directory's spec into work, and report on it.

The run directory is already written when a backend is called; a backend only adds
what it learns (states, reasons, exit codes, replicas) through `status.json`. Services hold a
`Backend` (from `kubelab.backends.registry.make_backend`) and never ask which one it is: what
only some backends can do is a hook below with a default, overridden by those that can.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelab.records import RunDirectory, Status
from kubelab.spec import ExperimentSpec

if TYPE_CHECKING:
    from kubelab.backends.kubernetes.api import KubeApi
    from kubelab.backends.kubernetes.notebook_env import NotebookEnv


@dataclass(frozen=True)
class ClusterAccess:
    """A Kubernetes namespace and the notebook's own credentials for it: where services create
    the objects they own beside a backend's runs (a pipeline's Argo Workflow, a schedule's CronJob)."""

    api: KubeApi
    nb: NotebookEnv


class Backend(ABC):
    name: str  # what a run's status.json records as its `backend`; the registry's name for it

    @abstractmethod
    def submit(self, run: RunDirectory, spec: ExperimentSpec) -> None:
        """Start (or queue) the run; return quickly, progress is reported through status.json."""

    @abstractmethod
    def stop(self, run: RunDirectory, pruned: bool = False) -> None:
        """Stop the run's processes or pods; it ends Stopped (Pruned when a sweep pruned it).

        Call `run.request_stop(pruned)` first, so every observer agrees on the outcome."""

    @abstractmethod
    def reconcile(self, run: RunDirectory, status: Status) -> Status:
        """Re-attach to a run that is not finished (after a restart) and correct its status."""

    @abstractmethod
    def logs(
        self,
        run: RunDirectory,
        replica: int = 0,
        follow: bool = False,
        start: int = 0,
        idle: bool = False,
        timestamps: bool = False,
    ) -> Iterator[str]:
        """The replica's output from byte `start`, in chunks of at most `LOG_CHUNK` bytes read;
        with `follow`, until the run ends. With `idle`, a backend that can (local) yields "" when
        there is nothing new instead of waiting, so an async caller holds no thread meanwhile.
        With `timestamps`, each line starts with its arrival time (ISO 8601 UTC) and a space,
        and `start` counts bytes of that text."""

    @abstractmethod
    def resources(self) -> dict[str, Any]:
        """Backend name, GPUs total/free by type, and what waits for them."""

    @abstractmethod
    def render(self, spec: ExperimentSpec, run_id: str) -> list[dict[str, Any]]:
        """What `submit` would create, without creating it (`kubelab render`)."""

    # -- optional hooks: a backend overrides what it has; callers never probe with getattr ---

    def resume(self, run: RunDirectory) -> None:
        """Start a Stopped run again from its latest checkpoint, as the same run. Refused, by
        default: a backend that cannot restart a run in place says so by name."""
        from kubelab.errors import Conflict

        why = f"the {self.name} backend cannot resume a stopped run; start a new one with `kubelab run`"
        raise Conflict(why)

    def preview(self, spec: ExperimentSpec) -> dict[str, Any]:
        """What a run of `spec` would get or take if submitted now: the GPUs free for it, or the
        runs it would preempt or shrink (the Resources panel asks before a submit). Refused, by
        default: where a cluster's scheduler decides preemption, kubelab cannot answer for it."""
        from kubelab.errors import Conflict

        raise Conflict(f"the {self.name} backend leaves preemption to its scheduler; no preview")

    def events(self, run: RunDirectory) -> list[dict[str, Any]] | None:
        """The platform's events about the run, oldest first; None when the backend has none
        (the local backend: its runner's log says it all)."""
        return None

    def refresh_system(self, run: RunDirectory) -> None:
        """Bring a running run's system samples up to date where the platform records them, not
        the run's own sampler (the cluster's DCGM series); a view calls it before reading.
        Nothing, by default."""
        return None

    def warm_up(self, home: Path, keeper: int | None = None) -> None:
        """Get ready for the first submits from `home` (the local backend fills its warm-runner
        pool); servers and sweep drivers call it, a server naming itself the `keeper` whose
        end the helpers kept ready for it follow. Nothing, by default."""
        return None

    def delete(self, run: RunDirectory) -> None:
        """Remove what the backend keeps beyond the run directory (nothing, by default)."""
        return None

    def start(self) -> None:
        """Begin watching (a long-lived server calls this; the CLI never does)."""
        return None

    def close(self) -> None:
        """Stop watching and release connections."""
        return None

    def stop_grace(self) -> float:
        """Seconds a stopped run may take to record its end (the local runner's SIGTERM-to-SIGKILL
        grace); whoever waits for stopped runs (a sweep's driver) bounds its wait with it. 0, by
        default: `stop` records the end itself."""
        return 0.0

    def cluster(self) -> ClusterAccess | None:
        """The Kubernetes namespace the runs live in, for services that put objects of their own
        beside them: pipelines with `engine: argo` (an Argo Workflow) and schedules (CronJobs,
        which fire without the notebook server). None, by default: pipelines then run with
        kubelab's driver and schedules with the per-home scheduler, on this machine."""
        return None

    def makes_environments(self) -> bool:
        """Does the backend do a spec's `init` steps and build its `environment` before the
        command (`kubelab.environments`)? False, by default: the experiments service then refuses
        such a spec by name instead of running it without them."""
        return False

    def runs_init_steps(self) -> bool:
        """Does the backend do a spec's `init` steps before the command? Where it makes
        environments, yes; a backend may do them without making environments."""
        return self.makes_environments()
