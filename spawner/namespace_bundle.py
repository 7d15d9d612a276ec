"""A user's namespace bundle as a KubeLabSpawner's settings make it: everything a spawn
applies besides the pod (account, Role, quota, LimitRange, NetworkPolicies, claims, the build
namespace's binding), in order. Pure: render and reconcile print and apply the same list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import builds, objects
from .admission_policy import placement
from .bounds import group_bounds
from .group_quota import members_of, namespace_quota
from .groups import ProjectGroup
from .network import ApiServer, Isolation, extra_egress_rules, service_peers

if TYPE_CHECKING:
    from .kube import KubeLabSpawner


def isolation(spawner: KubeLabSpawner, api_server: ApiServer | None) -> Isolation | None:
    """The NetworkPolicy settings, or None when they are off (or in trusted-lab mode)."""
    if not spawner.network_policy or spawner.trusted_lab:
        return None
    return Isolation(
        hub_namespace=spawner.hub_namespace,
        api_server=api_server or ApiServer((), ()),
        notebook_selector={"component": spawner.component_label},
        notebook_port=spawner.port or 8888,
        internet=spawner.network_policy_internet,
        extra_egress=extra_egress_rules(
            list(spawner.network_policy_extra_egress), "KubeLabSpawner.network_policy_extra_egress"
        ),
        service_ingress=service_peers(list(spawner.service_ingress), "KubeLabSpawner.service_ingress"),
    )


def namespace_objects(
    spawner: KubeLabSpawner, group: ProjectGroup, api_server: ApiServer | None = None
) -> list[dict[str, Any]]:
    """What the spawner creates besides the pod, in order (pure: used by render and
    reconcile too). Without `api_server` the notebooks' API-server egress rule is left out."""
    role_file = spawner.notebook_role_file or None
    account = spawner.notebook_service_account
    if spawner.trusted_lab:
        return objects.trusted_objects(spawner.namespace, account, spawner.storage, role_file)
    resources = [t.resource for t in spawner.catalog.gpu_types]
    tolerations = [*spawner.catalog.gpu_tolerations, *spawner._sorted_dict_values(spawner.tolerations)]
    result = objects.user_namespace_objects(
        spawner.namespace,
        spawner.user_slug,
        account,
        namespace_quota(group.user_quota, group.group_quota, members_of(spawner.user, group.name)),
        resources,
        spawner.storage,
        role_file,
        group=group.name,
        isolation=isolation(spawner, api_server),
        bounds=group_bounds(spawner.namespace_bounds, group.name, group.bounds),
        placement=placement(
            spawner.hub_namespace,
            group.node_selector,
            tolerations,
            resources,
            spawner.service_gateway,
            spawner.service_domain,
            tuple(t.device_class for t in spawner.catalog.gpu_types if t.sharing == "dra"),
        ),
        max_priority=group.max_priority,
    )
    result += builds.user_objects(spawner, spawner.namespace, account)  # applied in the build namespace
    result[0]["metadata"]["labels"].update(spawner._expand_all(spawner.user_namespace_labels))
    annotations = spawner._expand_all(spawner.user_namespace_annotations)
    if annotations:  # KubeSpawner's namespace setting, applied with the bundle
        meta = result[0]["metadata"]
        meta["annotations"] = {**annotations, **meta.get("annotations", {})}
    return result
