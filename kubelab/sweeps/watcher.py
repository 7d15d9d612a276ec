"""For the server's event stream: which sweeps changed, and their drivers kept alive.

The server's event hub polls a `SweepWatcher` from its thread; see the class.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from kubelab.experiments import Experiments
from kubelab.sweeps.service import Sweeps


class SweepWatcher:
    """For the server's event stream: which sweeps changed since the last look.

    A look costs a directory listing and one `stat` per sweep. Every `liveness` seconds it
    also restarts the driver of any Running sweep whose driver died, so a server keeps its
    sweeps going even when nobody lists them, and keeps a warm driver and warm runners
    (`kubelab.warm`), so a sweep started from the server skips the helpers' imports.
    """

    def __init__(self, lab: Experiments, liveness: float = 5.0):
        self.sweeps = Sweeps(lab)
        self.stamps: dict[str, int | None] = {}
        self.liveness = liveness
        self.checked = 0.0

    def start(self) -> None:
        for sweep in self.sweeps.store.all():
            self.stamps[sweep.id] = sweep.state_mtime()
        self.restart_dead_drivers()

    def keep_warm(self) -> None:
        from kubelab.warm import DRIVER, WarmPool

        lab = self.sweeps.lab
        WarmPool(lab.home, DRIVER).top_up(keeper=os.getpid())
        lab.backend.warm_up(lab.home, keeper=os.getpid())

    def restart_dead_drivers(self) -> None:
        self.checked = time.monotonic()
        self.keep_warm()
        for sweep in self.sweeps.store.all():
            try:
                self.sweeps.ensure_driver(sweep)
            except (OSError, ValueError, json.JSONDecodeError):
                continue

    def poll(self) -> list[dict[str, Any]]:
        """Records of the sweeps whose state changed (new ones included)."""
        if time.monotonic() - self.checked > self.liveness:
            self.restart_dead_drivers()
        changed = []
        for sweep in self.sweeps.store.all():
            stamp = sweep.state_mtime()
            if stamp == self.stamps.get(sweep.id):
                continue
            self.stamps[sweep.id] = stamp
            try:
                changed.append(self.sweeps.record(sweep))
            except (OSError, ValueError):
                continue
        return changed
