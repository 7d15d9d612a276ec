"""Where one user's kubelab state lives: `$KUBELAB_HOME`, else `~/.kubelab`.

Its own module so that the experiments service and the backends (which both need it)
import it without importing each other.
"""

from __future__ import annotations

import os
from pathlib import Path


def default_home() -> Path:
    return Path(os.environ.get("KUBELAB_HOME") or Path.home() / ".kubelab").expanduser()
