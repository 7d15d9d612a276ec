"""Authorizers for tests, loaded by a real Jupyter server (`--ServerApp.authorizer_class`).

`ReadOnly` lets every request read and nothing else; `NoExecute` lets a user read and change
but not run code. The server records each decision it asked about in `KUBELAB_AUTHZ_LOG`, so a
test sees which (action, resource) every handler asked for.
"""

from __future__ import annotations

import json
import os

from jupyter_server.auth.authorizer import Authorizer
from jupyter_server.auth.identity import User
from jupyter_server.base.handlers import JupyterHandler


class Recording(Authorizer):
    allowed: tuple[str, ...] = ()

    def is_authorized(self, handler: JupyterHandler, user: User, action: str, resource: str) -> bool:
        log = os.environ.get("KUBELAB_AUTHZ_LOG")
        if log and resource.startswith("kubelab"):
            with open(log, "a") as out:
                out.write(json.dumps([handler.request.method, handler.request.path, action, resource]) + "\n")
        return action in self.allowed


class ReadOnly(Recording):
    allowed = ("read",)


class NoExecute(Recording):
    allowed = ("read", "write")
