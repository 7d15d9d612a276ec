"""A run's `init` steps on Kubernetes: an init container on the workspace (pure, no API calls).

It runs `python -m kubelab.environments.init_run RUN_DIR` in the notebook's image (which has
kubelab), with the main container's workspace mounts and the same `restricted` security, so the
git clone, artifacts, files and paths land in the run's code folder on the workspace before the
training container starts. Its only argument is the run directory: a private repository's
credential is read from the workspace (`$KUBELAB_HOME/git-credentials`), never put in the
manifest. Its failure is the pod's: the run fails naming the init step (`states.describe_pod`).
"""

from __future__ import annotations

from typing import Any

from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.backends.kubernetes.pod_security import container_security
from kubelab.errors import FieldError
from kubelab.spec import ExperimentSpec

INIT_CONTAINER = "init-steps"
ENTRY_POINT = "kubelab.environments.init_run"
Manifest = dict[str, Any]


def init_problems(spec: ExperimentSpec, nb: NotebookEnv) -> list[FieldError]:
    """What keeps a spec's `init` off the cluster, named by field (nothing when it has none)."""
    if not spec.init:
        return []
    if not nb.image:
        why = "runs in the notebook's image, which is unknown (KUBELAB_IMAGE is not set)"
        return [FieldError("init", why)]
    if not nb.mounts:
        return [FieldError("init", "needs the workspace volume (KUBELAB_VOLUMES is not set)")]
    if spec.engine == "kubeflow" or spec.replicas > 1 or spec.parameter_servers:
        why = "on Kubernetes runs before a one-replica Job; clone into the workspace for distributed runs"
        return [FieldError("init", why)]
    return []


def init_containers(
    spec: ExperimentSpec, run_dir: str, nb: NotebookEnv, resources: Manifest
) -> list[Manifest]:
    """The pod's `initContainers` (none without `init`); `resources` are the main container's
    CPU and memory (the pod asks for the larger of the two, so this costs nothing more)."""
    if not spec.init:
        return []
    container: Manifest = {
        "name": INIT_CONTAINER,
        "image": nb.image,
        "command": ["python", "-m", ENTRY_POINT, run_dir.rstrip("/")],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
        "securityContext": container_security(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": list(nb.mounts),
    }
    if resources:
        container["resources"] = resources
    return [container]
