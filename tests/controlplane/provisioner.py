"""A volume provisioner for the loopback cluster's default StorageClass.

The controller-manager's PersistentVolume controller does the binding; what a cluster adds
is an external provisioner that makes a volume when a claim asks the class for one and
removes it when the claim is gone. This one does just that, with `hostPath` volumes that
nothing mounts (KWOK runs no containers): a claim binds the way it would on a real cluster.

It follows claims and volumes by list-then-watch, as a real provisioner's informers do. It
used to list every claim and every volume five times a second: with a thousand claims that
was megabytes of JSON a second for the API server to encode and for the process that runs the
cluster (a benchmark's hub among them) to decode, growing with every claim a test had made.
"""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cluster import ControlPlane

ANNOTATION = "volume.kubernetes.io/storage-provisioner"
WATCH_SECONDS = 5  # a watch ends this soon (and the API server stopping ends it at once)


class LoopbackProvisioner:
    def __init__(self, plane: ControlPlane, stopping: threading.Event, interval: float = 0.2) -> None:
        from .cluster import PROVISIONER

        self.plane, self.stopping, self.interval = plane, stopping, interval
        self.name = PROVISIONER
        self.made: set[str] = set()  # volumes this provisioner created (a watch repeats claims)

    def start(self) -> threading.Thread:
        """Two followers, of claims and of volumes; the thread returned ends with both."""
        followers = [
            threading.Thread(target=self._follow, args=(path, handle), daemon=True)
            for path, handle in (
                ("/api/v1/persistentvolumeclaims", self._claim),
                ("/api/v1/persistentvolumes", self._volume),
            )
        ]

        def run() -> None:
            for follower in followers:
                follower.start()
            for follower in followers:
                follower.join()

        thread = threading.Thread(target=run, name="loopback-provisioner", daemon=True)
        thread.start()
        return thread

    def _follow(self, path: str, handle: Callable[[dict[str, Any]], None]) -> None:
        """List `path`, handle every item, then watch from the list's version; list again on
        any error (an expired version, the API server going away) after a pause."""
        while not self.stopping.is_set():
            try:
                listed = self.plane.request("GET", path)
                for item in listed["items"]:
                    handle(item)
                version = listed["metadata"]["resourceVersion"]
                while not self.stopping.is_set():
                    version = self._watch(path, version, handle)
            except Exception:
                self.stopping.wait(self.interval)

    def _watch(self, path: str, version: str, handle: Callable[[dict[str, Any]], None]) -> str:
        """One watch from `version`; the last version seen (ValueError if it expired)."""
        query = f"?watch=1&allowWatchBookmarks=true&timeoutSeconds={WATCH_SECONDS}&resourceVersion={version}"
        request = urllib.request.Request(
            self.plane.server + path + query, headers={"Accept": "application/json"}
        )
        with urllib.request.urlopen(
            request, context=self.plane._ssl_context(), timeout=WATCH_SECONDS + 30
        ) as answer:
            for line in answer:
                event = json.loads(line)
                if event["type"] == "ERROR":  # 410 Gone: the version is too old, list again
                    raise ValueError(event["object"].get("message"))
                version = event["object"]["metadata"]["resourceVersion"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    handle(event["object"])
        return version

    def _claim(self, claim: dict[str, Any]) -> None:
        annotations = claim["metadata"].get("annotations") or {}
        name = f"pvc-{claim['metadata']['uid']}"
        if (
            (claim.get("status") or {}).get("phase") == "Pending"
            and not claim["spec"].get("volumeName")
            and annotations.get(ANNOTATION) == self.name
            and name not in self.made
        ):
            try:
                self.plane.request("POST", "/api/v1/persistentvolumes", self._volume_for(claim))
            except urllib.error.HTTPError as exc:
                if exc.code != 409:  # made before this provisioner's last list: it is there
                    raise
            self.made.add(name)

    def _volume(self, volume: dict[str, Any]) -> None:
        if (volume.get("status") or {}).get("phase") == "Released" and volume["spec"].get(
            "persistentVolumeReclaimPolicy"
        ) == "Delete":
            with contextlib.suppress(Exception):
                self.plane.request("DELETE", f"/api/v1/persistentvolumes/{volume['metadata']['name']}")
            self.made.discard(volume["metadata"]["name"])

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
