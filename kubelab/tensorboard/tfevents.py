"""Reported metrics → TensorBoard event files, written on the runner side.

`kubelab.report` only appends a line to the run's `metrics.jsonl` (standard library, one
write): the trial never imports TensorBoard and its report calls cost what they did. The
runner that watches the trial mirrors those lines into `tensorboard/kubelab/` beside the
user's own event files, so a TensorBoard session over the run shows the reported scalars
with their steps and wall times, and the run's GPU and process samples (`system.jsonl`) as
`system/...` scalars stepped by sample, kept apart from the user's tags. The writer is
TensorBoard's own `tensorboard.summary.Writer` (numpy only, no TensorFlow).
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from pathlib import Path
from typing import Any

from kubelab.records import RunDirectory
from kubelab.system_metrics import decode_lines

SUBDIR = "kubelab"  # the run's tensorboard/<SUBDIR>: a run of its own within the logdir
INTERVAL = 1.0  # seconds between looks at metrics.jsonl while the trial runs


def preload() -> None:
    """Import TensorBoard's writer now: a warm runner pays it while idle, not at the end of
    its first run with metrics (~0.2 s, during which it could serve no sweep's next trial)."""
    with contextlib.suppress(ImportError):  # no TensorBoard here: ScalarMirror writes nothing
        import tensorboard.summary  # noqa: F401


def scalars(entry: dict[str, Any], last_step: int) -> list[tuple[str, float, int, float | None]]:
    """(tag, value, step, wall time) for one metrics.jsonl line.

    A final report (`report_final`) goes under `final/<name>` at the last step seen; a
    replica other than rank 0 gets its own `<name>/replica-<n>` series. Values that are
    not finite numbers are skipped, as TensorBoard's charts cannot place them.
    """
    metrics = entry.get("metrics")
    if not isinstance(metrics, dict):
        return []
    final = entry.get("final") is True
    step = entry.get("step")
    step = step if isinstance(step, int) and not isinstance(step, bool) else last_step
    wall = entry.get("time")
    wall = float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) else None
    replica = entry.get("replica")
    out = []
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        tag = f"final/{name}" if final else str(name)
        if isinstance(replica, int) and replica:
            tag = f"{tag}/replica-{replica}"
        out.append((tag, float(value), step, wall))
    return out


class ScalarMirror:
    """Follows one run's `metrics.jsonl` and appends its new complete lines as scalars."""

    def __init__(self, run_dir: Path, tensorboard_dir: Path):
        self.source = RunDirectory(run_dir).metrics_file
        self.system = RunDirectory(run_dir).system_file
        self.target = tensorboard_dir / SUBDIR
        self.offset = 0
        self.system_offset = 0
        self.system_step = 0
        self.last_step = 0
        self.writer: Any = None
        self.unavailable = False

    def sync(self) -> int:
        """Write what was reported since the last call; returns how many scalars."""
        if self.unavailable:
            return 0
        try:
            size = self.source.stat().st_size
        except FileNotFoundError:
            return 0
        if size <= self.offset:
            return 0
        with open(self.source, "rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read(size - self.offset)
        end = chunk.rfind(b"\n") + 1  # a torn last line waits for its end
        if not end:
            return 0
        self.offset += end
        written = 0
        for line in chunk[:end].splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            if isinstance(entry.get("resume"), int):
                # A preempted run resumes after its checkpoint; its next steps are lower than
                # the last written, and TensorBoard purges the orphaned points on reading them.
                self.last_step = max(entry["resume"], 0)
                continue
            for tag, value, step, wall in scalars(entry, self.last_step):
                if not self._open():
                    return written
                self.writer.add_scalar(tag, value, step, wall_time=wall)
                written += 1
            if isinstance(entry.get("step"), int) and not entry.get("final"):
                self.last_step = entry["step"]
        if self.writer is not None:
            self.writer.flush()
        return written

    def sync_system(self) -> int:
        """Write the system samples taken since the last call (`system/gpu0/util`, ...)."""
        if self.unavailable:
            return 0
        try:
            size = self.system.stat().st_size
        except FileNotFoundError:
            return 0
        if size <= self.system_offset:
            return 0
        with open(self.system, "rb") as handle:
            handle.seek(self.system_offset)
            chunk = handle.read(size - self.system_offset)
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.system_offset += len(complete)
        written = 0
        for line in decode_lines(complete):
            values = system_scalars(line)
            if not values or not self._open():
                continue
            for tag, value in values:
                self.writer.add_scalar(tag, value, self.system_step, wall_time=float(line["time"]))
                written += 1
            self.system_step += 1
        if written:
            self.writer.flush()
        return written

    def _open(self) -> bool:
        if self.writer is None:
            try:
                from tensorboard.summary import Writer  # only where TensorBoard is installed
            except ImportError:
                self.unavailable = True
                return False
            self.target.mkdir(parents=True, exist_ok=True)
            self.writer = Writer(str(self.target))
        return True

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class MirrorThread:
    """Runs a ScalarMirror every INTERVAL seconds beside the runner's watch loop, so that
    neither the trial nor the runner's exit detection waits for event-file writes."""

    def __init__(self, mirror: ScalarMirror, interval: float = INTERVAL):
        self.mirror = mirror
        self.interval = interval
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="kubelab-tfevents", daemon=True)

    def __enter__(self) -> MirrorThread:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.done.set()
        self.thread.join()

    def _loop(self) -> None:
        try:
            while not self.done.wait(self.interval):
                self.mirror.sync()
                self.mirror.sync_system()
            self.mirror.sync()  # what the trial reported last
            self.mirror.sync_system()
        except OSError:
            pass  # a run directory that went away (deleted run): nothing left to mirror
        finally:
            self.mirror.close()


def system_scalars(line: dict[str, Any]) -> list[tuple[str, float]]:
    """(tag, value) for one `system.jsonl` sample; the sources line and odd values give none."""
    if not isinstance(line.get("time"), (int, float)):
        return []
    out = []
    for gpu in line.get("gpus") or []:
        if not isinstance(gpu, dict) or not isinstance(gpu.get("index"), int):
            continue
        for field in ("util", "memory_mib", "power_w", "temperature_c"):
            value = gpu.get(field)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out.append((f"system/gpu{gpu['index']}/{field}", float(value)))
    for field in ("cpu_percent", "rss_mib"):
        value = line.get(field)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out.append((f"system/{field}", float(value)))
    return out
