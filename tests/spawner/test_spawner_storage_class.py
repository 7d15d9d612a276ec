"""KubeLabSpawner's `storage_class` is KubeSpawner's own setting, with KubeSpawner's meaning.

KubeSpawner's `storage_pvc_ensure` home claim reads the same trait: unset (None) means "the
cluster's default StorageClass", while "" pins a claim to volumes of no class, which a cluster
with a provisioner never makes, so the claim (and the pod) would wait forever.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import kubernetes_asyncio.config.kube_config as kube_config
import pytest
from kubespawner import clients

from kubelab.spawner import KubeLabSpawner


@pytest.fixture(autouse=True)
def hub_kubeconfig(kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KubeSpawner loads its kubeconfig on construction (the cluster's admin one here)."""
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    clients.load_config.cache_clear()


def built(**traits: Any) -> tuple[Any, Any]:
    """(KubeSpawner's home claim, kubelab's storage) of a spawner built on a hub's loop."""

    async def build() -> tuple[Any, Any]:
        spawner = KubeLabSpawner(_mock=True, **traits)
        return spawner.get_pvc_manifest(), spawner.storage

    return asyncio.run(build())


@pytest.mark.cluster
def test_unset_storage_class_leaves_kubespawner_home_claim_to_the_cluster_default() -> None:
    claim, storage = built()
    assert "volume.beta.kubernetes.io/storage-class" not in (claim.metadata.annotations or {})
    assert claim.spec.storage_class_name is None
    assert storage.storage_class is None  # kubelab's own claims: the default too


@pytest.mark.cluster
def test_a_named_storage_class_reaches_both_kinds_of_claim() -> None:
    claim, storage = built(storage_class="fast-ssd")
    assert claim.spec.storage_class_name == "fast-ssd"
    assert storage.storage_class == "fast-ssd"
