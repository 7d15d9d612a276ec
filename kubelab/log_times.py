"""When each line of a log arrived: a side index beside the log, and lines prefixed with it.

The log file stays byte for byte what the program printed (it is downloaded, and a failed
run's exception is read from it). Beside it, `<name>.log.times` holds one entry per piece of
output as it appeared: `<end offset> <unix time>`, the log's bytes before `end offset` had
arrived by then (the earliest entry that covers a byte dates it). The local runner writes the index by
watching the log grow (`LogClock`); the Kubernetes backend writes it when it archives a pod's
log read with the API's own timestamps. Readers prefix each line with its piece's time in
ISO 8601 UTC, as `kubectl logs --timestamps` does.

The runner watches the file rather than reading the program's output through a pipe: a pipe
would make a detached run depend on the runner staying alive (a child writing after the
runner died gets EPIPE, or blocks when a surviving reader stops draining), while the file
needs nobody. The cost is resolution: lines written within one tick of the watcher
(`LogClock.every`) share the time of the last of them.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType

SUFFIX = ".times"


def index_of(log: Path) -> Path:
    return log.with_name(log.name + SUFFIX)


def iso(seconds: float) -> str:
    """`2026-11-24T01:07:54.123456Z`: RFC 3339 in UTC, as the pod logs API writes it."""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LogClock(threading.Thread):
    """Appends `<size> <time>` to each log's index whenever the log has grown: the bytes up to
    `size` had arrived by `time`, the log's modification time (its last write, so a piece
    written in one go is dated exactly). A log that shrank (rewritten) starts anew."""

    def __init__(self, logs: list[Path], every: float = 0.02):
        super().__init__(daemon=True, name="kubelab-log-clock")
        self.logs, self.every = logs, every
        self.sizes = dict.fromkeys(logs, 0)
        self.done = threading.Event()

    def tick(self) -> None:
        for log in self.logs:
            try:
                stat = log.stat()
            except FileNotFoundError:
                continue
            size = stat.st_size
            seen = self.sizes[log]
            if size == seen:
                continue
            if size < seen:
                index_of(log).unlink(missing_ok=True)
                seen = 0
            self.sizes[log] = size
            if size > seen:
                with open(index_of(log), "a") as index:
                    index.write(f"{size} {stat.st_mtime:.6f}\n")

    def safe_tick(self) -> None:
        """A tick that cannot fail the run: without its index a log is only untimed."""
        with contextlib.suppress(OSError, ValueError):
            self.tick()

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.safe_tick()

    def __enter__(self) -> LogClock:
        self.start()
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.done.set()
        self.join()
        self.safe_tick()  # what the run wrote last


class Times:
    """A log's index, read as far as needed: the time of the piece holding a byte."""

    def __init__(self, log: Path):
        self.log, self.path = log, index_of(log)
        self.ends: list[int] = []
        self.seconds: list[float] = []
        self.read_to = 0

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.read_to)
                data = handle.read()
        except FileNotFoundError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        self.read_to += len(complete)
        for line in complete.decode().splitlines():
            end, _, seconds = line.partition(" ")
            self.ends.append(int(end))
            self.seconds.append(float(seconds))

    def at(self, offset: int) -> str:
        if not self.ends or offset >= self.ends[-1]:
            self._load()
        where = bisect.bisect_right(self.ends, offset)
        if where < len(self.ends):
            return iso(self.seconds[where])
        # Not indexed: the clock has not seen it yet (it will within a tick), or the runner
        # that kept the index is gone. The log's last change is the best bound.
        try:
            return iso(self.log.stat().st_mtime)
        except FileNotFoundError:
            return iso(datetime.now(timezone.utc).timestamp())


def stamped(chunks: Iterator[str], time_at: Callable[[int], str]) -> Iterator[str]:
    """The log's text with each line prefixed by `time_at(its first byte)` and a space.
    Empty chunks (a follower's "nothing new") pass through."""
    position, line_start = 0, True
    for chunk in chunks:
        if not chunk:
            yield chunk
            continue
        out = []
        for line in chunk.splitlines(keepends=True):
            if line_start:
                out.append(time_at(position) + " ")
            out.append(line)
            position += len(line.encode())
            line_start = line.endswith(("\n", "\r"))
        yield "".join(out)


def split_stamped(text: str) -> tuple[str, list[tuple[int, float]]]:
    """A log read with the pod logs API's `timestamps=true`: its own text and its index."""
    body: list[str] = []
    entries: list[tuple[int, float]] = []
    position = 0
    for line in text.splitlines(keepends=True):
        stamp, sep, rest = line.partition(" ")
        seconds = _parse(stamp) if sep else None
        if seconds is None:
            rest = line
        body.append(rest)
        position += len(rest.encode())
        if seconds is not None:
            entries.append((position, seconds))
    return "".join(body), entries


def write_index(log: Path, entries: list[tuple[int, float]]) -> None:
    index_of(log).write_text("".join(f"{offset} {seconds:.6f}\n" for offset, seconds in entries))


def _parse(stamp: str) -> float | None:
    """Seconds of an RFC 3339 time, to the microsecond (what a float of seconds since 1970 holds)."""
    if not stamp.endswith("Z") or "T" not in stamp:
        return None
    whole, _, fraction = stamp[:-1].partition(".")
    try:
        seconds = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
        return seconds + (float(f"0.{fraction[:6]}") if fraction.isdigit() else 0.0)
    except ValueError:
        return None
