"""JupyterHub configuration for kubelab, for one machine and for Kubernetes.

    KUBELAB_HUB_MODE=local       LocalKubeLabSpawner: servers as local processes (`kubelab hub`)
    KUBELAB_HUB_MODE=kubernetes  KubeLabSpawner: one pod per server, per-user namespaces

Edit GPU_CATALOG and GROUPS below for your lab; `kubelab hub render --user alice --group
vision --options '{"gpus": "1(V100)"}'` prints what a spawn would create with them.
"""

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # JupyterHub provides get_config in the namespace it runs this file in
    from traitlets.config import Config

    def get_config() -> Config: ...


c = get_config()

MODE = os.environ.get("KUBELAB_HUB_MODE", "local")
if MODE not in ("local", "kubernetes"):
    raise ValueError(f"KUBELAB_HUB_MODE must be 'local' or 'kubernetes', not {MODE!r}")

# -- GPU catalog: types (found by the node label `gpu-type`), images and named profiles ------------
GPU_CATALOG = {
    "gpu_label": "gpu-type",
    "gpu_types": [
        {"name": "T4", "label_value": "T4", "resource": "nvidia.com/gpu", "max_per_user": 4},
        {"name": "V100", "label_value": "V100", "resource": "nvidia.com/gpu", "max_per_user": 4},
        {"name": "A100", "label_value": "A100", "resource": "nvidia.com/gpu", "max_per_user": 2},
        {"name": "H100", "label_value": "H100", "resource": "nvidia.com/gpu", "max_per_user": 1},
    ],
    "images": [
        # built from hub_config/notebook/Dockerfile (CPU and CUDA bases; docs/deploy.md)
        os.environ.get("KUBELAB_NOTEBOOK_IMAGE", "kubelab/notebook:0.1.0"),
        "kubelab/notebook-cuda:0.1.0",
        "quay.io/jupyter/pytorch-notebook:cuda12-latest",
        "quay.io/jupyter/tensorflow-notebook:cuda-latest",
    ],
    "profiles": {
        "cpu": {"cpu": "2", "memory": "8Gi", "gpus": 0},
        "1xT4": {"cpu": "4", "memory": "16Gi", "gpus": "1(T4)", "shm": "4Gi"},
        "1xA100": {"cpu": "8", "memory": "64Gi", "gpus": "1(A100)", "shm": "16Gi"},
    },
    "default_cpu": "2",
    "default_memory": "8Gi",
    "default_shm": "2Gi",
}

# -- project groups: created on startup; admins edit their properties in the admin page or API -----
GROUPS = {
    "public": {"users": [], "properties": {"quota": {"user": {"gpus": 1}}}},
    # "vision": {"users": ["alice"], "properties": {
    #     "node_selector": "org=vision",
    #     "volume_mount": "datasets(pvc):/datasets;4G(memory):/dev/shm",
    #     "quota": {"user": {"gpus": 4, "cpu": "32", "memory": "128Gi"}, "group": {"gpus": 8}},
    #     "images": ["quay.io/jupyter/pytorch-notebook:cuda12-latest"]}},
}
c.JupyterHub.load_groups = GROUPS

# -- named servers, authentication --------------------------------------------------------------
c.JupyterHub.allow_named_servers = True
c.JupyterHub.named_server_limit_per_user = 3
# Who may log in as whom. Every choice but the demo proves the user is who they say:
#   pam              (local default) system accounts and their passwords; servers run as them
#   native           NativeAuthenticator: sign-up with admin approval; with the local spawner the
#                    approved user's system account is created at the first spawn
#   oauth            (kubernetes default) GenericOAuthenticator: configure c.GenericOAuthenticator
#                    (or z2jh's hub.config) for your identity provider; see docs/jupyterhub.md
#   shared-password  a DEMO: any name with one password, so anyone can log in as any non-admin
AUTH = os.environ.get("KUBELAB_HUB_AUTH") or ("pam" if MODE == "local" else "oauth")
c.Authenticator.admin_users = set(filter(None, os.environ.get("KUBELAB_HUB_ADMINS", "").split(",")))
if AUTH == "pam":
    c.JupyterHub.authenticator_class = "pam"
    group = os.environ.get("KUBELAB_HUB_GROUP")  # e.g. "lab": only its members may log in
    if group:
        c.PAMAuthenticator.allowed_groups = {group}
    else:
        c.Authenticator.allow_all = True  # any system account, with its own password
elif AUTH == "native":
    # pip install jupyterhub-nativeauthenticator (or kubelab[native]); kubelab's subclass gives its
    # login the timer JupyterHub 6 no longer has (kubelab/spawner/native_login.py)
    c.JupyterHub.authenticator_class = "kubelab.spawner.native_login.KubeLabNativeAuthenticator"
    c.NativeAuthenticator.open_signup = False  # an admin approves each sign-up
    c.Authenticator.allow_all = True
    c.LocalKubeLabSpawner.create_system_users = True
elif AUTH == "oauth":
    c.JupyterHub.authenticator_class = "generic-oauth"  # pip install oauthenticator
    c.Authenticator.allow_all = os.environ.get("KUBELAB_HUB_ALLOW_ALL", "") == "1"
