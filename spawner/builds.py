"""The hub's image-build settings: `registry` and where builds run, handed to each notebook as
variables (read by `kubelab.backends.kubernetes.image_build.BuildSettings`) and, per user
namespace, the RoleBinding that lets its notebook's account create builder Jobs in the build
namespace (the namespace, its Role and its admission policy come from `kubelab hub render --all`).
"""

from __future__ import annotations

from typing import Any

from traitlets import HasTraits, Unicode

from kubelab.backends.kubernetes import build_namespace
from kubelab.backends.kubernetes.image_build import DEFAULT_BUILDER_IMAGE, BuildSettings


class BuildTraits(HasTraits):
    registry = Unicode(
        "",
        config=True,
        help="""The repository environments' images are pushed to, e.g.
        registry.lab.example.org/lab/envs ('' = a spec's `environment` is refused on the cluster).""",
    )
    build_namespace = Unicode(
        "kubelab-builds",
        config=True,
        help="""Where builder Jobs run: its Pod Security level is privileged (rootless BuildKit needs
        Unconfined seccomp), its admission policy admits only the builder.""",
    )
    registry_secret = Unicode(
        "kubelab-registry",
        config=True,
        help="A kubernetes.io/dockerconfigjson Secret in build_namespace with the push credential.",
    )
    registry_auth_file = Unicode(
        "",
        config=True,
        help="""Path, in the notebook, of a Docker config with a pull credential the notebook uses to
        ask whether a tag exists (mount it with KubeSpawner's volumes; '' = ask anonymously).""",
    )
    builder_image = Unicode(DEFAULT_BUILDER_IMAGE, config=True, help="The rootless BuildKit image.")


def settings_of(traits: BuildTraits) -> BuildSettings | None:
    if not traits.registry:
        return None
    return BuildSettings(
        registry=traits.registry,
        namespace=traits.build_namespace,
        secret=traits.registry_secret,
        builder_image=traits.builder_image,
        auth_file=traits.registry_auth_file or None,
    )


def notebook_env(traits: BuildTraits) -> dict[str, str]:
    """The notebook's variables (none without a registry)."""
    settings = settings_of(traits)
    if settings is None:
        return {}
    env = {
        "KUBELAB_REGISTRY": settings.registry,
        "KUBELAB_BUILD_NAMESPACE": settings.namespace,
        "KUBELAB_REGISTRY_SECRET": settings.secret,
        "KUBELAB_BUILDER_IMAGE": settings.builder_image,
    }
    if settings.auth_file:
        env["KUBELAB_REGISTRY_AUTH"] = settings.auth_file
    return env


def user_objects(traits: BuildTraits, namespace: str, account: str) -> list[dict[str, Any]]:
    """The user namespace's binding in the build namespace (none without a registry)."""
    settings = settings_of(traits)
    return [] if settings is None else [build_namespace.role_binding(settings, namespace, account)]


def admin_objects(traits: BuildTraits) -> list[dict[str, Any]]:
    settings = settings_of(traits)
    return [] if settings is None else build_namespace.admin_objects(settings)
