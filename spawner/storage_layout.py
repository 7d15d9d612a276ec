"""A user's storage on a cluster: one claim with two folders, or the two claims of earlier
versions, kept for the users who have them.

Each user namespace used to get two claims, `kubelab-workspace` and `kubelab-archive`. A first
spawn waits for its claims to be bound, and in a storm of new users the provisioner and the
PersistentVolume binder work through claims one at a time: twice KubeSpawner's claims took about
twice as long. A namespace made now gets one claim, `kubelab-home`, as large as both; the pod
mounts its folder `workspace` at /mnt/<user> and `archive` at /archives/<user>. The subPaths are
fixed names, not the user's: the claim is the user's own, in their own namespace, and a pod can
name a claim of its own namespace only (the API server also refuses a subPath with `..` or an
absolute one; docs/security.md).

Existing users keep their data where it is: a namespace that holds either old claim keeps the
two claims (a missing one of the two is created, as before). The layout is recorded on the
namespace (`kubelab.io/storage`) in the bundle the spawner applies, so a returning user's spawn
reads it from the hub's namespace watch with no request; only a namespace made before this
version, which has no such annotation, has its claims listed, once. Moving a user to one claim
is an admin's step (docs/jupyterhub.md): copy the data into the new claim's folders, then
annotate the namespace `one-claim`; kubelab never deletes a claim.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubelab.quantity import parse_quantity

from .apply import Applier
from .volumes import VolumeMount

if TYPE_CHECKING:
    from .kube import KubeLabSpawner
    from .objects import Storage

LAYOUT_ANNOTATION = "kubelab.io/storage"
ONE_CLAIM = "one-claim"
TWO_CLAIMS = "two-claims"
LAYOUTS = (ONE_CLAIM, TWO_CLAIMS)
HOME_CLAIM = "kubelab-home"
OLD_CLAIMS = ("kubelab-workspace", "kubelab-archive")
WORKSPACE_FOLDER = "workspace"
ARCHIVE_FOLDER = "archive"
WORKSPACE_ROOT = "/mnt"
ARCHIVE_ROOT = "/archives"


def recorded(namespace: dict[str, Any] | None) -> str | None:
    """The layout a namespace records, or None (made before layouts were recorded, or by hand)."""
    annotations = ((namespace or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(LAYOUT_ANNOTATION)
    return value if value in LAYOUTS else None


def from_claims(names: Iterable[str]) -> str:
    """Two claims where either old claim exists (its data stays mounted where it was), else one."""
    return TWO_CLAIMS if set(names) & set(OLD_CLAIMS) else ONE_CLAIM


def home_size(workspace_size: str, archive_size: str) -> str:
    """The one claim's size: both sizes together, so the quota's storage stays what it was."""
    total = int(parse_quantity(workspace_size) + parse_quantity(archive_size))
    return f"{total // 2**30}Gi" if total % 2**30 == 0 else str(total)


def mounts(storage: Storage, user: str) -> list[VolumeMount]:
    """The workspace at /mnt/<user> and the archive at /archives/<user>: per-user subPaths of the
    shared claims in trusted-lab mode, whole claims in the two-claim layout, and the one claim's
    two folders otherwise. `user` is KubeSpawner's slug."""
    if storage.trusted:
        return [
            VolumeMount("pvc", storage.workspace_claim, WORKSPACE_ROOT + "/", per_user=True),
            VolumeMount("pvc", storage.archive_claim, ARCHIVE_ROOT + "/", per_user=True),
        ]
    workspace, archive = f"{WORKSPACE_ROOT}/{user}", f"{ARCHIVE_ROOT}/{user}"
    if storage.layout == TWO_CLAIMS:
        return [
            VolumeMount("pvc", storage.workspace_claim, workspace),
            VolumeMount("pvc", storage.archive_claim, archive),
        ]
    return [
        VolumeMount("pvc", storage.home_claim, workspace, sub_path=WORKSPACE_FOLDER),
        VolumeMount("pvc", storage.home_claim, archive, sub_path=ARCHIVE_FOLDER),
    ]


@dataclass(frozen=True)
class Found:
    """A user namespace's layout, and the namespace it was read from: as the API server just
    answered (`fresh`; None when there is none), or as the hub's watch held it."""

    layout: str
    namespace: dict[str, Any] | None
    fresh: bool


async def claim_names(applier: Applier, namespace: str) -> list[str]:
    return await applier.names("PersistentVolumeClaim", namespace)


async def find(applier: Applier, name: str, known: dict[str, Any] | None) -> Found:
    """The layout of the namespace `name`; `known` is a copy of it already at hand (the hub's
    watch, reconcile's list), else it is read. A new namespace gets one claim; one that records
    its layout keeps it; one that does not has its claims listed (see `from_claims`)."""
    space = known
    if space is None:
        space = await applier.read({"kind": "Namespace", "metadata": {"name": name}})
    fresh = known is None
    if space is None:
        return Found(ONE_CLAIM, None, fresh)
    layout = recorded(space) or from_claims(await claim_names(applier, name))
    return Found(layout, space, fresh)


async def find_for(spawner: KubeLabSpawner) -> Found | None:
    """The spawning user's layout (None outside per-user namespaces: trusted-lab mode shares its
    claims, a shared namespace keeps the two claims of before). From the hub's namespace watch
    when it holds the namespace, so a returning user's spawn asks nothing."""
    if spawner.trusted_lab or not spawner.enable_user_namespaces:
        return None
    from . import shared_watch

    watch = shared_watch.running_watch()
    known = watch.user_namespace(spawner.namespace) if watch else None
    applier = Applier(spawner.api.api_client, spawner.k8s_api_request_timeout)
    return await find(applier, spawner.namespace, known)