elif AUTH == "shared-password":
    c.JupyterHub.authenticator_class = "shared-password"  # JupyterHub >= 5.3
    c.SharedPasswordAuthenticator.user_password = os.environ.get("KUBELAB_HUB_PASSWORD")
    c.Authenticator.allow_all = True
    if c.Authenticator.admin_users:
        c.SharedPasswordAuthenticator.admin_password = os.environ.get("KUBELAB_HUB_ADMIN_PASSWORD")
else:
    raise ValueError(f"KUBELAB_HUB_AUTH must be pam, native, oauth or shared-password, not {AUTH!r}")

# -- idle culling: every server after an hour idle, GPU servers after 30 minutes of idle GPUs -------
# Both stop at once when the hub does (kubelab.spawner.hub_service restores the SIGINT a hub started
# in the background hands its services ignored; JupyterHub would wait 30 s for each otherwise).
c.JupyterHub.services = [
    {
        "name": "idle-culler",
        "command": [
            sys.executable,
            "-m",
            "kubelab.spawner.hub_service",
            "jupyterhub_idle_culler",
            f"--timeout={os.environ.get('KUBELAB_IDLE_TIMEOUT', '3600')}",
            "--cull-every=300",
        ],
    },
    {
        "name": "gpu-culler",
        "command": [
            sys.executable,
            "-m",
            "kubelab.spawner.culling",
            f"--timeout={os.environ.get('KUBELAB_GPU_IDLE_TIMEOUT', '1800')}",
            f"--minutes={os.environ.get('KUBELAB_GPU_IDLE_MINUTES', '30')}",
            f"--threshold={os.environ.get('KUBELAB_GPU_IDLE_THRESHOLD', '5')}",
            f"--every={os.environ.get('KUBELAB_GPU_CULL_EVERY', '60')}",
            f"--servers-url={os.environ.get('KUBELAB_HUB_PUBLIC_URL', 'http://127.0.0.1:8000')}",
            *(
                [f"--prometheus-url={PROMETHEUS}"]
                if (PROMETHEUS := os.environ.get("KUBELAB_PROMETHEUS_URL"))
                else []
            ),
        ],
    },
]
c.JupyterHub.load_roles = [
    {
        "name": "kubelab-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    },
    {  # the GPU culler also reads the groups' `gpu_idle` and leaves its warning on the server
        "name": "kubelab-gpu-culler",
        "scopes": [
            "list:users",
            "read:users:activity",
            "read:servers",
            "delete:servers",
            "list:groups",
            "read:groups",
            "access:servers",
        ],
        "services": ["gpu-culler"],
    },
]

if MODE == "kubernetes":
    c.JupyterHub.spawner_class = "kubelab.spawner.KubeLabSpawner"
    spawner = c.KubeLabSpawner
    # the catalog turns on kubelab's behaviour, per-user namespaces included (without one the
    # spawner is plain KubeSpawner: one shared namespace); trusted_lab = True shares one namespace
    spawner.gpu_catalog = GPU_CATALOG
    spawner.cmd = ["jupyterhub-singleuser"]
    spawner.start_timeout = 600  # image pulls of CUDA images take minutes
    spawner.trusted_lab = os.environ.get("KUBELAB_TRUSTED_LAB", "") == "1"
    spawner.workspace_size = "50Gi"
    spawner.archive_size = "100Gi"
    spawner.storage_class = os.environ.get("KUBELAB_STORAGE_CLASS") or None  # None: the default
    # A spec's `environment` is built into an image pushed here ('' refuses it; docs/environments.md)
    spawner.registry = os.environ.get("KUBELAB_REGISTRY", "")
    spawner.build_namespace = os.environ.get("KUBELAB_BUILD_NAMESPACE", "kubelab-builds")
    spawner.delete_grace_period = 5
    spawner.extra_annotations = {"kubelab.io/notebook": "true"}
    # A class's first session: spawns queue rather than fail. JupyterHub refuses spawns past
    # concurrent_spawn_limit with a 429 (its default, 100, turns users away in a storm), so that
    # limit only guards the hub; the spawner lets 16 spawns prepare namespaces at once and queues
    # the rest in order ("starting, N ahead of you"), and retries the API server's 429s and 5xx.
    c.JupyterHub.concurrent_spawn_limit = 1000
    spawner.spawn_concurrency = 16
    spawner.k8s_api_request_timeout = 30  # a busy API server answers slowly; KubeSpawner's is 3 s
    spawner.k8s_api_request_retry_timeout = 120
else:
    c.JupyterHub.spawner_class = "kubelab.spawner.LocalKubeLabSpawner"
    spawner = c.LocalKubeLabSpawner
    spawner.gpu_catalog = {**GPU_CATALOG, "images": []}  # local servers use no image
    spawner.root = os.environ.get("KUBELAB_HUB_ROOT", os.path.expanduser("~/kubelab-hub"))
    if os.environ.get("KUBELAB_HUB_RUN_AS_USERS") == "0":  # a root hub running every server as root
        spawner.run_as_users = False
    spawner.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]
    spawner.default_url = "/lab"
