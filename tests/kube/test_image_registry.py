"""The registry check against a real registry on loopback (Debian's Distribution server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_registry import free_port, local_registry, put_image

from kubelab.backends.kubernetes.image_registry import Registry, split
from kubelab.errors import KubelabError


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    with local_registry(tmp_path) as host:
        yield host


def test_a_tag_is_there_once_pushed(registry: str, tmp_path: Path) -> None:
    auth = tmp_path / "config.json"
    auth.write_text(json.dumps({"auths": {registry: {"username": "builder", "password": "s3cret"}}}))
    check = Registry(str(auth), scheme="http")
    assert not check.has(f"{registry}/lab/envs:env-1")
    put_image(registry, "lab/envs", "env-1")
    assert check.has(f"{registry}/lab/envs:env-1")
    assert not check.has(f"{registry}/lab/envs:env-2")


def test_what_cannot_be_asked_is_said(registry: str, tmp_path: Path) -> None:
    with pytest.raises(KubelabError, match="cannot reach the registry"):
        Registry(scheme="http").has(f"127.0.0.1:{free_port()}/lab/envs:env-1")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(KubelabError, match="cannot read the registry credential"):
        Registry(str(tmp_path / "bad.json"), scheme="http").has(f"{registry}/lab/envs:env-1")
    with pytest.raises(KubelabError, match="not host/repository:tag"):
        split("no-tag")
