"""For the server's event stream: which schedules were created, changed or removed.

A schedule changes when its state file is written (paused, resumed, fired, a fire's
outcome), by this server, the CLI or the scheduler process alike: the file's stamp is the
only thing looked at, so an unchanged schedule costs a `stat` per look.
"""

from __future__ import annotations

from typing import Any

from kubelab.experiments import Experiments
from kubelab.schedules.service import ScheduleDirectory, Schedules


def _stamp(folder: ScheduleDirectory) -> int | None:
    try:
        return folder.state_file.stat().st_mtime_ns
    except FileNotFoundError:
        return None  # being created: its state is written last


class ScheduleWatcher:
    def __init__(self, lab: Experiments):
        self.schedules = Schedules(lab)
        self.stamps: dict[str, int | None] = {}

    def start(self) -> None:
        """Only later changes are events: note what exists now."""
        self.stamps = {folder.id: _stamp(folder) for folder in self.schedules.all()}

    def poll(self) -> tuple[list[dict[str, Any]], list[str]]:
        """The records of schedules created or changed since the last look, and the ids of
        those removed."""
        changed: list[dict[str, Any]] = []
        current: dict[str, int | None] = {}
        for folder in self.schedules.all():
            stamp = current[folder.id] = _stamp(folder)
            if stamp is None or stamp == self.stamps.get(folder.id):
                continue
            try:
                changed.append(self.schedules.record(folder))
            except (OSError, ValueError):  # removed or half-written meanwhile: the next look
                current[folder.id] = self.stamps.get(folder.id)
        removed = [schedule_id for schedule_id in self.stamps if schedule_id not in current]
        self.stamps = current
        return changed, removed
