"""A volume provisioner for the loopback cluster's default StorageClass.

The controller-manager's PersistentVolume controller does the binding; what a cluster adds
is an external provisioner that makes a volume when a claim asks the class for one and
removes it when the claim is gone. This one does just that, with `hostPath` volumes that
nothing mounts (KWOK runs no containers): a claim binds the way it would on a real cluster.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cluster import ControlPlane

ANNOTATION = "volume.kubernetes.io/storage-provisioner"


class LoopbackProvisioner:
    def __init__(self, plane: ControlPlane, stopping: threading.Event, interval: float = 0.2) -> None:
        from .cluster import PROVISIONER

        self.plane, self.stopping, self.interval = plane, stopping, interval
        self.name = PROVISIONER

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._loop, name="loopback-provisioner", daemon=True)
        thread.start()
        return thread

    def _loop(self) -> None:
        while not self.stopping.wait(self.interval):
            with contextlib.suppress(Exception):  # the API server going away ends the loop
                self.sync()

    def sync(self) -> None:
        claims = self.plane.request("GET", "/api/v1/persistentvolumeclaims")["items"]
        volumes = self.plane.request("GET", "/api/v1/persistentvolumes")["items"]
        have = {v["metadata"]["name"] for v in volumes}
        for claim in claims:
            annotations = claim["metadata"].get("annotations") or {}
            if (
                claim["status"].get("phase") == "Pending"
                and not claim["spec"].get("volumeName")
                and annotations.get(ANNOTATION) == self.name
                and f"pvc-{claim['metadata']['uid']}" not in have
            ):
                self.plane.request("POST", "/api/v1/persistentvolumes", self._volume_for(claim))
        for volume in volumes:
            if (
                volume["status"].get("phase") == "Released"
                and volume["spec"].get("persistentVolumeReclaimPolicy") == "Delete"
            ):
                with contextlib.suppress(Exception):
                    self.plane.request("DELETE", f"/api/v1/persistentvolumes/{volume['metadata']['name']}")

    def _volume_for(self, claim: dict[str, Any]) -> dict[str, Any]:
        meta, spec = claim["metadata"], claim["spec"]
        name = f"pvc-{meta['uid']}"
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": self.name}},
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": spec.get("storageClassName") or "",
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "hostPath": {"path": f"/var/lib/kubelab-loopback-volumes/{name}"},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }
