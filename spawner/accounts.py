"""Which system account a hub name runs as, when the hub creates accounts itself.

With `create_system_users` the authenticator (NativeAuthenticator, OAuth) vouches for a hub
name, not for a system account: a sign-up named `daemon`, or after a colleague's login name,
must not get a server running as that account. So the hub maps a hub name only to an account
it created itself: `useradd` makes it (an ordinary uid, at least `UID_MIN`), and its name and
uid go into a record only root can write (`<root>/system-accounts.json`, root's, `0600`). An
existing account that is not in the record, or whose uid changed since, is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from kubelab.errors import KubelabError

RECORD = "system-accounts.json"
SYSTEM_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


def uid_min(login_defs: Path = Path("/etc/login.defs")) -> int:
    """The first uid of ordinary accounts (`UID_MIN`; 1000 where login.defs does not say)."""
    with contextlib.suppress(OSError):
        for line in login_defs.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "UID_MIN" and parts[1].isdigit():
                return int(parts[1])
    return 1000


def created_accounts(root: Path) -> dict[str, int]:
    """The accounts this hub created (name -> uid). A record that is not a plain file of
    root's, closed to others, is refused rather than trusted."""
    try:
        fd = os.open(root / RECORD, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise KubelabError(f"cannot read the hub's account record {root / RECORD}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise KubelabError(
                f"the hub's account record {root / RECORD} is not a file only the hub's account "
                "may write; the admin should check who changed it"
            )
        data = json.loads(handle.read() or b"{}")
    accounts = data.get("accounts", {}) if isinstance(data, dict) else {}
    return {str(k): int(v) for k, v in accounts.items() if isinstance(v, int)}


def record_account(root: Path, name: str, uid: int) -> None:
    """Add `name` to the record (written whole, then renamed over the old one)."""
    accounts = {**created_accounts(root), name: uid}
    root.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=root, prefix=f".{RECORD}.")
    try:
        with os.fdopen(fd, "w") as handle:  # mkstemp: 0600, this account's
            json.dump({"accounts": accounts}, handle, indent=1, sort_keys=True)
        os.replace(temporary, root / RECORD)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def hub_account(name: str, root: Path) -> Any:
    """The system account of hub user `name` for a hub that creates accounts: the one it made
    earlier, or a new one; never one it did not make, never a system uid."""
    if not SYSTEM_NAME.fullmatch(name):
        raise KubelabError(
            f"'{name}' cannot be a system account name (lowercase letters, digits, _ "
            "and -, at most 32); ask the admin to create an account for you"
        )
    made = created_accounts(root)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        entry = None
    if entry is None:
        entry = _useradd(name)
        if entry.pw_uid < uid_min():
            raise KubelabError(f"the new account '{name}' got uid {entry.pw_uid}, a system uid: not used")
        record_account(root, name, entry.pw_uid)
    elif made.get(name) != entry.pw_uid or entry.pw_uid < uid_min():
        raise KubelabError(
            f"a system account named '{name}' already exists and this hub did not create it, so "
            "the hub will not run your server as that account; sign up under another name, or ask "
            "the admin"
        )
    return entry


def _useradd(name: str) -> Any:
    done = subprocess.run(
        ["useradd", "--create-home", "--shell", "/bin/bash", "--", name], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise KubelabError(f"could not create the system account '{name}': {done.stderr.strip()}")
    return pwd.getpwnam(name)
