"""The experiments service: one user's experiments, whatever the entry point.

REST handlers, the CLI and the magics all call this class, so validation, path rules
and records are the same everywhere. It owns the run directories under
`$KUBELAB_HOME/runs/` and hands the work to a backend.
"""

from __future__ import annotations

import builtins
import getpass
import os
import re
import shutil
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubelab.backends.base import Backend
from kubelab.backends.registry import make_backend
from kubelab.checkpoints import copy_checkpoint
from kubelab.environments import prepare as environments
from kubelab.errors import FieldError, KubelabError, NotFound, ValidationError
from kubelab.home import default_home
from kubelab.index import Changes, RunIndex
from kubelab.logfiles import byte_range, follow_file
from kubelab.provenance import record_code
from kubelab.records import PENDING, RUNNING, TERMINAL, RunDirectory, Status, summary
from kubelab.reopen import parent_of
from kubelab.run_notes import checked_note, edited_tags
from kubelab.run_preview import preview_spec
from kubelab.run_timeline import timeline_record
from kubelab.spec import ExperimentSpec

RUN_ID = re.compile(r"^[0-9a-z]{12}$")
BUILD_REPLICA = "build"  # the log tab of a run's init steps and environment build (logs/build.log)
SNAPSHOT_LIMIT = 200 * 2**20  # bytes of code copied per experiment
SNAPSHOT_IGNORE = shutil.ignore_patterns(
    ".git", "__pycache__", ".ipynb_checkpoints", "node_modules", ".venv", "*.pyc", ".kubelab"
)


