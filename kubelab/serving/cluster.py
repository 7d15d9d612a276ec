"""Services on the cluster: `kubelab serve` and `kubelab service …` where the backend has a
Kubernetes namespace (`Backend.cluster()`), through the notebook's own ServiceAccount.

The objects come from the pure builders (`kubelab.backends.kubernetes.serving` and
`serving_routes`): a KServe InferenceService where the namespace serves that kind (discovery),
otherwise a Deployment, Service and autoscaler per version beside a stable Service, and an
HTTPRoute once a second version exists where the cluster has the Gateway API. The cluster is
the record: every view is read back from the objects (their labels and the spec annotation),
so any process (the CLI, the server, a colleague's notebook in the namespace) sees the same.
A model is served by MLServer inside the image, its settings given as MLServer's environment.
"""

from __future__ import annotations

import builtins
import json
import os
import time
from pathlib import Path
from typing import Any

from kubelab.backends.base import ClusterAccess
from kubelab.backends.kubernetes import serving as build
from kubelab.backends.kubernetes.serving_routes import (
    Gateway,
    Shares,
    Traffic,
    http_route,
    kserve_canary,
    parse_assignments,
    route_traffic,
    split,
    version_name,
)
from kubelab.errors import FieldError, NotFound, ValidationError
from kubelab.home import default_home
from kubelab.serving.replicas import MLSERVER_MAIN, PREDICTOR_RUNTIME, RUNTIMES, SERVER_SETTINGS
from kubelab.serving.spec import ServiceSpec
from kubelab.serving.store import service_store

Obj = dict[str, Any]
KSERVE = ("serving.kserve.io", "v1beta1", "InferenceService")
GATEWAY_API = ("gateway.networking.k8s.io", "v1", "HTTPRoute")
MODELS_ROOT = "/kubelab-models"  # an empty repository: MLServer then reads the model from its environment
VERSIONS_ANNOTATION = "kubelab.io/versions"  # KServe: {"previous": ..., "latest": ...}


