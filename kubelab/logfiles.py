"""Reading logs in bounded pieces: a 400 MB log is never in memory at once.

Logs are bytes on disk (or on the wire); readers get text, decoded incrementally so that a
character split across two reads is never torn, and may ask for a byte range.
"""

from __future__ import annotations

import codecs
import os
import time
from collections.abc import Callable, Iterator

LOG_CHUNK = 1 << 20  # bytes per read: memory per follower stays this small


def read_bytes(path: os.PathLike[str], offset: int, limit: int = LOG_CHUNK) -> bytes:
    """Up to `limit` bytes of `path` from `offset`; nothing when the file is missing."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read(limit)
    except FileNotFoundError:
        return b""


def read_from(path: os.PathLike[str], offset: int, limit: int = 8 * LOG_CHUNK) -> tuple[str, int]:
    """Text appended to `path` since `offset` (at most `limit` bytes), and the new offset: how the
    sweep driver and the server's event hub follow a run's `metrics.jsonl`, whatever its backend."""
    data = read_bytes(path, offset, limit)
    return data.decode(errors="replace"), offset + len(data)


def decoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


def file_text(path: os.PathLike[str], start: int = 0) -> Iterator[str]:
    """The file from byte `start` to its current end, as text in chunks of at most LOG_CHUNK bytes."""
    text = decoder()
    offset = start
    while data := read_bytes(path, offset):
        offset += len(data)
        if chunk := text.decode(data):
            yield chunk
    if tail := text.decode(b"", final=True):
        yield tail


def byte_range(chunks: Iterator[str], start: int = 0, length: int | None = None) -> Iterator[str]:
    """Bytes `start` to `start + length` of a text stream (for sources that cannot seek).
    Empty chunks (a follower's "nothing new") pass through: the caller waits its own way."""
    position, end = 0, None if length is None else start + length
    text = decoder()
    for chunk in chunks:
        if not chunk:
            yield chunk
            continue
        data = chunk.encode()
        low = max(start - position, 0)
        high = len(data) if end is None else max(min(end - position, len(data)), 0)
        position += len(data)
        if low < high and (piece := text.decode(data[low:high])):
            yield piece
        if end is not None and position >= end:
            break
    if tail := text.decode(b"", final=True):
        yield tail


def follow_file(
    path: os.PathLike[str], finished: Callable[[], bool], start: int = 0, idle: bool = False
) -> Iterator[str]:
    """A file's text from byte `start`, in chunks, until `finished()` says no more will come (it
    is asked before each read, so what was written before the end is all read); with `idle`, an
    empty chunk instead of a wait when nothing is new (the server waits its own way)."""
    offset, text = start, decoder()
    while True:
        done = finished()
        data = read_bytes(path, offset)
        if data:
            offset += len(data)
            if chunk := text.decode(data):
                yield chunk
        elif done:
            if tail := text.decode(b"", final=True):
                yield tail
            return
        elif idle:
            yield ""
        else:
            time.sleep(0.1)
