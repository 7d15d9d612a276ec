"""The few Kubernetes API calls the backend makes, as plain dicts in and out.

Responses are read with `_preload_content=False` and parsed as JSON, so the backend works with
the same plain dicts the builders produce (and skips model deserialisation on hot paths).
Every call goes through `errors.call`, which retries transient failures.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError

from kubelab.backends.kubernetes.errors import DEFAULT_RETRY, RetryPolicy, call
from kubelab.logfiles import decoder

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    version: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


KINDS = {
    k.kind: k
    for k in (
        Kind("Service", "", "v1", "services"),
        Kind("Job", "batch", "v1", "jobs"),
        Kind("Pod", "", "v1", "pods"),
        Kind("Event", "", "v1", "events"),
        Kind("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs"),
        Kind("TFJob", "kubeflow.org", "v1", "tfjobs"),
        Kind("ResourceQuota", "", "v1", "resourcequotas"),
        Kind("Deployment", "apps", "v1", "deployments"),
        Kind("HorizontalPodAutoscaler", "autoscaling", "v2", "horizontalpodautoscalers"),
        Kind("InferenceService", "serving.kserve.io", "v1beta1", "inferenceservices"),
        Kind("HTTPRoute", "gateway.networking.k8s.io", "v1", "httproutes"),
        Kind("ResourceClaimTemplate", "resource.k8s.io", "v1", "resourceclaimtemplates"),
    )
}
FIELD_MANAGER = "kubelab"


def _json(response: Any) -> Obj:
    body: Obj = json.loads(response.data)
    return body


class KubeApi:
    """Namespaced access for one user's service account."""

    def __init__(
        self, api_client: client.ApiClient, namespace: str, retry: RetryPolicy = DEFAULT_RETRY
    ) -> None:
        self.client = api_client
        self.namespace = namespace
        self.retry = retry
        self.host = api_client.configuration.host
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return call(fn, *args, policy=self.retry, host=self.host, **kwargs)

    # -- generic verbs by kind ---------------------------------------------------------------
    def _list_fn(self, kind: Kind) -> Callable[..., Any]:
        ns = self.namespace
        if kind.group in ("", "batch"):
            api = self.core if kind.group == "" else self.batch
            method = getattr(api, f"list_namespaced_{_snake(kind.kind)}")
            return lambda **kw: method(ns, **kw)
        return lambda **kw: self.custom.list_namespaced_custom_object(
            kind.group, kind.version, ns, kind.plural, **kw
        )

    def create(self, obj: Obj) -> Obj:
        kind = KINDS[obj["kind"]]
        ns = self.namespace
        if kind.group in ("", "batch"):
            api = self.core if kind.group == "" else self.batch
            method = getattr(api, f"create_namespaced_{_snake(kind.kind)}")
            return _json(self.call(method, ns, obj, _preload_content=False))
        return _json(
            self.call(
                self.custom.create_namespaced_custom_object,
                kind.group,
                kind.version,
                ns,
                kind.plural,
                obj,
                _preload_content=False,
            )
        )

    def get(self, kind_name: str, name: str) -> Obj | None:
        kind = KINDS[kind_name]
        ns = self.namespace
        try:
            if kind.group in ("", "batch"):
                api = self.core if kind.group == "" else self.batch
                method = getattr(api, f"read_namespaced_{_snake(kind.kind)}")
                return _json(self.call(method, name, ns, _preload_content=False))
            return _json(
                self.call(
                    self.custom.get_namespaced_custom_object,
                    kind.group,
                    kind.version,
                    ns,
                    kind.plural,
                    name,
                    _preload_content=False,
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def delete(self, kind_name: str, name: str, propagation: str = "Background") -> bool:
        """Delete with its dependents; False if it was already gone."""
        kind = KINDS[kind_name]
        ns = self.namespace
        body = {"propagationPolicy": propagation}
        try:
            if kind.group in ("", "batch"):
                api = self.core if kind.group == "" else self.batch
                method = getattr(api, f"delete_namespaced_{_snake(kind.kind)}")
                self.call(method, name, ns, body=body, _preload_content=False)
            else:
                self.call(
                    self.custom.delete_namespaced_custom_object,
                    kind.group,
                    kind.version,
                    ns,
                    kind.plural,
                    name,
                    body=body,
                    _preload_content=False,
                )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def apply(self, obj: Obj) -> Obj:
        """Create or bring up to date (server-side apply as field manager `kubelab`); a field the
        kind's schema does not know is refused (`fieldValidation=Strict`), never dropped."""
        kind, name = KINDS[obj["kind"]], obj["metadata"]["name"]
        how: dict[str, Any] = {
            "field_manager": FIELD_MANAGER,
            "force": True,
            "field_validation": "Strict",
            "_content_type": "application/apply-patch+yaml",
            "_preload_content": False,
        }
        if kind.group == "":
            method = getattr(self.core, f"patch_namespaced_{_snake(kind.kind)}")
            return _json(self.call(method, name, self.namespace, obj, **how))
        patch = self.custom.patch_namespaced_custom_object
        return _json(
            self.call(patch, kind.group, kind.version, self.namespace, kind.plural, name, obj, **how)
        )

    def merge(self, kind_name: str, name: str, patch: Obj) -> Obj:
        """A JSON merge patch: change a few fields (a traffic percent, a selector) in place."""
        kind, how = (
            KINDS[kind_name],
            {"_content_type": "application/merge-patch+json", "_preload_content": False},
        )
        if kind.group == "":
            method = getattr(self.core, f"patch_namespaced_{_snake(kind.kind)}")
            return _json(self.call(method, name, self.namespace, patch, **how))
        patcher, ns = self.custom.patch_namespaced_custom_object, self.namespace
        return _json(self.call(patcher, kind.group, kind.version, ns, kind.plural, name, patch, **how))

    def list(
        self, kind_name: str, label_selector: str | None = None, field_selector: str | None = None
    ) -> Obj:
        kwargs: dict[str, Any] = {"_preload_content": False}
        if label_selector:
            kwargs["label_selector"] = label_selector
        if field_selector:
            kwargs["field_selector"] = field_selector
        return _json(self.call(self._list_fn(KINDS[kind_name]), **kwargs))

    def watch(
        self, kind_name: str, resource_version: str, timeout: int, label_selector: str | None = None
    ) -> Any:
        """An open watch response (read it with `kubernetes.watch.watch.iter_resp_lines`)."""
        kwargs: dict[str, Any] = {
            "watch": True,
            "resource_version": resource_version,
            "timeout_seconds": timeout,
            "allow_watch_bookmarks": True,
            "_preload_content": False,
        }
        if label_selector:
            kwargs["label_selector"] = label_selector
        return self.call(self._list_fn(KINDS[kind_name]), **kwargs)

    # -- pods ------------------------------------------------------------------------------
    def pod_log(
        self,
        name: str,
        container: str,
        follow: bool = False,
        ended: Callable[[], bool] | None = None,
        timestamps: bool = False,
    ) -> Iterator[str]:
        """A container's log (`timestamps`: each line led by the kubelet's RFC 3339 time). A
        followed stream also ends once `ended()` has been true for a second: a kubelet that
        dies, or a node that goes away, leaves the stream open."""
        response = self.call(
            self.core.read_namespaced_pod_log,
            name,
            self.namespace,
            container=container,
            follow=follow,
            timestamps=timestamps,
            _preload_content=False,
        )
        done = threading.Event()
        if follow and ended is not None:
            threading.Thread(
                target=_close_when, args=(response, ended, done), daemon=True, name=f"log-watchdog-{name}"
            ).start()
        text = decoder()  # a character split between chunks is decoded whole
        try:
            for chunk in response.stream(4096, decode_content=True):
                if chunk and (piece := text.decode(chunk)):
                    yield piece
            if tail := text.decode(b"", final=True):
                yield tail
        except (ProtocolError, OSError):
            if not done.is_set():
                raise
        finally:
            done.set()
            response.release_conn()

    # -- discovery -------------------------------------------------------------------------
    def serves(self, group: str, version: str, kind: str) -> bool:
        """Whether the cluster serves `kind` in `group/version` (API discovery)."""
        try:
            resources = self.call(self.custom.get_api_resources, group, version)
        except ApiException as exc:
            if exc.status in (403, 404):
                return False
            raise
        return any(r.kind == kind for r in resources.resources or [])


def _close_when(response: Any, ended: Callable[[], bool], done: threading.Event, grace: float = 1.0) -> None:
    """Shut a followed log stream once `ended()` holds and `grace` seconds have let the
    last lines through."""
    while not done.wait(0.5):
        if ended():
            if not done.wait(grace):
                done.set()
                response.shutdown()
            return


def _snake(kind: str) -> str:
    return {
        "Service": "service",
        "Job": "job",
        "Pod": "pod",
        "Event": "event",
        "ResourceQuota": "resource_quota",
    }[kind]