class ClusterServices:
    """The served services of one user's namespace."""

    def __init__(self, cluster: ClusterAccess, lab: Any = None) -> None:
        self.api, self.nb, self.lab = cluster.api, cluster.nb, lab
        self.gateway = Gateway.parse(os.environ.get("KUBELAB_GATEWAY"))
        self.gpu_metric = os.environ.get("KUBELAB_GPU_METRIC") or None
        self._serves: dict[tuple[str, str, str], bool] = {}
        home = Path(lab.home) if lab is not None else default_home()
        self.store = service_store(home)  # this machine's: the proxy's capability lookups find none here

    def serves(self, what: tuple[str, str, str]) -> bool:
        if what not in self._serves:
            self._serves[what] = self.api.serves(*what)
        return self._serves[what]

    # -- starting ---------------------------------------------------------------------------
    def start(self, data: Any, base_dir: Path | None = None, confine: bool = False) -> Obj:
        """Roll a version out beside the service's others (its traffic stays where it was)."""
        spec = ServiceSpec.parse(data)
        target = self.target(spec, Path(base_dir or os.getcwd()), confine)
        versions = self.versions(spec.name)
        if spec.version in versions:
            reason = f"{spec.name} version {spec.version} is deployed: delete it, or give another version"
            raise ValidationError("cannot start the service", [FieldError("version", reason)])
        if self.serves(KSERVE):
            previous = self._kserve_latest(spec.name)
            isvc = build.inference_service(spec, target, self.nb, canary=0 if previous else None)
            isvc["metadata"]["annotations"][VERSIONS_ANNOTATION] = json.dumps(
                {"previous": previous, "latest": spec.version}
            )
            self.api.apply(isvc)
            return self.get(version_name(spec.name, spec.version))
        for obj in build.version_objects(spec, target, self.nb):
            self.api.apply(obj)
        if not versions:
            self.api.apply(build.service(spec, target, version=spec.version))
        elif self.serves(GATEWAY_API):
            current = self.traffic_of(spec.name, versions)
            weights = {**current.weights, spec.version: 0}
            self._route(spec, Traffic(weights, current.mirror))
        return self.get(version_name(spec.name, spec.version))

    def target(self, spec: ServiceSpec, base: Path, confine: bool = False) -> build.ServiceTarget:
        """The argv and settings of the version's container, and what it serves (lineage)."""
        run, path, env = None, None, {}
        if spec.model is not None:
            folder = base
            if spec.model.run is not None:
                try:
                    folder = Path(self._lab().run(spec.model.run).path)
                except NotFound:
                    raise ValidationError(
                        "cannot start the service",
                        [FieldError("model.run", f"no experiment '{spec.model.run}'")],
                    ) from None
                run = spec.model.run
            model = (folder / spec.model.path).resolve()
            if confine and run is None and base.resolve() not in model.parents:
                problem = FieldError("model.path", f"'{spec.model.path}' is outside the workspace")
                raise ValidationError("cannot start the service", [problem])
            if not model.is_file():  # the workspace is mounted at the same path in the pods
                raise ValidationError(
                    "cannot start the service", [FieldError("model.path", f"no such file: {model}")]
                )
            path = str(model)
        if spec.serves_model:
            env = self._model_env(spec, path)
            argv = ["python", "-c", MLSERVER_MAIN, "start", MODELS_ROOT]
        else:
            argv = build.argv(spec)
        return build.ServiceTarget(self.api.namespace, self.nb.user, argv, run, path, self.gpu_metric, env)

    def _model_env(self, spec: ServiceSpec, path: str | None) -> dict[str, str]:
        if spec.predictor is not None:
            implementation, extra = PREDICTOR_RUNTIME, json.dumps({"predictor": spec.predictor})
        else:
            suffix = Path(path or "").suffix.lower()
            if suffix not in RUNTIMES:
                known = ", ".join(sorted(RUNTIMES))
                reason = f"no runtime serves {suffix!r} files ({known})"
                raise ValidationError("cannot start the service", [FieldError("model.path", reason)])
            implementation, extra = RUNTIMES[suffix][0], "{}"
        env = {**SERVER_SETTINGS, "MLSERVER_HOST": "0.0.0.0", "MLSERVER_HTTP_PORT": str(build.port(spec))}
        env.update(
            MLSERVER_MODEL_NAME=spec.name,
            MLSERVER_MODEL_IMPLEMENTATION=implementation,
            MLSERVER_MODEL_VERSION=spec.version,
            MLSERVER_MODEL_EXTRA=extra,
        )
        if path:
            env["MLSERVER_MODEL_URI"] = path
        return env

    def _lab(self) -> Any:
        if self.lab is None:
            from kubelab.experiments import Experiments

            self.lab = Experiments()
        return self.lab

    # -- reading -----------------------------------------------------------------------------
    def _selector(self, name: str | None = None) -> str:
        found = f"app.kubernetes.io/name={build.APP}"
        return f"{found},{build.SERVICE}={name}" if name else found

    def _workloads(self, name: str | None = None) -> builtins.list[Obj]:
        kind = "InferenceService" if self.serves(KSERVE) else "Deployment"
        items: builtins.list[Obj] = self.api.list(kind, self._selector(name))["items"]
        return items

    def versions(self, name: str) -> builtins.list[str]:
        """The service's versions, oldest first."""
        if self.serves(KSERVE):
            found = self._kserve_versions(name)
            return [v for v in (found.get("previous"), found.get("latest")) if v]
        items = sorted(self._workloads(name), key=lambda d: d["metadata"]["creationTimestamp"])
        return [d["metadata"]["labels"][build.VERSION] for d in items]

    def _kserve_versions(self, name: str) -> dict[str, str | None]:
        isvc = self.api.get("InferenceService", name)
        if isvc is None:
            return {}
        found: dict[str, str | None] = json.loads(
            (isvc["metadata"].get("annotations") or {}).get(VERSIONS_ANNOTATION) or "{}"
        )
        return found

    def _kserve_latest(self, name: str) -> str | None:
        return self._kserve_versions(name).get("latest")

    def traffic_of(self, name: str, versions: builtins.list[str]) -> Traffic:
        """The split as the cluster carries it now."""
        if self.serves(KSERVE):
            found = self._kserve_versions(name)
            isvc = self.api.get("InferenceService", name) or {}
            canary = isvc.get("spec", {}).get("predictor", {}).get("canaryTrafficPercent")
            latest, previous = found.get("latest"), found.get("previous")
            if previous is None or canary is None:
                return Traffic({v: 100 if v == latest else 0 for v in versions})
            return Traffic({previous: 100 - int(canary), str(latest): int(canary)})
        route = self.api.get("HTTPRoute", name) if self.serves(GATEWAY_API) else None
        if route is not None:
            return route_traffic(route, name)
        stable = self.api.get("Service", name) or {}
        primary = stable.get("spec", {}).get("selector", {}).get(build.VERSION)
        return Traffic({v: 100 if v == primary else 0 for v in versions})

    def list(self) -> builtins.list[Obj]:
        names = sorted({w["metadata"]["labels"][build.SERVICE] for w in self._workloads()})
        return [view for name in names for view in self._views(name)]

    def _views(self, name: str) -> builtins.list[Obj]:
        versions = self.versions(name)
        traffic = self.traffic_of(name, versions)
        pods = self.api.list("Pod", self._selector(name))["items"]
        return [self._view(name, v, traffic, pods) for v in versions]

    def _view(self, name: str, version: str, traffic: Traffic, pods: builtins.list[Obj]) -> Obj:
        mine = [
            p
            for p in pods
            if p["metadata"]["labels"].get(build.VERSION) == version
            and not p["metadata"].get("deletionTimestamp")
        ]
        ready = [p for p in mine if _ready(p)]
        workload = self._workload(name, version)
        annotations = workload["metadata"].get("annotations") or {}
        # one InferenceService holds KServe's two versions; its annotation is the latest's spec
        known = not self.serves(KSERVE) or version == self._kserve_latest(name)
        spec = json.loads(annotations.get(build.SPEC_ANNOTATION) or "{}") if known else {}
        wanted = (workload.get("spec") or {}).get("replicas", (spec.get("replicas") or {}).get("min", 1))
        state = "Stopped" if wanted == 0 else "Running" if ready else "Pending"
        answer = build.port(ServiceSpec.parse(spec)) if spec else build.DEFAULT_PORT
        serves = json.loads(annotations.get(build.LINEAGE_ANNOTATION) or "{}") if known else {}
        model = bool(spec.get("model") or spec.get("predictor"))
        replicas = [
            {
                "index": i,
                "name": p["metadata"]["name"],
                "state": "Ready" if _ready(p) else "Starting",
                "port": answer,
                "ip": (p.get("status") or {}).get("podIP"),
                "restarts": sum(c.get("restartCount", 0) for c in p["status"].get("containerStatuses") or []),
            }
            for i, p in enumerate(mine)
        ]
        return {
            "id": version_name(name, version),
            "name": name,
            "version": version,
            "state": state,
            "reason": f"{len(ready)}/{len(mine)} replicas ready",
            "url": f"http://{name}.{self.api.namespace}.svc:{answer}/",
            "kind": "model" if model else "command",
            "endpoint": f"v2/models/{name}/infer" if model else "",
            "traffic": traffic.weights.get(version, 0),
            "mirror": traffic.mirror.get(version, 0),
            "replicas": replicas,
            "replicas_wanted": spec.get("replicas"),
            "lineage": {k: v for k, v in serves.items() if v},
            "spec": spec,
            "backend": "kubernetes",
            "created_at": workload["metadata"]["creationTimestamp"],
        }

    def _workload(self, name: str, version: str) -> Obj:
        if self.serves(KSERVE):
            found = self.api.get("InferenceService", name)
        else:
            found = self.api.get("Deployment", version_name(name, version))
        if found is None:
            raise NotFound(f"no service '{version_name(name, version)}'")
        return found

    def _split_id(self, sid: str) -> tuple[str, str]:
        """`iris-v2` as ("iris", "2"); a name alone is its newest version."""
        if "-v" in sid:
            name, version = sid.rsplit("-v", 1)
            if version in self.versions(name):
                return name, version
        versions = self.versions(sid)
        if versions:
            return sid, versions[-1]
        raise NotFound(f"no service '{sid}'", [FieldError("id", "names no deployed service version")])

    def get(self, sid: str) -> Obj:
        name, version = self._split_id(sid)
        versions = self.versions(name)
        pods = self.api.list("Pod", self._selector(name))["items"]
        return self._view(name, version, self.traffic_of(name, versions), pods)

    def wait(self, sid: str, timeout: float = 120.0, poll: float = 0.5) -> Obj:
        deadline = time.monotonic() + timeout
        while True:
            view = self.get(sid)
            if view["state"] == "Running" or time.monotonic() >= deadline:
                return view
            time.sleep(poll)

    def upstream(self, sid: str) -> str | None:
        """Where the Jupyter server's proxy sends a request for this version: a ready pod's
        address, round robin (None while none is ready). The server runs in the notebook's pod,
        so it reaches what the notebook reaches and no more (the namespace's NetworkPolicies)."""
        view = self.get(sid)
        ready = [r for r in view["replicas"] if r["state"] == "Ready" and r.get("ip")]
        if view["state"] != "Running" or not ready:
            return None
        replica = ready[int(time.monotonic() * 1000) % len(ready)]
        host = f"[{replica['ip']}]" if ":" in replica["ip"] else replica["ip"]
        return f"http://{host}:{replica['port']}"

    def directory(self, sid: str) -> Any:
        """A page opens in a sandbox behind a capability kept in a local service folder; a
        cluster service has none, so its pages are not rendered through Jupyter."""
        reason = (
            f"runs on Kubernetes: its API answers through Jupyter, its pages at {self.get(sid)['url']} "
            "(Jupyter renders pages of this machine's services only)"
        )
        raise ValidationError("not a page Jupyter renders", [FieldError("id", reason)])

    def logs(self, sid: str, replica: int = 0) -> str:
        view = self.get(sid)
        pods = view["replicas"]
        if not isinstance(replica, int) or not 0 <= replica < max(len(pods), 1):
            reason = f"must be between 0 and {max(len(pods), 1) - 1} for this service"
            raise ValidationError("invalid replica", [FieldError("replica", reason)])
        if not pods:
            return ""
        container = "kserve-container" if self.serves(KSERVE) else build.CONTAINER
        return "".join(self.api.pod_log(pods[replica]["name"], container))

    # -- changing ----------------------------------------------------------------------------
    def traffic(self, name: str, weights: Shares, mirror: Shares = ()) -> builtins.list[Obj]:
        """Move traffic between versions (`["2=10"]` or `{"2": 10}`), or copy it (`mirror`);
        nothing changes when a weight names no version or the weights do not add up."""
        versions = self.versions(name)
        if not versions:
            raise NotFound(f"no service '{name}'")
        chosen = split(
            name, versions, parse_assignments(weights, "traffic"), parse_assignments(mirror, "mirror")
        )
        if self.serves(KSERVE):
            found = self._kserve_versions(name)
            canary = kserve_canary(chosen, found.get("previous"), str(found.get("latest")))
            self.api.merge(
                "InferenceService", name, {"spec": {"predictor": {"canaryTrafficPercent": canary}}}
            )
        elif self.serves(GATEWAY_API):
            self._route(ServiceSpec.parse(self.get(name)["spec"]), chosen)
        else:
            whole = [v for v, percent in chosen.weights.items() if percent == 100]
            if chosen.mirror or not whole:
                reason = (
                    "a split or a mirror between versions needs KServe or the Gateway API on the "
                    "cluster; give one version 100 to switch the Service to it"
                )
                raise ValidationError("invalid traffic", [FieldError("traffic", reason)])
            self.api.merge("Service", name, {"spec": {"selector": {build.VERSION: whole[0]}}})
        return self._views(name)

    def _route(self, spec: ServiceSpec, traffic: Traffic) -> None:
        labels = {build.SERVICE: spec.name, "app.kubernetes.io/managed-by": "kubelab"}
        self.api.apply(
            http_route(spec.name, self.api.namespace, build.port(spec), traffic, labels, self.gateway)
        )
        primary = traffic.primary  # the stable Service follows the route's main version
        self.api.merge("Service", spec.name, {"spec": {"selector": {build.VERSION: primary}}})

    def stop(self, sid: str) -> Obj:
        """No replica runs (the version's objects stay, so `serve` can bring it back)."""
        name, version = self._split_id(sid)
        if self.serves(KSERVE):
            self.api.delete("InferenceService", name)  # KServe has no stopped state
            return {"id": sid, "name": name, "version": version, "state": "Stopped", "reason": "deleted"}
        self.api.delete("HorizontalPodAutoscaler", version_name(name, version))
        self.api.merge("Deployment", version_name(name, version), {"spec": {"replicas": 0}})
        return self.get(version_name(name, version))

    def delete(self, sid: str) -> None:
        """Remove a version that no longer gets traffic; with the last, the service's own objects."""
        name, version = self._split_id(sid)
        versions = self.versions(name)
        share = self.traffic_of(name, versions).weights.get(version, 0)
        if share and len(versions) > 1:
            reason = f"version {version} still gets {share}% of {name}'s traffic: move it first"
            raise ValidationError("cannot delete the version", [FieldError(f"traffic.{version}", reason)])
        if self.serves(KSERVE):
            self.api.delete("InferenceService", name)
            return
        for kind in ("HorizontalPodAutoscaler", "Service", "Deployment"):
            self.api.delete(kind, version_name(name, version))
        rest = [v for v in versions if v != version]
        if not rest:
            self.api.delete("Service", name)
            if self.serves(GATEWAY_API):
                self.api.delete("HTTPRoute", name)
        elif self.serves(GATEWAY_API) and self.api.get("HTTPRoute", name) is not None:
            current = self.traffic_of(name, versions)
            weights = {v: w for v, w in current.weights.items() if v != version}
            mirror = {v: p for v, p in current.mirror.items() if v != version}
            self._route(ServiceSpec.parse(self.get(rest[-1])["spec"]), Traffic(weights, mirror))


def _ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def services(home: Path | None = None, lab: Any = None) -> Any:
    """The services of this session: on the cluster where the backend has a namespace, else
    this machine's (`Services`)."""
    from kubelab.serving.service import Services

    backend = lab.backend if lab is not None else None
    if backend is None:
        from kubelab.backends.registry import make_backend

        backend = make_backend()
    cluster = backend.cluster()
    if cluster is not None:
        return ClusterServices(cluster, lab)
    return Services(home=home, lab=lab)
