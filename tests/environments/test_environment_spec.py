"""The spec's `environment` and `init` groups: what is accepted, and every refusal names its field."""

from __future__ import annotations

import pytest

from kubelab.errors import ValidationError
from kubelab.spec import ExperimentSpec
from kubelab.spec_schema import json_schema


def refusals(data: dict[str, object]) -> dict[str, str]:
    with pytest.raises(ValidationError) as caught:
        ExperimentSpec.parse({"command": "python train.py", **data})
    return {f.path: f.reason for f in caught.value.fields}


def test_an_environment_and_init_steps_survive_a_round_trip() -> None:
    spec = ExperimentSpec.parse(
        {
            "command": "python train.py",
            "framework": "keras",
            "environment": {"requirements": "requirements.txt", "packages": ["numpy"], "python": "3.11"},
            "init": [
                {"git": {"url": "https://example.org/team/repo.git", "revision": "v1"}},
                {"file": {"filename": "config.json", "content": "{}", "chmod": "0644"}, "path": "cfg"},
                {"paths": ["data"]},
                {"artifacts": {"run": "0123456789ab", "files": ["model.pt"]}},
            ],
        }
    )
    assert spec.environment is not None and spec.environment.requirements == ["requirements.txt"]
    assert spec.init[0].git is not None and spec.init[0].git.revision == "v1"
    assert ExperimentSpec.parse(spec.to_dict()) == spec


def test_a_list_is_the_packages_and_an_empty_environment_is_none() -> None:
    spec = ExperimentSpec.parse({"command": "x", "environment": ["tinypkg==1.0"]})
    assert spec.environment is not None and spec.environment.packages == ["tinypkg==1.0"]
    assert ExperimentSpec.parse({"command": "x", "environment": {}}).environment is None


def test_bad_environments_name_the_field() -> None:
    found = refusals(
        {
            "environment": {
                "packages": ["--index-url=https://evil"],
                "requirements": "/etc/passwd",
                "pyhton": 3,
            }
        }
    )
    assert "option" in found["environment.packages"]
    assert "relative" in found["environment.requirements"]
    assert "python" in found["environment.pyhton"]
    assert "3.11" in refusals({"environment": {"python": "latest"}})["environment.python"]
    assert (
        "stands alone"
        in refusals({"environment": {"conda": "env.yml", "packages": ["a"]}})["environment.conda"]
    )


def test_init_steps_refuse_credentials_transports_and_escapes() -> None:
    found = refusals(
        {
            "init": [
                {"git": {"url": "https://alice:s3cret@example.org/repo.git"}},
                {"git": "ext::sh -c touch% /tmp/pwned"},
                {},
                {"file": {"filename": "../outside"}},
                {"git": {"url": "https://example.org/r", "revision": "--upload-pack=evil"}},
                {"artifacts": {"run": "../../etc"}},
            ]
        }
    )
    assert "credential" in found["init[0].git.url"] and "s3cret" not in found["init[0].git.url"]
    assert "must be" in found["init[1].git.url"]
    assert "exactly one" in found["init[2]"]
    assert "relative" in found["init[3].file.filename"]
    assert "revision" in found["init[4].git.revision"] or "branch" in found["init[4].git.revision"]
    assert "run id" in found["init[5].artifacts.run"]


def test_single_process_frameworks_are_recorded_and_refuse_replicas() -> None:
    for name in ("keras", "scikit-learn", "xgboost", "pytorch-ignite", "mxnet"):
        assert ExperimentSpec.parse({"command": "x", "framework": name}).framework == name
    assert "pytorch" in refusals({"framework": "xgboost", "replicas": 2})["framework"]


def test_the_schema_declares_both_groups() -> None:
    properties = json_schema()["properties"]
    assert "requirements" in properties["environment"]["anyOf"][0]["properties"]
    assert set(properties["init"]["items"]["properties"]) == {"git", "artifacts", "file", "paths", "path"}
