"""An environment's image, built in the cluster: pure builders for the rootless BuildKit Job and
for the admission policy that holds the build namespace to that one shape.

The image is the notebook's image plus the environment's steps, tagged by the content hash of
both, so a second run (or trial, or user) with the same environment finds the tag in the
registry and builds nothing. BuildKit's rootless mode needs Unconfined seccomp and AppArmor
(its user namespace), which neither the `baseline` nor the `restricted` Pod Security level
admits: builds therefore run in a namespace the admin chooses for them (`build_namespace`,
level `privileged`), where the notebook's account may create Jobs only, and
`builder_policy()` refuses every Job there that is not this builder: another image or command,
a privileged container, host namespaces or paths, a volume other than the registry Secret.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubelab.backends.kubernetes import names
from kubelab.errors import FieldError, ValidationError

DEFAULT_BUILDER_IMAGE = "moby/buildkit:v0.23.2-rootless"
CONTAINER = "buildkit"
ROLE = "build"
TAG_LABEL = "kubelab.io/image-tag"
BUILDS_LABEL = "kubelab.io/builds"  # on the build namespace: binds `builder_policy`
BUILDER_UID = 1000  # the rootless image's `user` (its subuid range is built in)
HOME = "/home/user"
CONTEXT = f"{HOME}/context"
WORKDIR = "/tmp/kubelab-build"  # where a step's relative paths (requirements.txt) resolve
DEADLINE = 3600  # seconds a build may take
TTL = 24 * 3600  # a finished build Job (and its log) stays a day
# The container's whole command: writes the Dockerfile from the environment, then runs
# BuildKit without a daemon. The policy compares it verbatim.
Manifest = dict[str, Any]
COMMAND = [
    "sh",
    "-c",
    'mkdir -p "$CONTEXT" && printf "%s" "$DOCKERFILE" > "$CONTEXT/Dockerfile" '
    '&& exec buildctl-daemonless.sh "$@"',
    "buildctl-daemonless.sh",
]


@dataclass(frozen=True)
class BuildSettings:
    """The lab's registry and where builds run, from the hub's settings (the spawner sets these
    variables on the notebook): `registry` is the repository builds push to
    (`registry.lab.example.org/lab/envs`); `secret` names the `kubernetes.io/dockerconfigjson`
    Secret with the push credential in `namespace`; `auth_file` is the same credential mounted
    in the notebook, read to ask the registry whether a tag exists."""

    registry: str
    namespace: str
    secret: str
    builder_image: str = DEFAULT_BUILDER_IMAGE
    auth_file: str | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> BuildSettings | None:
        """None where the hub configures no registry (an environment is then refused)."""
        env = os.environ if environ is None else environ
        registry = env.get("KUBELAB_REGISTRY", "").strip()
        if not registry:
            return None
        missing = [
            FieldError(name, "must be set when KUBELAB_REGISTRY is")
            for name in ("KUBELAB_BUILD_NAMESPACE", "KUBELAB_REGISTRY_SECRET")
            if not env.get(name, "").strip()
        ]
        if ":" in registry.rsplit("/", 1)[-1] or "@" in registry:
            missing.append(FieldError("KUBELAB_REGISTRY", "names a repository, without a tag or digest"))
        if missing:
            raise ValidationError("the hub's image registry settings are incomplete", missing)
        return cls(
            registry=registry.rstrip("/"),
            namespace=env["KUBELAB_BUILD_NAMESPACE"].strip(),
            secret=env["KUBELAB_REGISTRY_SECRET"].strip(),
            builder_image=env.get("KUBELAB_BUILDER_IMAGE", "").strip() or DEFAULT_BUILDER_IMAGE,
            auth_file=env.get("KUBELAB_REGISTRY_AUTH", "").strip() or None,
        )


@dataclass(frozen=True)
class ImageRecipe:
    """What defines an environment's image: the image it starts from, the files its steps read
    (name, content) and the shell steps, in order."""

    base: str
    steps: tuple[str, ...]
    files: tuple[tuple[str, str], ...] = ()

    @property
    def tag(self) -> str:
        """The content hash of everything that defines the image: equal recipes, equal tags."""
        body = json.dumps([self.base, list(self.steps), [list(f) for f in self.files]])
        return "env-" + hashlib.sha256(body.encode()).hexdigest()[:40]

    def image(self, settings: BuildSettings) -> str:
        return f"{settings.registry}:{self.tag}"


def _run(*argv: str) -> str:
    return "RUN " + json.dumps(["/bin/sh", "-c", *argv])


def dockerfile(recipe: ImageRecipe) -> str:
    """The Dockerfile: exec-form RUNs (JSON), so no step text is parsed by the Dockerfile's own
    syntax; a file's content travels as `$0` of its step, never through shell quoting."""
    lines = [f"FROM {recipe.base}"]
    for name, content in recipe.files:
        if "/" in name or name in ("", ".", ".."):
            problem = FieldError("environment", f"{name!r} is no file name")
            raise ValidationError("bad environment file", [problem])
        lines.append(_run(f'mkdir -p {WORKDIR} && printf "%s" "$0" > {WORKDIR}/{name}', content))
    lines += [_run(f"mkdir -p {WORKDIR} && cd {WORKDIR} && {step}") for step in recipe.steps]
    return "\n".join(lines) + "\n"


