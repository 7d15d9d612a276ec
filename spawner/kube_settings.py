"""What an admin configures for `KubeLabSpawner` beyond KubeSpawner's own settings.

A HasTraits mixin, so the settings are still set as `c.KubeLabSpawner.<name>` and listed by
`jupyterhub --help-all` under the spawner; kept apart so the spawner module holds behaviour only.
"""

from __future__ import annotations

from traitlets import Bool, Dict, Float, Int, List, Unicode

from .builds import BuildTraits


class KubeLabSettings(BuildTraits):
    """The catalog, storage, namespace isolation and availability settings (and the image builds')."""

    gpu_catalog = Dict(
        config=True, help="GPU types, images and profiles (see kubelab.spawner.profiles.Catalog)."
    )
    trusted_lab = Bool(
        False,
        config=True,
        help="""cube-studio's layout: one namespace, shared workspace and
        archive claims with per-user subPaths. Users can reach each other's files.""",
    )
    workspace_size = Unicode("50Gi", config=True)
    archive_size = Unicode("100Gi", config=True)
    storage_class = Unicode(
        None,
        allow_none=True,
        config=True,
        help="""StorageClass of the claims (None = the cluster default). KubeSpawner's own
        setting, so its `storage_pvc_ensure` claim uses it too ('' there means no class).""",
    )
    shared_workspace_claim = Unicode(
        "kubeflow-user-workspace", config=True, help="Trusted-lab workspace claim."
    )
    shared_archive_claim = Unicode("kubeflow-archives", config=True, help="Trusted-lab archive claim.")
    notebook_service_account = Unicode("kubelab-notebook", config=True)
    notebook_role_file = Unicode(
        "",
        config=True,
        help="Role manifest for the notebook's account ('' = hub_config/rbac/notebook-role.yaml).",
    )
    public_group_properties = Dict(config=True, help="Properties of `public` when the hub has no such group.")
    cluster_context = Unicode(
        "",
        config=True,
        help="""The kubeconfig context this hub spawns in. A group whose
        `cluster` names another context is refused (one hub spawns on one cluster).""",
    )
    check_availability = Bool(
        True, config=True, help="Refuse requests beyond free GPUs (watches nodes and pods)."
    )
    network_policy = Bool(
        True,
        config=True,
        help="""NetworkPolicies in each user namespace (see kubelab.spawner.network): notebooks
        take connections from the hub and proxy only and reach DNS, the hub API and the API
        server; experiments reach the same namespace's experiments; nothing reaches the metadata
        endpoint or other users' pods. Needs a CNI that enforces NetworkPolicy.""",
    )
    network_policy_internet = Bool(
        True,
        config=True,
        help="Let notebooks and experiments reach public addresses (package indexes, datasets).",
    )
    network_policy_extra_egress = List(
        Dict(),
        config=True,
        help="""More egress for every pod of a user namespace (NetworkPolicy egress rules), e.g.
        the lab's package mirror or object storage inside the cluster:
        [{"to": [{"ipBlock": {"cidr": "10.20.0.5/32"}}], "ports": [{"port": 443}]}].""",
    )
    service_ingress = List(
        Dict(),
        config=True,
        help="""Who else may reach users' served services (kubelab serve) besides the hub's proxy
        and the user's notebook: NetworkPolicy peers, e.g. the ingress controller's or the
        Gateway's pods [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name":
        "gateway-system"}}}].""",
    )
    service_gateway = Unicode(
        config=True,
        help="""NAMESPACE/NAME of the shared Gateway users' service routes may attach to ('' =
        none: routes split traffic inside the namespace only). Its listeners' allowedRoutes
        must admit the user namespaces.""",
    )
    service_domain = Unicode(
        config=True,
        help="""The domain of routes on service_gateway: a user's route there serves only
        hostnames ending in .<namespace>.<service_domain> (checked by the API server).""",
    )
    hub_namespace = Unicode(
        config=True, help="The hub's namespace, where the hub and proxy pods run ('' = the hub's own)."
    )
    api_server_cidrs = List(
        Unicode(),
        config=True,
        help="""Addresses of the API server's endpoints for the notebooks' egress ([] = read from
        the EndpointSlices of default/kubernetes at each spawn).""",
    )
    api_server_ports = List(Int(), [443, 6443], config=True, help="Ports of api_server_cidrs.")

    namespace_bounds = Dict(
        config=True,
        help="""Bounds of every user namespace beyond GPUs, CPU and memory (kubelab.spawner.bounds:
        object counts, storage, per-container minimum, maximum and defaults, ephemeral volume
        size, schedule interval), e.g. {"pods": 100}; a group's `namespace_bounds` property
        overrides these for its members.""",
    )
    pod_security = Unicode(
        "baseline",
        config=True,
        help=(
            "Pod Security level enforced in users' namespaces: baseline (default: no privileged, host "
            "namespaces or hostPath), restricted, or privileged (only for groups that mount hostPath)."
        ),
    )
    priority_classes = Bool(
        False,
        config=True,
        help="""The cluster has kubelab's PriorityClasses (`kubelab hub render --all`): notebooks get
        `kubelab-notebook` (runs never preempt them) and runs may ask for low, normal or high.""",
    )
    spawn_concurrency = Int(
        16,
        config=True,
        help="""How many spawns prepare their namespace at once per hub; the rest queue in arrival
        order (their progress says how many are ahead) instead of flooding the API server.""",
    )
    claim_bind_timeout = Float(
        20,
        config=True,
        help="""Seconds a first spawn waits for its new claims of an Immediate StorageClass to be
        bound before it makes the pod anyway (the scheduler would otherwise back off).""",
    )