class Experiments:
    def __init__(self, home: Path | None = None, backend: Backend | None = None, user: str | None = None):
        self.home = Path(home) if home else default_home()
        self.runs_root = self.home / "runs"
        self.runs_root.mkdir(parents=True, exist_ok=True)
        self._backend = backend
        self.user = user or os.environ.get("JUPYTERHUB_USER") or getpass.getuser()
        self.index = RunIndex(self.runs_root)

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = make_backend()  # $KUBELAB_BACKEND, else local
        return self._backend

    # -- submitting -------------------------------------------------------------------
    def prepare(
        self, data: dict[str, Any] | ExperimentSpec, base_dir: Path | None = None, confine: bool = False
    ) -> ExperimentSpec:
        """Validate a spec and resolve its paths against `base_dir` (the submitter's folder).

        With `confine`, paths must stay inside `base_dir`: requests over REST never
        reach outside the user's workspace.
        """
        spec = data if isinstance(data, ExperimentSpec) else ExperimentSpec.parse(data)
        base = Path(base_dir or os.getcwd()).resolve()
        problems: list[FieldError] = []
        if not self.backend.makes_environments():
            where = f"the {self.backend.name} backend"
            if spec.environment:
                problems.append(
                    FieldError("environment", f"{where} does not build environments: use an image")
                )
            if spec.init and not self.backend.runs_init_steps():
                problems.append(
                    FieldError("init", f"{where} does not run init steps: put it in the code or image")
                )
        if spec.workdir and not (spec.init and not os.path.isabs(spec.workdir)):  # else in code/
            spec.workdir = str(self._resolve(base, spec.workdir, "workdir", confine, problems))
        if spec.code and spec.code.path:
            code = self._resolve(base, spec.code.path, "code.path", confine, problems)
            if not code.is_dir() and not problems:
                problems.append(FieldError("code.path", f"'{spec.code.path}' is not a directory"))
            spec.code.path = str(code)
        if problems:
            raise ValidationError("invalid experiment spec", problems)
        if not spec.workdir and not spec.code and not spec.init:  # init steps work in code/
            spec.workdir = str(base)
        spec.name = spec.display_name
        if spec.code and spec.code.source is not None and not spec.command:
            spec.command = ["python", spec.code.filename]
        return spec

    @staticmethod
    def _resolve(base: Path, value: str, path: str, confine: bool, problems: list[FieldError]) -> Path:
        target = (base / Path(value).expanduser()).resolve()
        if confine and target != base and base not in target.parents:
            problems.append(FieldError(path, f"'{value}' is outside the workspace"))
        elif not target.exists():
            problems.append(FieldError(path, f"'{value}' does not exist"))
        return target

    def submit(
        self,
        data: dict[str, Any] | ExperimentSpec,
        base_dir: Path | None = None,
        confine: bool = False,
        sweep: str | None = None,
        trial: int | None = None,
        pipeline: str | None = None,
        pipeline_step: str | None = None,
        checkpoint: Path | None = None,
    ) -> dict[str, Any]:
        """Validate, write the run directory, snapshot the code, and hand it to the backend.

        `checkpoint`, a checkpoint folder of another run, is copied into this run's checkpoints
        first, so the trial's `kubelab.latest_checkpoint()` is it (a PBT member goes on from its
        parent's)."""
        spec = self.prepare(data, base_dir, confine)
        folder = Path(spec.code.path) if spec.code and spec.code.path else None
        folder = folder or (Path(spec.workdir) if spec.workdir else None)
        status = Status(
            state=PENDING,
            reason="submitted",
            backend=self.backend.name,
            user=self.user,
            sweep=sweep,
            trial=trial,
            pipeline=pipeline,
            pipeline_step=pipeline_step,
            parent=parent_of(folder),
        )
        run = RunDirectory.create(self.runs_root, spec.to_dict(), status)
        try:
            if folder is not None:
                record_code(run, folder)  # the git commit and uncommitted changes, before the copy
            self._snapshot(run, spec)
            environments.record(run, spec, base_dir or Path.cwd(), confine)
            if checkpoint is not None:
                if not checkpoint.is_dir():
                    raise NotFound(f"checkpoint {checkpoint} to go on from is gone")
                copy_checkpoint(checkpoint, run.checkpoints_dir)
            self.backend.submit(run, spec)
        except Exception:
            run.delete()  # nothing half-made is left behind
            raise
        return summary(run, status, spec.to_dict())

    def _snapshot(self, run: RunDirectory, spec: ExperimentSpec) -> None:
        if spec.code is None:
            return
        if spec.code.source is not None:
            run.code_dir.mkdir()
            (run.code_dir / spec.code.filename).write_text(spec.code.source)
        else:
            source = Path(spec.code.path or ".")
            size = _tree_size(source, self.home)
            if size > SNAPSHOT_LIMIT:
                raise ValidationError(
                    "invalid experiment spec",
                    [
                        FieldError(
                            "code.path",
                            f"holds {size / 2**20:.0f} MiB; code snapshots are limited to "
                            f"{SNAPSHOT_LIMIT // 2**20} MiB (keep data out of the code folder)",
                        )
                    ],
                )
            home = self.home.resolve()
            ignore = SNAPSHOT_IGNORE

            def skip(folder: str, names: list[str]) -> set[str]:
                skipped = set(ignore(folder, names)) | {n for n in names if _special(Path(folder) / n)}
                return skipped | {n for n in names if (Path(folder) / n).resolve() == home}

            shutil.copytree(source, run.code_dir, ignore=skip, symlinks=True)
        if not spec.workdir:
            spec.workdir = str(run.code_dir)
            run.write_spec(spec.to_dict())

    # -- reading ----------------------------------------------------------------------
    def run(self, run_id: str) -> RunDirectory:
        if not isinstance(run_id, str) or not RUN_ID.match(run_id):
            raise NotFound(f"no experiment '{run_id}'", [FieldError("id", "is not an experiment id")])
        run = RunDirectory(self.runs_root / run_id)
        if not run.exists():
            raise NotFound(f"no experiment '{run_id}'")
        return run

    def get(self, run_id: str) -> dict[str, Any]:
        run = self.run(run_id)
        status = self.backend.reconcile(run, run.status())
        spec = run.spec()
        history = [{k: v for k, v in vars(t).items() if v is not None} for t in status.history]
        detail = {
            **summary(run, status, spec),
            "spec": spec,
            "history": history,
            "timeline": timeline_record(history),  # spans: sizes, preemptions, resumes
            "replica_status": status.replicas,
            "run_dir": str(run.path),
        }
        events = self.backend.events(run)  # Kubernetes events, where the backend has them
        if events is not None:
            detail["events"] = events
        return detail

    def refresh(self) -> Changes:
        """Reconcile unfinished runs with the backend and update the index; returns the changes."""
        changes = self.index.refresh()
        for record in list(self.index.records()):
            if record["status"] not in TERMINAL:
                run = RunDirectory(self.runs_root / record["id"])
                try:
                    self.backend.reconcile(run, run.status())
                except (OSError, ValueError, KubelabError):  # one bad run must not hide the others
                    continue
        return changes

    def list(
        self, query: str = "", sort: str = "", limit: int | None = None, offset: int = 0
    ) -> tuple[list[dict[str, Any]], int]:
        """Records matching a PQL query, sorted (newest first by default), and the total."""
        from kubelab.query import compile_query, compile_sort

        matches = compile_query(query)
        self.refresh()
        self.index.save()
        records = [r for r in self.index.records() if matches.matches(r)]
        if sort:
            records = compile_sort(sort)(records)
        else:
            records.sort(key=lambda r: r["id"], reverse=True)
        total = len(records)
        end = None if limit is None else offset + limit
        return records[offset:end], total

    def of_sweep(self, sweep_id: str) -> builtins.list[dict[str, Any]]:
        """The records of a sweep's trials: `list(f"sweep:{sweep_id}")` without the query
        language's imports (~25 ms), for a CLI following its sweep to the end."""
        self.refresh()
        self.index.save()
        return [r for r in self.index.records() if r.get("sweep") == sweep_id]

    def metrics(self, run_id: str) -> builtins.list[dict[str, Any]]:  # `list` is a method here
        return list(self.run(run_id).metrics())

    def system(self, run_id: str, points: int | None = None) -> dict[str, Any]:
        """The run's system sums and chart series (kubelab/system_series.py; numpy, imported
        here: a CLI that starts a sweep or a run never pays for it), brought up to date first
        where the backend records them (a running run's DCGM series on Kubernetes)."""
        from kubelab.system_series import DEFAULT_POINTS, read_system

        run = self.run(run_id)
        self.backend.refresh_system(run)
        return read_system(run.system_file, DEFAULT_POINTS if points is None else points)

    def logs(
        self,
        run_id: str,
        replica: int | str = 0,
        follow: bool = False,
        start: int = 0,
        length: int | None = None,
        idle: bool = False,
        timestamps: bool = False,
    ) -> Iterator[str]:
        """A replica's output from byte `start` (`length` bytes, or to the end), in bounded chunks;
        with `timestamps`, each line prefixed by its time (the bytes counted are then of that text)."""
        run = self.run(run_id)
        replicas = run.spec().get("replicas", 1)
        if replica == BUILD_REPLICA:  # init steps and the environment's build, whatever the backend
            status = run.status
            ended = lambda: not follow or status().terminal or status().state == RUNNING  # noqa: E731
            chunks = follow_file(run.logs_dir / environments.BUILD_LOG, ended, start, idle)
            return chunks if length is None else byte_range(chunks, 0, length)
        if not isinstance(replica, int) or not 0 <= replica < replicas:
            raise ValidationError(
                "invalid replica",
                [FieldError("replica", f"must be {BUILD_REPLICA} or 0 to {replicas - 1} for this run")],
            )
        chunks = self.backend.logs(run, replica, follow, start=start, idle=idle, timestamps=timestamps)
        return chunks if length is None else byte_range(chunks, 0, length)

    def resources(self) -> dict[str, Any]:
        return self.backend.resources()

    def preview(self, query: Mapping[str, str]) -> dict[str, Any]:
        """What a new run (`gpus`, `priority`, `gpu_type`, `replicas`) would preempt or shrink now."""
        return self.backend.preview(preview_spec(query))

    # -- changing -----------------------------------------------------------------------
    def stop(self, run_id: str, pruned: bool = False) -> dict[str, Any]:
        """Stop a run; `pruned` records it as early-stopped by its sweep, not as failed."""
        run = self.run(run_id)
        self.backend.stop(run, pruned=pruned)
        return summary(run)

    def resume(self, run_id: str) -> dict[str, Any]:
        """Start a Stopped run again, the same run, from its latest checkpoint (`Backend.resume`)."""
        run = self.run(run_id)
        self.backend.resume(run)
        self.index.touch(run.id)
        return summary(run)

    def annotate(
        self, run_id: str, add: Sequence[str] = (), remove: Sequence[str] = (), note: str | None = None
    ) -> dict[str, Any]:
        """Edit a run's tags (`add`, `remove`) and note; they live in its `notes.json`."""
        run = self.run(run_id)
        record = summary(run)
        notes = run.notes()
        notes["tags"] = edited_tags(record["tags"], list(add), list(remove))
        if note is not None:
            notes["note"] = checked_note(note)
        run.write_notes(notes)
        self.index.touch(run.id)
        return summary(run)

    def diff(self, a: str, b: str) -> dict[str, Any]:
        """What differs between two runs (kubelab/run_diff.py)."""
        from kubelab.run_diff import diff_runs

        run_a, run_b = self.run(a), self.run(b)
        return diff_runs(run_a, run_b, summary(run_a), summary(run_b))

    def reopen(self, run_id: str, dest: Path) -> dict[str, Any]:
        """The run's snapshot as a new folder with its parameters (kubelab/reopen.py)."""
        from kubelab.reopen import reopen

        run = self.run(run_id)
        return reopen(run, summary(run)["params"], dest)

    def delete(self, run_id: str) -> None:
        run = self.run(run_id)
        if not run.status().terminal:
            self.backend.stop(run)
        self.backend.delete(run)
        run.delete()


def _special(path: Path) -> bool:
    """A FIFO, socket or device: not code, and copying one would block or fail the submit."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))


def _tree_size(root: Path, skip: Path) -> int:
    total = 0
    skip = skip.resolve()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [
            d
            for d in dirs
            if d not in (".git", "node_modules", ".venv", "__pycache__")
            and (Path(folder) / d).resolve() != skip
        ]
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
        if total > SNAPSHOT_LIMIT:
            break
    return total
