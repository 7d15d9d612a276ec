"""KubeLabSpawner is a drop-in KubeSpawner: kubelab's behaviour applies once the admin configures
its catalog (or trusted-lab layout); without it, KubeSpawner's own defaults and form hooks hold.

KubeSpawner's own test suite checks the drop-in side in depth (benchmarks/kubespawner_peer.sh);
these check the switch itself, and that the shipped configuration keeps the safe mode.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from tornado import web

from kubelab.spawner import KubeLabSpawner
from kubelab.spawner.cli import HUB_CONFIG_DIR, _OfflineKube, load_config

CATALOG = {"gpu_types": [{"name": "T4", "label_value": "T4"}], "images": ["lab/notebook:1"]}
PROFILES = [
    {"display_name": "Small", "slug": "small", "default": True, "kubespawner_override": {"cpu_limit": 1.0}},
    {
        "display_name": "Large",
        "slug": "large",
        "kubespawner_override": {"cpu_limit": 4.0},
        "profile_options": {
            "image": {
                "display_name": "Image",
                "choices": {
                    "a": {"display_name": "A", "kubespawner_override": {"image": "lab/a:1"}},
                    "b": {"display_name": "B", "kubespawner_override": {"image": "lab/b:1"}},
                },
            }
        },
    },
]


def built(check: Any, **traits: Any) -> Any:
    """`check(spawner)` on a spawner built on a loop, offline (KubeSpawner loads a kubeconfig)."""

    async def run() -> Any:
        result = check(KubeLabSpawner(_mock=True, **traits))
        return await result if inspect.isawaitable(result) else result

    with _OfflineKube():
        return asyncio.run(run())


def test_without_a_catalog_the_defaults_are_kubespawner_s() -> None:
    def check(spawner: Any) -> None:
        assert not spawner.kubelab_mode
        assert spawner.enable_user_namespaces is False
        assert spawner.user_namespace_labels == {}
        assert spawner.options_form == ""  # no profile_list: JupyterHub shows no form
        form = {"profile": ["large"], "profile-option-large--image": ["b"], "stray": ["x"]}
        assert spawner.options_from_form(form) == {"profile": "large", "image": "b"}  # not a coroutine

    built(check)


def test_without_a_catalog_profile_list_is_honoured() -> None:
    async def check(spawner: Any) -> None:
        assert "Large" in spawner.options_form and 'name="profile"' in spawner.options_form
        spawner.user_options = {"profile": "large", "image": "b"}
        await spawner.load_user_options()
        assert (spawner.cpu_limit, spawner.image) == (4.0, "lab/b:1")
        spawner.user_options = {"profile": "nonesuch"}
        with pytest.raises(ValueError, match="nonesuch"):
            await spawner.load_user_options()

    built(check, profile_list=PROFILES)


def test_render_without_a_catalog_names_the_missing_setting() -> None:
    async def check(spawner: Any) -> None:
        with pytest.raises(web.HTTPError) as refused:
            await spawner.render()
        assert "gpu_catalog" in refused.value.jupyterhub_message  # type: ignore[attr-defined]

    built(check)


def test_with_a_catalog_kubelab_s_behaviour_applies() -> None:
    def check(spawner: Any) -> None:
        assert spawner.kubelab_mode and spawner.enable_user_namespaces is True
        assert spawner.namespace == spawner.user_slug  # the user's own (user_namespace_template)
        labels = spawner.user_namespace_labels
        assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
        assert inspect.iscoroutinefunction(spawner.options_from_form)  # validate and admit
        assert callable(spawner.options_form)  # the catalog form, rendered per view

    built(check, gpu_catalog=CATALOG, user_namespace_template="{username}")


def test_with_a_catalog_profile_list_is_ignored_aloud(caplog: pytest.LogCaptureFixture) -> None:
    def check(spawner: Any) -> None:
        assert callable(spawner.options_form)

    built(check, gpu_catalog=CATALOG, profile_list=PROFILES)
    assert "profile_list is ignored" in caplog.text


def test_trusted_lab_without_a_catalog_is_kubelab_s_shared_namespace() -> None:
    def check(spawner: Any) -> None:
        assert spawner.kubelab_mode and spawner.enable_user_namespaces is False
        assert spawner.namespace == "lab"

    built(check, trusted_lab=True, namespace="lab")


def test_the_shipped_hub_configuration_keeps_per_user_namespaces() -> None:
    config = load_config(HUB_CONFIG_DIR / "jupyterhub_config.py")
    assert config.KubeLabSpawner.gpu_catalog

    def check(spawner: Any) -> None:
        assert spawner.kubelab_mode and spawner.enable_user_namespaces is True
        assert spawner.user_namespace_labels["pod-security.kubernetes.io/enforce"] == "baseline"
        assert spawner.namespace != spawner._namespace_default()

    built(check, config=config)
