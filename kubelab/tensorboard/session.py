"""A TensorBoard session: the runs it shows, its process, and the two URLs it is reached by.

`url` (`<base>/kubelab/tensorboard/<id>/`) is what the API hands out; it sits behind Jupyter's
login and only redirects. The pages themselves are served under `view_prefix`
(`<base>/kubelab/tensorboard-view/<capability>/`), a capability URL in a sandbox of its own:
see `kubelab.tensorboard.sandbox` for why.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STARTING, RUNNING, STOPPED, FAILED = "starting", "running", "stopped", "failed"

_UNSAFE = re.compile(r"[:,\s/\\]+")  # logdir_spec splits on ',' and the first ':'


@dataclass
class TensorBoardSession:
    """One TensorBoard process and the runs it shows."""

    id: str
    logdirs: dict[str, str]
    source: dict[str, Any]
    prefix: str  # the authenticated entry, e.g. /kubelab/tensorboard/<id>
    view_root: str  # where capability URLs live, e.g. /kubelab/tensorboard-view
    # The secret in the pages' URL: whoever holds it reads this TensorBoard, nothing else.
    capability: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    # The header value the Jupyter server's proxy adds; TensorBoard refuses requests without it.
    proxy_token: str | None = field(default=None, repr=False)
    state: str = STARTING
    reason: str = ""
    port: int | None = None
    pid: int | None = None
    started_at: float = field(default_factory=time.time)
    last_access: float = field(default_factory=time.time)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    log_path: Path | None = None
    # Stopped by a user (sidebar, closed tab, `%tensorboard --stop`): a page that comes back
    # must not start it again behind their back, unlike after an idle stop.
    stopped_on_request: bool = False

    @property
    def url(self) -> str:
        return self.prefix + "/"

    @property
    def view_prefix(self) -> str:
        """The path TensorBoard serves under (its `--path_prefix`)."""
        return f"{self.view_root}/{self.capability}"

    @property
    def direct_url(self) -> str:
        """TensorBoard itself on loopback, for a process with no Jupyter server in front of it."""
        return f"http://127.0.0.1:{self.port}{self.view_prefix}/"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "url": self.url,
            "logdirs": dict(self.logdirs),
            "state": self.state,
            "reason": self.reason,
            "source": self.source,
            "pid": self.pid,
            "started_at": self.started_at,
            "last_access": self.last_access,
        }


def session_id(logdirs: dict[str, str]) -> str:
    """The same set of directories always names the same session (names do not count)."""
    digest = hashlib.sha256("\0".join(sorted(logdirs.values())).encode()).hexdigest()
    return digest[:12]


def run_label(record: dict[str, Any]) -> str:
    """A readable run name: `trial-3-lr=0.01-batch=32` for trials, the experiment name otherwise."""
    if record.get("sweep") and record.get("trial") is not None:
        parts = [f"trial-{record['trial']}"]
        for key, value in sorted((record.get("params") or {}).items()):
            text = f"{value:.4g}" if isinstance(value, float) else str(value)
            parts.append(f"{key}={text[:24]}")
        label = "-".join(parts)
    else:
        label = record.get("name") or record["id"]
    return _UNSAFE.sub("_", label).strip("_")[:120] or record["id"]


def logdir_spec(logdirs: dict[str, str]) -> str:
    return ",".join(f"{name}:{path}" for name, path in logdirs.items())
