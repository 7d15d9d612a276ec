"""What another account on the machine can try against a user's processes: read every command
line, environment and TensorBoard record it can, and ask a loopback port directly.

Each snippet runs under `/usr/bin/python3` as that account (`system_users.as_user`), with the
standard library only: the test virtualenv may be closed to it.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

OTHER_PYTHON = "/usr/bin/python3"  # the attacker's own: the test virtualenv may be closed to it

# Run as the other account: everything it can read of every process and of TensorBoard's records.
SNOOP = textwrap.dedent(
    """
    import glob, json, sys
    seen = []
    for pattern in ("/proc/*/cmdline", "/proc/*/environ", "/tmp/.tensorboard-info/*"):
        for path in glob.glob(pattern):
            try:
                with open(path, "rb") as f:
                    seen.append(f.read().decode(errors="replace"))
            except OSError:
                pass
    print(json.dumps(seen))
    """
)

# Run as the other account: TensorBoard's port, asked directly with the right path.
ASK = textwrap.dedent(
    """
    import sys, urllib.error, urllib.request
    url = sys.argv[1]
    try:
        with urllib.request.urlopen(url, timeout=20) as reply:
            print(reply.status, reply.read().decode(errors="replace"))
    except urllib.error.HTTPError as exc:
        print(exc.code, exc.read().decode(errors="replace"))
    """
)


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (its socket inodes in /proc/net/tcp, state 0A)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and fields[9] in inodes:
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports
