"""The per-user scheduler on one machine: `python -m kubelab.schedules.scheduler HOME`.

One process per `$KUBELAB_HOME` (a flock'ed `scheduler.lock`; the kernel drops it when the
process dies), detached in its own session like runners and drivers, so it outlives the
notebook server and the CLI. Whoever creates or resumes a schedule, and every server at
start, makes sure it runs; it exits when no schedule is active.

Each schedule remembers the last moment it was considered. A tick starts the fires due
between then and now, so after downtime (a reboot, a killed scheduler) it catches up
according to `concurrency`: `allow` starts every missed fire (the latest `CATCH_UP`), `forbid`
and `replace` start one for the latest missed fire; `forbid` skips a fire while the last
one still runs, `replace` stops it first. A fire is recorded before it starts (at most
once: a scheduler killed in between does not start it twice).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubelab.driver_store import flock
from kubelab.experiments import Experiments
from kubelab.records import iso, utcnow
from kubelab.schedules.process import ensure_running
from kubelab.schedules.service import HISTORY, ScheduleDirectory, Schedules

CATCH_UP = 10  # missed fires started after downtime with concurrency: allow
TICK = 0.25  # seconds between looks (cron strings may have a seconds field)


def due(schedule: Any, considered: float, now: float, limit: int = 1000) -> list[float]:
    """The latest `limit` fire times in (considered, now], oldest first.

    Walked back from now, so a long downtime under a seconds-field cron costs `limit`
    look-ups, never one per missed second.
    """
    fires: list[float] = []
    moment = now
    while len(fires) < limit:
        fire = schedule.latest_until(moment)
        if fire is None or fire <= considered:
            break
        fires.append(fire)
        moment = fire - 0.5  # cron's resolution is a second: the next look is strictly earlier
    return fires[::-1]


class Scheduler:
    def __init__(self, home: Path, clock: Callable[[], float] = time.time):
        from kubelab.experiments import Experiments

        self.schedules = Schedules(Experiments(home))
        self.clock = clock

    def tick(self) -> list[dict[str, Any]]:
        """Start every fire that is due now; the fires recorded (started, skipped or refused)."""
        recorded = []
        for folder in self.schedules.all():
            with contextlib.suppress(FileNotFoundError):
                recorded += self.tick_one(folder)
        return recorded

    def tick_one(self, folder: ScheduleDirectory) -> list[dict[str, Any]]:
        now = self.clock()
        with folder.locked():
            if not folder.exists():
                return []
            state = folder.read_state()
            if state["paused"] or folder.cronjob():  # a CronJob fires that one
                return []
            schedule = folder.schedule()
            limit = CATCH_UP if schedule.concurrency == "allow" else 1  # missed fires collapse
            fires = due(schedule, state["considered"], now, limit)
            if not fires:
                return []
            state["considered"] = now  # every fire until now is handled (started or collapsed)
            pending = [{"at": iso(at), "state": "starting"} for at in fires]
            state["fires"] = (state["fires"] + pending)[-HISTORY:]
            folder.write_state(state)  # at most once: recorded before anything starts
        kind = folder.definition()["kind"]
        for fire in pending:
            self.fire(folder, kind, schedule.concurrency, fire)
        with folder.locked():
            if folder.exists():
                state = folder.read_state()
                done = {f["at"]: f for f in pending}
                state["fires"] = [
                    done.get(f["at"], f) if f.get("state") == "starting" else f for f in state["fires"]
                ]
                folder.write_state(state)
        return pending

    def fire(self, folder: ScheduleDirectory, kind: str, concurrency: str, fire: dict[str, Any]) -> None:
        from kubelab.errors import KubelabError

        earlier = [f for f in folder.read_state()["fires"] if f.get("id")]
        last = earlier[-1]["id"] if earlier else None
        if last and concurrency != "allow" and self.schedules.running(kind, last):
            if concurrency == "forbid":
                fire.update(state="skipped", reason=f"{kind} {last} from the last fire is still running")
                return
            self.schedules.stop(kind, last)
        try:
            record = self.schedules.start(folder)
        except KubelabError as exc:
            fire.update(state="failed", reason=exc.message().replace("\n", ";"))
            return
        fire.update(state="started", id=record["id"], started_at=utcnow())

    def active(self) -> bool:
        return any(s.fired_here() for s in self.schedules.all())

    def serve(self) -> int:
        lock = self.schedules.root / "scheduler.lock"
        with flock(lock, blocking=False) as mine:
            if not mine:
                return 0  # another scheduler serves this home
            (self.schedules.root / "scheduler.pid").write_text(str(os.getpid()))
            while self.schedules.root.is_dir() and self.active():
                self.tick()
                time.sleep(TICK)
        return 0


def fire_once(home: Path, schedule_id: str, clock: Callable[[], float] = time.time) -> dict[str, Any]:
    """One fire now, as a CronJob's pod makes it: honours paused, start, end and concurrency."""
    scheduler = Scheduler(home, clock)
    folder = scheduler.schedules.get_dir(schedule_id)
    now, schedule = clock(), folder.schedule()
    fire: dict[str, Any] = {"at": iso(now), "state": "starting"}
    with folder.locked():
        state = folder.read_state()
        if state["paused"]:
            fire.update(state="skipped", reason="the schedule is paused")
        elif (schedule.start is not None and now < schedule.start) or (
            schedule.end is not None and now > schedule.end
        ):
            fire.update(state="skipped", reason="outside the schedule's start and end")
        state["considered"] = max(state["considered"], now)
        state["fires"] = (state["fires"] + [fire])[-HISTORY:]
        folder.write_state(state)
    if fire["state"] == "starting":
        scheduler.fire(folder, folder.definition()["kind"], schedule.concurrency, fire)
    with folder.locked():
        state = folder.read_state()
        state["fires"] = [
            fire if f["at"] == fire["at"] and f.get("state") == "starting" else f for f in state["fires"]
        ]
        folder.write_state(state)
    return fire


class SchedulerKeeper:
    """For the server: every `liveness` seconds, start the scheduler again if a schedule fires
    here and none runs (after a reboot, the first server to start catches the schedules up)."""

    def __init__(self, lab: Experiments, liveness: float = 5.0) -> None:
        self.lab = lab
        self.liveness = liveness
        self.checked = 0.0

    def poll(self) -> None:
        if time.monotonic() - self.checked > self.liveness:
            self.keep_alive()

    def keep_alive(self) -> None:
        self.checked = time.monotonic()
        with contextlib.suppress(OSError, ValueError):
            if any(s.fired_here() for s in Schedules(self.lab).all()):
                ensure_running(self.lab.home)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m kubelab.schedules.scheduler KUBELAB_HOME", file=sys.stderr)
        return 2
    return Scheduler(Path(args[0])).serve()


if __name__ == "__main__":
    sys.exit(main())
