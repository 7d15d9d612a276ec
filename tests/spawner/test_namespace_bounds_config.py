"""The namespace bounds an admin configures: defaults, the lab's and a group's overrides, and
bad values refused by name before any namespace is touched. What the API server does with
them is tests/security/test_namespace_bounds.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kubelab.errors import ValidationError
from kubelab.spawner.admission_policy import Placement, namespace_annotations, placement
from kubelab.spawner.bounds import NamespaceBounds, claims_storage, group_bounds, parse_bounds
from kubelab.spawner.groups import Quota, parse_group
from kubelab.spawner.objects import Storage, limit_range, user_namespace_objects

HUB_CONFIG = Path(__file__).resolve().parents[2] / "hub_config" / "jupyterhub_config.py"


def test_a_groups_bounds_override_the_labs() -> None:
    bounds = group_bounds({"pods": 80, "jobs": 40}, "vision", {"pods": 120, "ephemeral_volume": "1Ti"})
    assert (bounds.pods, bounds.jobs, bounds.ephemeral_volume) == (120, 40, "1Ti")
    assert bounds.serviceaccounts == NamespaceBounds().serviceaccounts


@pytest.mark.parametrize(
    ("value", "path", "reason"),
    [
        ({"pod": 3}, "x.pod", "unknown bound; did you mean 'pods'?"),
        ({"pods": -1}, "x.pods", "whole number from 0"),
        ({"pods": True}, "x.pods", "whole number"),
        ({"schedule_minutes": 0}, "x.schedule_minutes", "from 1 to 60"),
        ({"max_cpu": "lots"}, "x.max_cpu", "is not a Kubernetes quantity"),
        ({"ephemeral_volume": "0"}, "x.ephemeral_volume", "more than 0"),
        ({"default_cpu": "100"}, "x.default_cpu", "<= max_cpu"),
        ({"default_request_cpu": "100m"}, "x.cpu_ratio", "is over 10"),
        ("pods=3", "x", "must be a mapping"),
    ],
)
def test_bad_bounds_are_refused_by_name(value: object, path: str, reason: str) -> None:
    with pytest.raises(ValidationError) as refused:
        parse_bounds(value, "x")
    assert [f.path for f in refused.value.fields] == [path]
    assert reason in refused.value.fields[0].reason


def test_a_group_with_bad_bounds_names_the_property() -> None:
    with pytest.raises(ValidationError) as refused:
        parse_group("vision", {"namespace_bounds": {"pods": "many"}})
    assert [f.path for f in refused.value.fields] == ["groups.vision.namespace_bounds.pods"]


def test_the_namespace_carries_its_bounds() -> None:
    where = placement("jhub", {"org": "vision"}, [{"key": "nvidia.com/gpu"}, "junk"], ["example.com/gpu"])
    assert where == Placement("jhub", {"org": "vision"}, ("example.com/gpu", "nvidia.com/gpu"))
    built = user_namespace_objects(
        "user-alice",
        "alice",
        "kubelab-notebook",
        Quota(gpus=1),
        ["nvidia.com/gpu"],
        Storage(workspace_size="10Gi", archive_size="20Gi"),
        group="vision",
        bounds=NamespaceBounds(),
        placement=where,
    )
    by_kind = {o["kind"]: o for o in built}
    meta = by_kind["Namespace"]["metadata"]
    assert meta["labels"]["kubelab.io/hub"] == "jhub"
    assert meta["annotations"] == {
        "kubelab.io/group": "vision",
        "kubelab.io/storage": "one-claim",  # its claims' layout (spawner/storage_layout.py)
        **namespace_annotations(where, NamespaceBounds()),
    }
    assert meta["annotations"]["kubelab.io/node-selector"] == "org=vision"
    hard = by_kind["ResourceQuota"]["spec"]["hard"]
    assert hard["requests.storage"] == "230Gi"  # the claim (10Gi and 20Gi) and two ephemeral volumes
    assert hard["services.nodeports"] == hard["services.loadbalancers"] == "0"
    assert hard["count/serviceaccounts"] == "20" and hard["count/cronjobs.batch"] == "10"
    assert by_kind["LimitRange"] == limit_range("user-alice", NamespaceBounds())
    assert claims_storage(NamespaceBounds(storage="1Ti"), ["10Gi"]) == "1Ti"


@pytest.mark.slow  # imports JupyterHub and KubeSpawner
def test_a_spawn_with_bad_lab_bounds_is_refused_naming_them(tmp_path: Path) -> None:
    """An admin's mistake in `namespace_bounds` reaches the form as a sentence, before anything is
    created (not a failed spawn halfway through its namespace)."""
    from tornado.web import HTTPError

    from kubelab.spawner.cli import _OfflineKube, load_config
    from kubelab.spawner.offline import offline_spawner

    config = tmp_path / "jupyterhub_config.py"
    config.write_text(
        f"load_subconfig({str(HUB_CONFIG)!r})\nc = get_config()\n"
        "c.KubeLabSpawner.check_availability = False\n"
        "c.KubeLabSpawner.namespace_bounds = {'default_cpu': '100'}\n"
    )

    async def spawn() -> None:
        spawner = await offline_spawner(load_config(config), "alice", [])
        spawner.user_options = {}
        await spawner.load_user_options()

    with _OfflineKube(), pytest.raises(HTTPError) as refused:
        asyncio.run(spawn())
    assert refused.value.status_code == 400
    message = refused.value.jupyterhub_message  # type: ignore[attr-defined]
    assert "KubeLabSpawner.namespace_bounds.default_cpu" in message and "<= max_cpu" in message, message


def test_a_groups_priority_cap_becomes_a_quota_on_the_classes_above_it() -> None:
    def caps(max_priority: str | None) -> list[dict[str, Any]]:
        built = user_namespace_objects(
            "user-alice",
            "alice",
            "kubelab-notebook",
            Quota(),
            [],
            Storage(),
            max_priority=max_priority,
        )
        return [o for o in built if o["metadata"]["name"] == "kubelab-priority-cap"]

    (cap,) = caps("low")
    assert cap["spec"]["hard"] == {"pods": "0"}
    expression = cap["spec"]["scopeSelector"]["matchExpressions"][0]
    assert expression["scopeName"] == "PriorityClass" and expression["values"] == [
        "kubelab-normal",
        "kubelab-high",
    ]
    assert caps("high") == caps(None) == []
    assert parse_group("interns", {"max_priority": "normal"}).max_priority == "normal"
    with pytest.raises(ValidationError, match="groups.interns.max_priority: must be low, normal or high"):
        parse_group("interns", {"max_priority": "urgent"})