def job_name(recipe: ImageRecipe) -> str:
    """One Job per tag: runs that need the same image while it builds share its build."""
    return f"kubelab-build-{recipe.tag[4:28]}"


def build_job(recipe: ImageRecipe, settings: BuildSettings, user: str) -> Manifest:
    """The builder Job, in the build namespace: BuildKit without a daemon builds the Dockerfile
    and pushes `registry:tag` with the Secret's credential (a mounted file, never an argument)."""
    labels = {
        names.MANAGED_BY: names.MANAGER,
        names.ROLE: ROLE,
        TAG_LABEL: recipe.tag,
        names.USER: names.label_value(user),
    }
    output = f"type=image,name={recipe.image(settings)},push=true"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(recipe), "namespace": settings.namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": DEADLINE,
            "ttlSecondsAfterFinished": TTL,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "containers": [
                        {
                            "name": CONTAINER,
                            "image": settings.builder_image,
                            "command": COMMAND,
                            "args": [
                                "build",
                                "--frontend=dockerfile.v0",
                                f"--local=context={CONTEXT}",
                                f"--local=dockerfile={CONTEXT}",
                                f"--output={output}",
                            ],
                            "env": [
                                {"name": "DOCKERFILE", "value": dockerfile(recipe)},
                                {"name": "CONTEXT", "value": CONTEXT},
                                {"name": "DOCKER_CONFIG", "value": f"{HOME}/.docker"},
                                {"name": "BUILDKITD_FLAGS", "value": "--oci-worker-no-process-sandbox"},
                            ],
                            "securityContext": builder_security(),
                            "volumeMounts": [
                                {"name": "registry", "mountPath": f"{HOME}/.docker", "readOnly": True},
                                {"name": "buildkit", "mountPath": f"{HOME}/.local/share/buildkit"},
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "registry",
                            "secret": {
                                "secretName": settings.secret,
                                "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
                            },
                        },
                        {"name": "buildkit", "emptyDir": {}},
                    ],
                },
            },
        },
    }


def builder_security() -> Manifest:
    """What rootless BuildKit needs and no more: its own non-root user, no added capability,
    not privileged; seccomp and AppArmor unconfined so it may create its user namespace."""
    return {
        "runAsUser": BUILDER_UID,
        "runAsGroup": BUILDER_UID,
        "runAsNonRoot": True,
        "privileged": False,
        "seccompProfile": {"type": "Unconfined"},
        "appArmorProfile": {"type": "Unconfined"},
    }
