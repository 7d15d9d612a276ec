"""A user's storage layout (spawner/storage_layout.py) and the subPaths users get, as pure code:
one claim with two fixed folders for a new user, the two claims of before for a user who has
them, and a shared claim's folder only ever a user's slug, never a path that climbs out."""

from __future__ import annotations

import pytest
from kubespawner.slugs import safe_slug

from kubelab.errors import ValidationError
from kubelab.spawner.groups import Quota
from kubelab.spawner.objects import Storage, storage_claims, user_namespace_objects
from kubelab.spawner.storage_layout import (
    LAYOUT_ANNOTATION,
    ONE_CLAIM,
    TWO_CLAIMS,
    from_claims,
    home_size,
    mounts,
    recorded,
)
from kubelab.spawner.volumes import VolumeMount, kubernetes_volumes, to_mount, user_folder


def pod_mounts(storage: Storage, user: str) -> dict[str, tuple[str, str | None]]:
    """mountPath -> (claim, subPath) of what a pod gets."""
    volumes, found = kubernetes_volumes(mounts(storage, user), user)
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in volumes}
    return {m["mountPath"]: (claims[m["name"]], m.get("subPath")) for m in found}


def test_a_new_user_gets_one_claim_with_a_workspace_and_an_archive_folder() -> None:
    storage = Storage(workspace_size="50Gi", archive_size="100Gi")
    [claim] = storage_claims("user-alice", storage)
    assert claim["metadata"]["name"] == "kubelab-home"
    assert claim["spec"]["resources"]["requests"]["storage"] == "150Gi"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert pod_mounts(storage, "alice") == {
        "/mnt/alice": ("kubelab-home", "workspace"),
        "/archives/alice": ("kubelab-home", "archive"),
    }
    volumes, _ = kubernetes_volumes(mounts(storage, "alice"), "alice")
    assert len(volumes) == 1  # one volume, mounted twice


def test_a_user_with_the_two_claims_of_before_keeps_them_mounted_whole() -> None:
    storage = Storage(layout=TWO_CLAIMS)
    assert [c["metadata"]["name"] for c in storage_claims("user-carol", storage)] == [
        "kubelab-workspace",
        "kubelab-archive",
    ]
    assert pod_mounts(storage, "carol") == {
        "/mnt/carol": ("kubelab-workspace", None),
        "/archives/carol": ("kubelab-archive", None),
    }


def test_the_namespace_records_its_layout_and_the_quota_counts_the_same_storage() -> None:
    def built(layout: str) -> tuple[str, str]:
        from kubelab.spawner.bounds import NamespaceBounds

        objects = user_namespace_objects(
            "user-a",
            "a",
            "kubelab-notebook",
            Quota(gpus=1),
            [],
            Storage(layout=layout),
            bounds=NamespaceBounds(),
        )
        quota = next(o for o in objects if o["kind"] == "ResourceQuota")
        return objects[0]["metadata"]["annotations"][LAYOUT_ANNOTATION], quota["spec"]["hard"][
            "requests.storage"
        ]

    one, two = built(ONE_CLAIM), built(TWO_CLAIMS)
    assert (one[0], two[0]) == (ONE_CLAIM, TWO_CLAIMS)
    assert one[1] == two[1]


def test_which_layout_a_namespace_has() -> None:
    assert recorded(None) is None
    assert recorded({"metadata": {}}) is None  # made before layouts were recorded: its claims decide
    assert recorded({"metadata": {"annotations": {LAYOUT_ANNOTATION: "two-claims"}}}) == TWO_CLAIMS
    assert recorded({"metadata": {"annotations": {LAYOUT_ANNOTATION: "bogus"}}}) is None
    assert from_claims([]) == ONE_CLAIM
    assert from_claims(["datasets", "kubelab-home"]) == ONE_CLAIM
    assert from_claims(["kubelab-workspace"]) == TWO_CLAIMS  # half of before: kept, the other made
    assert from_claims(["kubelab-archive", "datasets"]) == TWO_CLAIMS
    assert home_size("1Gi", "512Mi") == str(3 * 2**29)


@pytest.mark.parametrize("name", ["..", ".", "../bob", "bob/..", "a/b", "", ".hidden", "/etc", "Bob"])
def test_a_name_that_could_leave_its_folder_is_never_a_subpath(name: str) -> None:
    with pytest.raises(ValidationError) as refused:
        user_folder(name)
    assert [f.path for f in refused.value.fields] == ["username"]
    with pytest.raises(ValidationError):  # a shared claim's per-user mount refuses it the same way
        to_mount(VolumeMount("pvc", "kubeflow-user-workspace", "/mnt/", per_user=True), name)


@pytest.mark.parametrize("raw", ["../bob", "alice/../bob", "..", "bob"])
def test_in_trusted_lab_mode_each_user_gets_their_slugs_folder_of_the_shared_claims(raw: str) -> None:
    """KubeSpawner's slug of any hub username is one folder name, and another user's only if
    the names are equal: `../bob` is not `bob`."""
    slug = safe_slug(raw)
    found = pod_mounts(Storage.trusted_lab(), slug)
    assert found == {
        f"/mnt/{slug}": ("kubeflow-user-workspace", slug),
        f"/archives/{slug}": ("kubeflow-archives", slug),
    }
    assert "/" not in slug and not slug.startswith(".")
    assert (slug == "bob") == (raw == "bob")
