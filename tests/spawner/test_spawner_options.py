"""The pure parts: the volume_mount grammar, the GPU catalog and options, project groups,
admission and availability arithmetic. Each bad input must name its field and reason."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pytest

from kubelab.backends.local.gpus import Gpu, GpuAllocator
from kubelab.errors import ValidationError
from kubelab.spawner.admission import admit
from kubelab.spawner.availability import (
    Availability,
    TypeCount,
    Usage,
    cluster_availability,
    local_availability,
)
from kubelab.spawner.groups import ProjectGroup, choose_group, parse_group, user_groups
from kubelab.spawner.profiles import Catalog, parse_resource_gpu, validate_options
from kubelab.spawner.volumes import VolumeMount, kubernetes_volumes, parse_volume_mount, volume_name

CATALOG = Catalog.parse(
    {
        "gpu_types": [
            {"name": "T4", "label_value": "nvidia-t4", "max_per_user": 2},
            {"name": "V100", "max_per_user": 4},
        ],
        "images": ["lab/pytorch:2", "lab/tf:2"],
        "profiles": {"small": {"cpu": "1", "memory": "2Gi"}, "t4": {"gpus": "1(T4)", "cpu": "4"}},
    }
)


def reasons(exc: pytest.ExceptionInfo[ValidationError]) -> list[str]:
    return [str(f) for f in exc.value.fields]


# -- volume_mount -----------------------------------------------------------------------------


def test_the_cube_studio_grammar() -> None:
    text = (
        "kubeflow-user-workspace(pvc):/mnt/;data/aidata(hostpath):/aidata;4G(memory):/dev/shm,"
        "cfg(configmap):/etc/x;creds(secret):/etc/y;nfs.lab:/export/data(nfs):/nfs;"
        "datasets（pvc）:/datasets"
    )
    volumes, mounts = kubernetes_volumes(parse_volume_mount(text), "alice")
    by_path = {m["mountPath"]: m for m in mounts}
    volume = {v["name"]: v for v in volumes}
    assert by_path["/mnt/alice"]["subPath"] == "alice"
    assert volume[by_path["/mnt/alice"]["name"]]["persistentVolumeClaim"] == {
        "claimName": "kubeflow-user-workspace"
    }
    assert volume[by_path["/aidata"]["name"]]["hostPath"]["path"] == "/data/aidata"
    assert volume[by_path["/dev/shm"]["name"]]["emptyDir"] == {"medium": "Memory", "sizeLimit": "4G"}
    assert volume[by_path["/etc/x"]["name"]]["configMap"] == {"name": "cfg"} and by_path["/etc/x"]["readOnly"]
    assert volume[by_path["/etc/y"]["name"]]["secret"] == {"secretName": "creds"}
    assert volume[by_path["/nfs"]["name"]]["nfs"] == {"server": "nfs.lab", "path": "/export/data"}
    assert "subPath" not in by_path["/datasets"]  # no trailing slash: the whole claim


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("workspace(pvc)/mnt/", "entry 'workspace(pvc)/mnt/' at position 1: must be SOURCE(KIND):MOUNT_PATH"),
        ("a(pvc):/a;b(volume):/b", "entry 'b(volume):/b' at position 11: unknown kind 'volume'"),
        ("a(pvc):/a; (pvc):/b", "entry '(pvc):/b' at position 12: the pvc source before '(' is empty"),
        ("a(pvc):mnt", "the mount path 'mnt' must be absolute"),
        ("a(pvc):/x/../etc", "must not contain '..'"),
        ("Big_Claim(pvc):/x", "the claim name 'Big_Claim' must be lowercase letters"),
        ("lots(memory):/dev/shm", "the memory size 'lots' is not a Kubernetes quantity"),
        ("server(nfs):/n", "the NFS source 'server' must be SERVER:/EXPORT"),
        ("a(pvcc):/a", "unknown kind 'pvcc'; did you mean 'pvc'?"),
    ],
)
def test_malformed_volume_mounts_name_position_and_reason(text: str, reason: str) -> None:
    with pytest.raises(ValidationError) as exc:
        parse_volume_mount(text, "groups.g.volume_mount")
    assert any(r.startswith("groups.g.volume_mount: ") and reason in r for r in reasons(exc)), reasons(exc)


def test_duplicate_mount_paths_are_refused() -> None:
    with pytest.raises(ValidationError) as exc:
        kubernetes_volumes(parse_volume_mount("a(pvc):/data;b(hostpath):/data/"), "u")
    hostpath = volume_name(VolumeMount("hostpath", "/b", "/data/"))
    assert hostpath.startswith("hostpath-b-")
    assert reasons(exc) == [
        f"volume_mount: mount path '/data' is used by both volume 'pvc-a' and volume '{hostpath}'"
    ]


def test_one_claim_mounted_twice_is_one_volume() -> None:
    volumes, mounts = kubernetes_volumes(parse_volume_mount("shared(pvc):/mnt/;shared(pvc):/shared"), "bo")
    assert len(volumes) == 1 and [m["mountPath"] for m in mounts] == ["/mnt/bo", "/shared"]


def test_a_volume_mount_must_be_text() -> None:
    with pytest.raises(ValidationError) as exc:
        parse_volume_mount(cast(Any, ["a(pvc):/a"]))
    assert reasons(exc) == ["volume_mount: must be a string such as 'name(pvc):/mnt/', not list"]


# -- GPU counts, catalog, options -------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        (2, (2, None, None)),
        ("2", (2, None, None)),
        ("1(V100)", (1, None, "V100")),
        ("1(nvidia,V100)", (1, "nvidia", "V100")),
        ("1（V100）", (1, None, "V100")),
        ("2（nvidia，T4）", (2, "nvidia", "T4")),
        (" 0 ", (0, None, None)),
        (3.0, (3, None, None)),
        ("0.5", (0.5, None, None)),  # a share: 1/n, as a run's resources.gpus
        ("0.25(T4)", (0.25, None, "T4")),
        (0.5, (0.5, None, None)),
    ],
)
def test_resource_gpu_strings(value: object, parsed: tuple[Any, ...]) -> None:
    assert parse_resource_gpu(value) == parsed


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("-1", "gpus: must not be negative, not -1"),
        (-2, "gpus: must not be negative, not -2"),
        (
            "0.3",
            "gpus: must be a whole number of GPUs, or 1/n of one GPU to share it (0.5, 0.25, ...), not 0.3",
        ),
        (1.5, "must be a whole number of GPUs, or 1/n of one GPU"),
        ("-0.5", "gpus: must not be negative, not -0.5"),
        ("one", "is not a number"),
        ("1(a,b,c)", "inside the brackets write TYPE or VENDOR,TYPE"),
        (True, "not True"),
        ([1], "not list"),
        ("(V100)", "is not a GPU count"),
    ],
)
def test_bad_gpu_counts(value: object, reason: str) -> None:
    with pytest.raises(ValidationError) as exc:
        parse_resource_gpu(value)
    assert reason in reasons(exc)[0]


def test_options_with_defaults_profiles_and_overrides() -> None:
    options = validate_options({"profile": "t4", "memory": "12Gi"}, CATALOG, "vision")
    assert (options.gpus, options.gpu_type, options.cpu, options.memory, options.group) == (
        1,
        "T4",
        "4",
        "12Gi",
        "vision",
    )
    assert options.image == "lab/pytorch:2"
    assert validate_options({"gpus": "2(v100)"}, CATALOG).gpu_type == "V100"  # case-insensitive
    assert validate_options({}, CATALOG).to_user_options() == {
        "image": "lab/pytorch:2",
        "cpu": "1",
        "memory": "4Gi",
        "gpus": 0,
        "group": "public",
        "shm": "1Gi",
    }


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ({"gpus": 1, "gpu_type": "K80"}, "gpu_type: unknown GPU type 'K80' (types: T4, V100)"),
        ({"gpus": "1(T4)", "gpu_type": "V100"}, "gpu_type: 'V100' contradicts the type 'T4' in gpus"),
        ({"gpus": "3(T4)"}, "gpus: at most 2 T4 GPU(s) per user, not 3"),
        ({"gpus": "1(amd,T4)"}, "gpus: vendor 'amd' does not make T4"),
        ({"image": "lab/pytorch:3"}, "image: unknown image 'lab/pytorch:3'; did you mean 'lab/pytorch:2'?"),
        ({"profile": "smal"}, "profile: unknown profile 'smal'; did you mean 'small'?"),
        ({"cpu": "-1"}, "cpu: '-1' is negative"),
        ({"cpu": "0"}, "cpu: must be more than zero"),
        ({"memory": "1000Gi"}, "memory: at most 256Gi, not 1000Gi"),
        ({"shm": "big"}, "shm: 'big' is not"),
        ({"gpu": 1}, "gpu: unknown option; did you mean 'gpus'?"),
    ],
)
def test_bad_options_name_the_field(raw: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValidationError) as exc:
        validate_options(raw, CATALOG)
    assert any(reason in r for r in reasons(exc)), reasons(exc)


def test_options_must_be_a_mapping_and_groups_narrow_images() -> None:
    with pytest.raises(ValidationError, match="server options must be a mapping, not list"):
        validate_options(["gpus"], CATALOG)  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as exc:
        validate_options({"image": "lab/pytorch:2"}, CATALOG, "tf-team", allowed_images=["lab/tf:2"])
    assert reasons(exc) == [
        "image: unknown image 'lab/pytorch:2' for group 'tf-team'; did you mean 'lab/tf:2'? (images: lab/tf:2)"
    ]
    with pytest.raises(ValidationError, match="this hub offers no GPUs"):
        validate_options({"gpus": 1}, Catalog.parse({}))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"gpu_typos": []}, "catalog.gpu_typos: unknown field; did you mean 'gpu_types'?"),
        ({"gpu_types": {"T4": {}}}, "catalog.gpu_types: must be a list of GPU types"),
        (
            {"gpu_types": [{"label_value": "x"}]},
            "catalog.gpu_types[0]: must be a mapping with at least a 'name'",
        ),
        ({"gpu_types": [{"name": "T4", "max_per_user": -1}]}, "catalog.gpu_types[0].max_per_user: must be"),
        ({"gpu_types": [{"name": "T4", "labels": "x"}]}, "catalog.gpu_types[0].labels: unknown field"),
        ({"images": "lab/x"}, "catalog.images: must be a list of image names"),
        ({"profiles": {"p": {"gpuz": 1}}}, "catalog.profiles.p.gpuz: unknown option"),
        ({"profiles": ["p"]}, "catalog.profiles: must map profile names to options"),
        ({"default_cpu": ["1"]}, "catalog.default_cpu: must be a string"),
    ],
)
def test_bad_catalogs_are_refused(data: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValidationError) as exc:
        Catalog.parse(data)
    assert any(reason in r for r in reasons(exc)), reasons(exc)


# -- project groups ---------------------------------------------------------------------------


def test_group_properties() -> None:
    group = parse_group(
        "vision",
        {
            "node_selector": "org=vision, zone=a",
            "volume_mount": "d(pvc):/d",
            "quota": {"user": {"gpus": 2, "cpu": 8, "memory": "32Gi"}, "group": {"gpus": 6}},
            "cluster": "east",
            "images": ["lab/tf:2"],
            "example.org/owner": "someone else's",
        },
    )
    assert group.node_selector == {"org": "vision", "zone": "a"}
    assert (group.user_quota.gpus, group.user_quota.cpu, group.user_quota.memory) == (2, "8", "32Gi")
    assert group.group_quota.gpus == 6 and group.cluster == "east" and group.images == ("lab/tf:2",)
    assert parse_group("g", {"node_selector": {"a": "b"}}).node_selector == {"a": "b"}


@pytest.mark.parametrize(
    ("properties", "reason"),
    [
        ("lots", "groups.g: must be a mapping, not str"),
        ({"node_selector": ["org=x"]}, "groups.g.node_selector: must be a mapping of label to value"),
        ({"node_selector": "org"}, "groups.g.node_selector: 'org' must be KEY=VALUE"),
        ({"node_selector": {"org": 1}}, "groups.g.node_selector: must be a mapping"),
        ({"volume_mount": 7}, "groups.g.volume_mount: must be a string"),
        ({"quota": 4}, "groups.g.quota: must be a mapping with 'user' and/or 'group'"),
        ({"quota": {"users": {}}}, "groups.g.quota.users: unknown quota scope; did you mean 'user'?"),
        ({"quota": {"user": 2}}, "groups.g.quota.user: must be a mapping of gpus, cpu and memory"),
        (
            {"quota": {"user": {"gpus": "2"}}},
            "groups.g.quota.user.gpus: must be a whole number >= 0, not '2'",
        ),
        ({"quota": {"user": {"gpus": 1.5}}}, "groups.g.quota.user.gpus: must be a whole number >= 0"),
        ({"quota": {"group": {"memory": "many"}}}, "groups.g.quota.group.memory: 'many' is not"),
        ({"quota": {"user": {"gpu": 1}}}, "groups.g.quota.user.gpu: unknown quota; did you mean 'gpus'?"),
        ({"cluster": 3}, "groups.g.cluster: must be a kubeconfig context name"),
        ({"images": "lab/x"}, "groups.g.images: must be a list of image names"),
        ({"node_selectr": {}}, "groups.g.node_selectr: unknown property; did you mean 'node_selector'?"),
    ],
)
def test_wrong_property_types_are_refused(properties: object, reason: str) -> None:
    with pytest.raises(ValidationError) as exc:
        parse_group("g", properties)  # type: ignore[arg-type]
    assert any(reason in r for r in reasons(exc)), reasons(exc)
    assert exc.value.detail == "invalid properties of group 'g'"


def test_everyone_is_in_public_and_picks_one_group() -> None:
    groups = user_groups(
        [("vision", {}), ("nlp", {"node_selector": "org=nlp"})], {"quota": {"user": {"gpus": 1}}}
    )
    assert [g.name for g in groups] == ["vision", "nlp", "public"]
    assert groups[-1].user_quota.gpus == 1
    assert choose_group(groups, None).name == "vision" and choose_group(groups, "nlp").name == "nlp"
    with pytest.raises(ValidationError) as exc:
        choose_group(groups, "nlpp")
    assert reasons(exc) == [
        "group: you are not in group 'nlpp'; did you mean 'nlp'? (your groups: vision, nlp, public)"
    ]
    assert [g.name for g in user_groups([])] == ["public"]


# -- availability and admission ---------------------------------------------------------------


def node(name: str, label: str | None, gpus: int, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"gpu-type": label} if label else {}},
        "spec": {"unschedulable": unschedulable},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}},
    }


def pod(
    name: str,
    gpus: int,
    phase: str = "Running",
    node_name: str | None = None,
    selector: dict[str, Any] | None = None,
    user: str | None = "u",
    group: str | None = "g",
    cpu: str = "1",
    memory: str = "1Gi",
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {"kubelab.io/user": user, "kubelab.io/group": group},
        },
        "spec": {
            "nodeName": node_name,
            "nodeSelector": selector or {},
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "limits": {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": memory},
                        "requests": {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": memory},
                    },
                }
            ],
        },
        "status": {"phase": phase},
    }


def test_cluster_availability_counts_running_and_pending_requests() -> None:
    nodes = [
        node("t4-a", "nvidia-t4", 4),
        node("t4-b", "nvidia-t4", 2),
        node("v-a", "V100", 8),
        node("v-cordoned", "V100", 8, unschedulable=True),
        node("cpu", None, 0),
    ]
    pods = [
        pod("running", 2, node_name="t4-a", user="ann", group="vision"),
        pod("bound-pending", 1, "Pending", node_name="v-a", user="ann", group="vision"),
        pod("unbound-pending", 3, "Pending", selector={"gpu-type": "nvidia-t4"}, user="bo", group="nlp"),
        pod("anywhere", 1, "Pending"),
        pod("done", 4, "Succeeded", node_name="v-a"),
        pod("cpu-only", 0, node_name="cpu", user="ann", group="vision", cpu="500m", memory="2Gi"),
    ]
    result = cluster_availability(nodes, pods, CATALOG)
    assert result.types["T4"] == TypeCount(total=6, free=1)
    assert result.types["V100"] == TypeCount(total=8, free=7)
    assert result.unattributed == 1 and result.free(None) == 7 and result.total(None) == 14
    assert result.user("ann") == Usage(3, Decimal("2.5"), Decimal(4 * 2**30))
    assert result.group("nlp").gpus == 3 and result.user("nobody") == Usage()


def test_local_availability_from_the_machine_ledger(tmp_path: Path) -> None:
    allocator = GpuAllocator([Gpu(0, "Tesla T4"), Gpu(1, "Tesla T4"), Gpu(2, "Tesla V100-SXM2")], tmp_path)
    import os

    assert allocator.try_acquire("notebook/ann/vision/default", os.getpid(), 1, "T4") == [0]
    assert allocator.try_acquire("exp-123", os.getpid(), 1, "V100") == [2]
    result = local_availability(allocator.snapshot(), CATALOG)
    assert result.types == {"T4": TypeCount(2, 1), "V100": TypeCount(1, 0)}
    assert result.user("ann").gpus == 1 and result.group("vision").gpus == 1
    uncatalogued = local_availability(allocator.snapshot(), Catalog.parse({}))
    assert set(uncatalogued.types) == {"Tesla T4", "Tesla V100-SXM2"}


def test_a_share_on_this_machine_fits_beside_another_share(tmp_path: Path) -> None:
    """The local hub's ledger shares any GPU: a share takes room on a shared GPU, and a GPU
    partly shared is no longer free for a whole request."""
    import os

    allocator = GpuAllocator([Gpu(0, "Tesla T4")], tmp_path)
    assert allocator.try_acquire("notebook/ann/vision/default", os.getpid(), 0.5, "T4") == [0]
    now = local_availability(allocator.snapshot(), CATALOG)
    assert now.types["T4"] == TypeCount(1, 0) and now.room("T4") == 0.5
    half = validate_options({"gpus": "0.5(T4)"}, CATALOG, local=True)
    admit(half, ProjectGroup("public"), "bo", now)  # room for it beside ann's half
    with pytest.raises(ValidationError) as exc:
        admit(validate_options({"gpus": "1(T4)"}, CATALOG, local=True), ProjectGroup("public"), "bo", now)
    assert reasons(exc) == [
        "gpus: you asked for 1 T4 GPU(s) but only 0 of 1 are free now; free by type: T4 0/1, V100 0/0"
    ]
    assert allocator.try_acquire("notebook/bo/public/default", os.getpid(), 0.5, "T4") == [0]
    with pytest.raises(ValidationError, match="you asked for 0.5 T4 GPU"):  # both halves taken
        admit(half, ProjectGroup("public"), "cy", local_availability(allocator.snapshot(), CATALOG))


def test_admission_says_why_and_what_is_free() -> None:
    group = parse_group(
        "vision", {"quota": {"user": {"gpus": 2, "memory": "16Gi"}, "group": {"gpus": 3, "cpu": "8"}}}
    )
    now = Availability(types={"T4": TypeCount(4, 1), "V100": TypeCount(8, 8)})
    now.users["ann"] = Usage(1, Decimal(2), Decimal(8 * 2**30))
    now.groups["vision"] = Usage(2, Decimal(7), Decimal(0))
    admit(
        validate_options({"gpus": "1(V100)", "cpu": "1", "memory": "8Gi"}, CATALOG, "vision"),
        group,
        "ann",
        now,
    )
    with pytest.raises(ValidationError) as exc:
        admit(
            validate_options({"gpus": "2(T4)", "cpu": "2", "memory": "9Gi"}, CATALOG, "vision"),
            group,
            "ann",
            now,
        )
    assert exc.value.detail == "this server cannot start now"
    assert reasons(exc) == [
        "gpus: you asked for 2 T4 GPU(s) but only 1 of 4 are free now; free by type: T4 1/4, V100 8/8",
        "gpus: group 'vision' allows each user 2 GPU(s) at once; you hold 1, so you can ask for at most 1 more, not 2",
        "memory: group 'vision' allows each user 16Gi of memory at once; you hold 8Gi, so you can ask for at most "
        "8Gi more, not 9Gi",
        "gpus: group 'vision' allows all its members together 3 GPU(s) at once; its members hold 2, so you can ask "
        "for at most 1 more, not 2",
        "cpu: group 'vision' allows all its members together 8 CPU at once; its members hold 7, so you can ask "
        "for at most 1 more, not 2",
    ]
