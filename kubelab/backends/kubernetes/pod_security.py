"""What the `restricted` Pod Security level asks of every pod kubelab builds for a user.

One definition for a run's pods (`builders`) and for the pods that run kubelab commands off
the notebook (`cronjob.pod_spec`: schedules, Argo steps), so user namespaces can enforce
`restricted` without any kubelab pod being refused.
"""

from __future__ import annotations

from typing import Any

from kubelab.backends.kubernetes.notebook_env import NotebookEnv


def container_security() -> dict[str, Any]:
    """No privilege escalation, not root, no Linux capabilities."""
    return {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}


def pod_security(nb: NotebookEnv) -> dict[str, Any]:
    """The notebook user's uid and gid (files in shared volumes stay theirs), never root, and
    the runtime's default seccomp profile."""
    return {
        "runAsNonRoot": True,
        "runAsUser": nb.uid,
        "runAsGroup": nb.gid,
        "fsGroup": nb.gid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
