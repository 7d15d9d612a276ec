"""`KubeLabSpawner`: KubeSpawner with GPU profiles, project groups, admission and prepared user
namespaces. A subclass, not a fork: it sets KubeSpawner's own settings from the chosen options
(in `load_user_options`, called first in `_start`) and adds objects in `_ensure_namespace`.

A drop-in KubeSpawner: kubelab's behaviour (catalog form, per-user namespaces with Pod Security
labels, quotas and NetworkPolicies, group placement) applies once the admin configures kubelab's
catalog (`gpu_catalog`) or its trusted-lab layout (`trusted_lab`). Without either it is
KubeSpawner: `profile_list`, KubeSpawner's `options_from_form` and its namespace defaults.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from typing import Any, ClassVar, cast

from kubernetes_asyncio.client.rest import ApiException
from kubespawner import KubeSpawner
from traitlets import default

from kubelab.errors import FieldError, KubelabError, ValidationError
from kubelab.quantity import parse_quantity

from . import builds, dra_claims, namespace_bundle, objects, shared_watch, storage_layout
from .admission import admit
from .apply import Applier, Outcome, api_message
from .availability import Availability
from .bounds import group_bounds
from .choice import choose, hub_memberships, public_properties
from .claims import IMMEDIATE, binding_mode, wait_bound
from .form import admin_error, render_form
from .groups import ProjectGroup
from .kube_settings import KubeLabSettings
from .labels import MANAGED_BY
from .network import HUB_ACCESS_LABEL, ApiServer, Isolation
from .objects import Storage
from .pod_settings import PodSettings, pod_settings, with_quantities
from .profiles import Catalog, NotebookOptions
from .retry import BUSY, cause
from .spawn_form import SpawnForm, refusal
from .spawn_queue import BackPressure, hub_queue
from .watched_start import WatchedStart

_TOUCHED = (  # KubeSpawner's settings that `apply` sets from the chosen options
    *("image", "cpu_limit", "cpu_guarantee", "mem_limit", "mem_guarantee"),
    *("extra_resource_limits", "extra_resource_guarantees", "node_selector", "tolerations"),
    *("volumes", "volume_mounts", "working_dir", "notebook_dir", "service_account", "extra_labels"),
)


class KubeLabSpawner(SpawnForm, KubeLabSettings, BackPressure, WatchedStart, KubeSpawner):  # type: ignore[misc]  # untyped base
    """GPU notebooks on Kubernetes for every user of a lab."""

    _catalogs: ClassVar[dict[str, Catalog]] = {}
    _api_servers: ClassVar[dict[Any, tuple[float, ApiServer]]] = {}
    _pod_namespace: ClassVar[str | None] = None
    storage_found: storage_layout.Found | None = None  # this spawn's storage layout

    @property
    def kubelab_mode(self) -> bool:
        """Whether kubelab's behaviour applies: the admin configured its catalog or trusted-lab
        layout. Read when a default is first needed, as KubeSpawner reads `profile_list`."""
        return bool(self.gpu_catalog) or self.trusted_lab

    @default("enable_user_namespaces")
    def _default_user_namespaces(self) -> bool:
        """Per-user namespaces with kubelab's catalog (each user's quota, Pod Security level and
        NetworkPolicies live in their namespace); KubeSpawner's one namespace otherwise."""
        return self.kubelab_mode and not self.trusted_lab

    @default("options_form")
    def _default_options_form(self) -> Any:
        """kubelab's form with its catalog; else KubeSpawner's (its `profile_list`, or none)."""
        if not self.kubelab_mode:
            return self._options_form_default()
        self._warn_profile_list()
        return self._render_form

    def _warn_profile_list(self) -> None:
        if self.profile_list:
            self.log.warning(
                "KubeLabSpawner.profile_list is ignored: with gpu_catalog configured, "
                "the catalog's profiles take its place"
            )

    @default("options_from_form")
    def _default_options_from_form(self) -> Any:
        """kubelab's validate-and-admit with its catalog; else KubeSpawner's own parser."""
        return self._admit_form if self.kubelab_mode else self._options_from_form

    def _namespace_default(self) -> str:
        """KubeSpawner's (the hub pod's namespace, else `default`), read once per hub: it stats
        a file at every call, and a spawn expands its labels' templates about 26 times."""
        if KubeLabSpawner._pod_namespace is None:
            KubeLabSpawner._pod_namespace = str(super()._namespace_default())
        return KubeLabSpawner._pod_namespace

    @default("hub_namespace")
    def _default_hub_namespace(self) -> str:
        return self._namespace_default()

    @default("user_namespace_labels")
    def _default_namespace_labels(self) -> dict[str, str]:
        if not self.kubelab_mode:
            return {}
        return {
            "kubelab.io/user": "{username}",
            **MANAGED_BY,
            **objects.pod_security_labels(self.pod_security),
        }

    # -- configuration --------------------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        """Parsed once per configuration (it is read on every form view and spawn)."""
        key = json.dumps(self.gpu_catalog, sort_keys=True, default=str)
        cached = self._catalogs.get(key)
        if cached is None:
            cached = self._catalogs[key] = Catalog.parse(self.gpu_catalog, "KubeLabSpawner.gpu_catalog")
            shared_watch.remember(cached)
        return cached

    @property
    def storage(self) -> Storage:
        cls = self.storage_class or None
        if self.trusted_lab:
            return Storage.trusted_lab(
                workspace_claim=self.shared_workspace_claim,
                archive_claim=self.shared_archive_claim,
                storage_class=cls,
            )
        found = self.storage_found
        layout = found.layout if found else storage_layout.ONE_CLAIM
        if not self.enable_user_namespaces:  # one namespace for all: its claims as they were
            layout = storage_layout.TWO_CLAIMS
        return Storage(
            workspace_size=self.workspace_size,
            archive_size=self.archive_size,
            storage_class=cls,
            layout=layout,
        )

    @property
    def user_slug(self) -> str:
        return cast(str, self._expand_user_properties("{username}"))

    # -- availability ---------------------------------------------------------------------

    async def availability(self) -> Availability:
        """The shared watch's current numbers (started on first use, one per hub)."""
        watch = shared_watch.hub_watch(self.catalog)
        await watch.start()
        return watch.current()

    @classmethod
    async def stop_watches(cls) -> None:
        await shared_watch.stop_watches()

    # -- the form -------------------------------------------------------------------------

    async def _render_form(self, spawner: KubeLabSpawner | None = None) -> str:
        current = None
        try:
            groups = self._groups()
        except ValidationError as exc:  # an admin's mistake: say so instead of a blank page
            return admin_error(exc)
        try:
            current = await self.availability() if self.check_availability else None
        except Exception:
            self.log.warning("GPU availability unknown", exc_info=True)
        return render_form(self.catalog, groups, current, self.user_options)

    async def _admit(self, raw: dict[str, Any]) -> NotebookOptions:
        options, group = self._choose(raw)
        if self.check_availability:
            admit(options, group, self.user_slug, *self._held(await self._availability_for(group)))
        return options

    def _held(self, current: Any) -> tuple[Any, Any]:
        """The availability, and the user's own usage counted by their namespace (which they
        cannot leave) rather than by a label any pod in it may carry; by label in trusted-lab mode."""
        held = current.namespace(self.namespace) if self.enable_user_namespaces else None
        return current, held

    def _groups(self) -> list[ProjectGroup]:
        from .groups import user_groups

        return user_groups(hub_memberships(self.user), public_properties(self, self.public_group_properties))

    def _choose(self, raw: Any) -> tuple[NotebookOptions, ProjectGroup]:
        options, group = choose(
            raw,
            self.catalog,
            hub_memberships(self.user),
            public_properties(self, self.public_group_properties),
        )
        if group.cluster and group.cluster != (self.cluster_context or group.cluster):
            raise ValidationError(
                "invalid server options",
                [
                    FieldError(
                        "group",
                        f"group '{group.name}' runs on cluster '{group.cluster}', but this hub spawns on "
                        f"'{self.cluster_context}'; use that cluster's hub",
                    )
                ],
            )
        return options, group

    async def _availability_for(self, group: ProjectGroup) -> Availability:
        return await self.availability()

    # -- spawning -------------------------------------------------------------------------

    def plan(self) -> tuple[NotebookOptions, ProjectGroup, PodSettings]:
        """Validated options, group and pod settings for the current user_options (no API calls)."""
        options, group = self._choose(self.user_options or {})
        settings = pod_settings(
            self.user_slug,
            self.user.name,
            self.namespace,
            options,
            group,
            self.catalog,
            self.storage,
            self.notebook_service_account,
            self.priority_classes,
        )
        return options, group, settings

    async def load_user_options(self) -> None:
        """Called first thing in KubeSpawner's `_start`, for form and REST API spawns alike."""
        if not self.kubelab_mode:
            await super().load_user_options()
            return
        self._warn_profile_list()
        self.storage_found = None  # planned as a new user's first; then as the namespace has it
        try:
            options, group, settings = self.plan()
            group_bounds(self.namespace_bounds, group.name, group.bounds)  # an admin's mistake: said
            if self.check_availability:
                admit(options, group, self.user_slug, *self._held(await self._availability_for(group)))
            self.storage_found = await storage_layout.find_for(self)
            if self.storage_found and self.storage_found.layout != storage_layout.ONE_CLAIM:
                settings = self.plan()[2]  # the two claims it has
        except KubelabError as exc:
            raise refusal(exc) from None
        self._group = group
        self.apply(settings)
        if not self.enable_user_namespaces:
            await self._ensure_objects(group)

    def apply(self, settings: PodSettings) -> None:
        """Set KubeSpawner's settings from ours, starting from the configured values each time."""
        if not hasattr(self, "_configured"):
            self._configured = {name: copy.deepcopy(getattr(self, name)) for name in _TOUCHED}
        base = copy.deepcopy(self._configured)
        cpu = float(parse_quantity(settings.cpu))
        memory = int(parse_quantity(settings.memory))
        self.image = settings.image
        self.cpu_limit = self.cpu_guarantee = cpu
        self.mem_limit = self.mem_guarantee = memory
        self.extra_resource_limits = {
            **base["extra_resource_limits"],
            **{k: str(v) for k, v in settings.gpu_limits.items()},
        }
        self.extra_resource_guarantees = {
            **base["extra_resource_guarantees"],
            **{k: str(v) for k, v in settings.gpu_limits.items()},
        }
        self.node_selector = {**base["node_selector"], **settings.node_selector}
        self.tolerations = self._sorted_dict_values(base["tolerations"]) + settings.tolerations
        self.volumes = self._sorted_dict_values(base["volumes"]) + settings.volumes
        self.volume_mounts = self._sorted_dict_values(base["volume_mounts"]) + settings.mounts
        self.working_dir = settings.working_dir
        self.notebook_dir = settings.working_dir
        self.default_url = settings.default_url  # JupyterLab, or VS Code (spawner/interfaces.py)
        self.service_account = self.notebook_service_account
        self.extra_labels = {**base["extra_labels"], **settings.labels}
        if self.network_policy:  # z2jh's hub policy admits pods from other namespaces by this label
            self.extra_labels[HUB_ACCESS_LABEL] = "true"
        self._kubelab_env = {
            **settings.env,
            **builds.notebook_env(self),
            "KUBELAB_GATEWAY": self.service_gateway,
        }
        if settings.priority_class:
            self.priority_class_name = settings.priority_class
        self._settings = settings

    async def get_pod_manifest(self) -> Any:
        """KubeSpawner's pod, with CPU and memory as the quantities the user chose."""
        pod = await super().get_pod_manifest()
        settings = getattr(self, "_settings", None)
        if settings is not None and settings.dra_template:
            dra_claims.attach(pod, settings.dra_template["metadata"]["name"])
        return pod if settings is None else with_quantities(pod, settings)

    def get_env(self) -> dict[str, str]:
        env = cast(dict[str, str], super().get_env())
        env.update(getattr(self, "_kubelab_env", {}))
        return env

    # -- the user's namespace -------------------------------------------------------------

    def isolation(self, api_server: ApiServer | None) -> Isolation | None:
        """The NetworkPolicy settings, or None when they are off (or in trusted-lab mode)."""
        return namespace_bundle.isolation(self, api_server)

    def namespace_objects(
        self, group: ProjectGroup, api_server: ApiServer | None = None
    ) -> list[dict[str, Any]]:
        """What the spawner creates besides the pod, in order (pure: used by render and
        reconcile too). Without `api_server` the notebooks' API-server egress rule is left out."""
        return namespace_bundle.namespace_objects(self, group, api_server)

    async def api_server(self) -> ApiServer:
        """The configured API server addresses, else those of default/kubernetes's EndpointSlices
        (read once a minute per hub: they change when control-plane nodes do)."""
        if self.api_server_cidrs:
            return ApiServer.parse(
                list(self.api_server_cidrs), list(self.api_server_ports), "KubeLabSpawner.api_server"
            )
        loop = asyncio.get_running_loop()
        cached = self._api_servers.get(loop)
        if cached and cached[0] > time.monotonic():
            return cached[1]
        applier = Applier(self.api.api_client, self.k8s_api_request_timeout)
        found = ApiServer.from_endpoint_slices(await applier.api_server_slices())
        self._api_servers[loop] = (time.monotonic() + 60, found)
        return found

    async def _start(self) -> Any:
        """KubeSpawner's start. A refusal by the API server (Pod Security, a quota, RBAC) reaches
        the form as the server's own sentence instead of a bare 500."""
        if not self.kubelab_mode:
            return await super()._start()
        self._ticket: asyncio.Future[None] | None = None
        self._busy: ApiException | None = None
        try:
            return await super()._start()
        except ApiException as exc:
            if exc.status not in (400, 403, 409, 422, *BUSY):
                raise
            raise refusal(KubelabError(cause(exc, api_message(exc)))) from exc
        except TimeoutError as exc:  # KubeSpawner's backoff gave up on a busy pod create
            busy = getattr(self, "_busy", None)
            if busy is None:
                raise
            raise refusal(KubelabError(cause(busy, api_message(busy)))) from exc

    async def _ensure_namespace(self) -> None:
        """kubelab's bundle holds the namespace: no create-then-409 on every spawn."""
        if not self.kubelab_mode:
            await super()._ensure_namespace()
            return
        await self._ensure_objects(getattr(self, "_group", None) or self.plan()[1])

    async def _ensure_objects(self, group: ProjectGroup) -> Outcome:
        """Bring the namespace's objects up to date with the configuration (server-side apply;
        see kubelab.spawner.apply): a returning user's spawn finds the namespace's hash in the
        hub's watch (or reads that one object) and writes nothing;
        a new namespace, or the next spawn after an upgrade, reconciles it in the hub's queue.
        Then the claims it created are given time to bind (kubelab.spawner.claims)."""
        ticket = self._ticket = asyncio.get_running_loop().create_future()
        queue = hub_queue(self.spawn_concurrency)
        api_server = await self.api_server() if self.isolation(None) else None
        wanted = self.namespace_objects(group, api_server)
        if self.trusted_lab:  # a shared namespace: create what is missing, prune nothing
            wanted = [o for o in wanted if o["kind"] != "Namespace"]
        applier = Applier(self.api.api_client, self.k8s_api_request_timeout)
        watch = shared_watch.running_watch() if wanted[0]["kind"] == "Namespace" else None
        known = watch.user_namespace(self.namespace) if watch else None
        found = self.storage_found  # its namespace, if this spawn just read it
        try:
            outcome = await applier.ensure_bundle(
                self.namespace,
                wanted,
                prune=not self.trusted_lab,
                turn=lambda: queue.turn(ticket),
                known=found.namespace if found and found.fresh else known,
                fresh=bool(found and found.fresh),
            )
        finally:
            if not ticket.done():  # never queued (or cancelled first): the progress page moves on
                ticket.cancel()
        settings = getattr(self, "_settings", None)
        if settings is not None and settings.dra_template:  # the quota's refusal, before the pod
            await dra_claims.prepare(applier, settings.dra_template)
        claims = [c.split("/", 1)[1] for c in outcome.created if c.startswith("PersistentVolumeClaim/")]
        if claims and await binding_mode(applier, self.storage_class) == IMMEDIATE:
            await wait_bound(self.api.api_client, self.namespace, claims, self.claim_bind_timeout)
        changed = outcome.migrated + outcome.created + outcome.deleted
        if changed:
            self.log.info(
                "namespace %s: migrated %s, created %s, deleted %s",
                self.namespace,
                outcome.migrated,
                outcome.created,
                outcome.deleted,
            )
        return outcome

    # -- render ---------------------------------------------------------------------------

    async def render(self) -> list[dict[str, Any]]:
        """Every object a spawn would create, without a cluster: namespace objects and the pod."""
        try:
            if not self.kubelab_mode:
                reason = (
                    "is not configured, so the spawner behaves as KubeSpawner; configure "
                    "the catalog (docs/jupyterhub.md)"
                )
                raise ValidationError("nothing of kubelab's to render", [FieldError("gpu_catalog", reason)])
            _, group, settings = self.plan()
        except KubelabError as exc:
            raise refusal(exc) from None
        self.apply(settings)
        pod = await self.get_pod_manifest()
        if self.modify_pod_hook:
            pod = (
                await self.modify_pod_hook(self, pod)
                if asyncio.iscoroutinefunction(self.modify_pod_hook)
                else self.modify_pod_hook(self, pod)
            )
        manifest = self.api.api_client.sanitize_for_serialization(pod)
        manifest.setdefault("apiVersion", "v1")
        manifest.setdefault("kind", "Pod")
        manifest["metadata"]["namespace"] = self.namespace
        api_server = None
        if self.api_server_cidrs and self.isolation(None):
            api_server = ApiServer.parse(
                list(self.api_server_cidrs), list(self.api_server_ports), "KubeLabSpawner.api_server"
            )
        claimed = [settings.dra_template] if settings.dra_template else []
        return [*self.namespace_objects(group, api_server), *claimed, manifest]
