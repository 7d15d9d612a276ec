"""Environments on one machine: built once per content hash with uv, reused, refused by field."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubelab_testing import wait_until

from kubelab.environments.cache import EnvironmentCache, conda_binary
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments

TRAIN = """
import sys, kubelab, tinyalpha, tinybeta
print("prefix", sys.prefix, "alpha", tinyalpha.VERSION)
kubelab.report_final(1.0)
"""


def spec(packages: list[str], **environment: Any) -> dict[str, Any]:
    return {
        "command": "python train.py",
        "environment": {"packages": packages, "find_links": ["wheels"], **environment},
    }


def log(lab: Experiments, run_id: str, replica: int | str = 0) -> str:
    return "".join(lab.logs(run_id, replica=replica))


def states(lab: Experiments, run_id: str) -> list[str]:
    status = json.loads((lab.runs_root / run_id / "status.json").read_text())
    return [step["state"] for step in status["history"]]


def test_an_environment_is_built_once_and_reused(lab: Experiments, wheels: Path, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "requirements.txt").write_text("tinybeta==1.0\n")
    first = lab.submit(spec(["tinyalpha==2.0"], requirements="requirements.txt"))
    done = wait_until(lab, first["id"])
    assert done["status"] == "Succeeded", log(lab, first["id"])
    assert "Building" in states(lab, first["id"])
    built = log(lab, first["id"], "build")
    assert "uv pip install" in built and "tinyalpha==2.0" in built
    assert "alpha 2.0" in log(lab, first["id"])

    second = lab.submit(spec(["tinyalpha==2.0"], requirements="requirements.txt"))
    assert wait_until(lab, second["id"])["status"] == "Succeeded"
    assert "Building" not in states(lab, second["id"])
    prefix = [line for line in log(lab, first["id"]).splitlines() if line.startswith("prefix")]
    assert prefix and prefix[0] in log(lab, second["id"])
    (entry,) = EnvironmentCache(lab.home).entries()
    assert entry["size"] > 0 and entry["packages"] == ["tinyalpha==2.0"] and entry["built"]


def test_concurrent_first_builds_of_one_hash_build_it_once(
    lab: Experiments, wheels: Path, tmp_path: Path
) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    ids = [lab.submit(spec(["tinyalpha", "tinybeta", "tinygamma"]))["id"] for _ in range(3)]
    for run_id in ids:
        assert wait_until(lab, run_id)["status"] == "Succeeded", log(lab, run_id, "build")
    builds = [
        log(lab, run_id, "build") if (lab.runs_root / run_id / "logs" / "build.log").exists() else ""
        for run_id in ids
    ]
    assert sum("uv venv" in text for text in builds) == 1, builds
    assert len(EnvironmentCache(lab.home).entries()) == 1


def test_a_changed_requirements_file_is_a_new_environment_and_old_runs_keep_theirs(
    lab: Experiments, wheels: Path, tmp_path: Path
) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("tinyalpha==1.0\ntinybeta\n")
    old = lab.submit({**spec([], requirements="requirements.txt")})
    assert wait_until(lab, old["id"])["status"] == "Succeeded"
    requirements.write_text("tinyalpha==2.0\ntinybeta\n")
    new = lab.submit({**spec([], requirements="requirements.txt")})
    assert wait_until(lab, new["id"])["status"] == "Succeeded"
    keys = [json.loads((lab.runs_root / r["id"] / "build.json").read_text())["key"] for r in (old, new)]
    assert keys[0] != keys[1]
    assert {e["key"] for e in EnvironmentCache(lab.home).entries()} == set(keys)
    assert "alpha 1.0" in log(lab, old["id"]) and "alpha 2.0" in log(lab, new["id"])


def test_an_unresolvable_package_fails_the_run_with_uvs_line(
    lab: Experiments, wheels: Path, tmp_path: Path
) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    run = lab.submit(spec(["no-such-package-kubelab"]))
    done = wait_until(lab, run["id"])
    assert done["status"] == "Failed"
    assert done["reason"].startswith("environment: error:") and "no-such-package-kubelab" in done["reason"]
    assert "prefix" not in log(lab, run["id"])
    assert [e["built"] for e in EnvironmentCache(lab.home).entries()] == [None]  # never marked ready


def test_a_missing_requirements_file_names_the_field_and_changes_nothing(
    lab: Experiments, wheels: Path, tmp_path: Path
) -> None:
    with pytest.raises(ValidationError) as caught:
        lab.submit(spec([], requirements="nowhere.txt"))
    (problem,) = caught.value.fields
    assert problem.path == "environment.requirements" and "nowhere.txt" in problem.reason
    assert list(lab.runs_root.iterdir()) == []
    assert not (lab.home / "envs").exists()


@pytest.mark.skipif(conda_binary() is not None, reason="micromamba or conda is installed here")
def test_a_conda_environment_without_conda_is_refused_at_submit(lab: Experiments, tmp_path: Path) -> None:
    (tmp_path / "environment.yml").write_text("name: x\ndependencies: [python=3.11]\n")
    with pytest.raises(ValidationError) as caught:
        lab.submit({"command": "true", "environment": {"conda": "environment.yml"}})
    assert [f.path for f in caught.value.fields] == ["environment.conda"]
    assert list(lab.runs_root.iterdir()) == []


def test_a_stop_during_the_build_stops_the_run_and_its_build(
    lab: Experiments, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv waits on a wheel index that never answers (a socket nobody accepts on) until stopped."""
    monkeypatch.setenv("UV_OFFLINE", "0")
    monkeypatch.setenv("UV_HTTP_TIMEOUT", "120")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        index = f"http://127.0.0.1:{silent.getsockname()[1]}/simple"
        run = lab.submit({"command": "true", "environment": {"packages": ["tinyalpha"], "index_url": index}})
        wait_until(lab, run["id"], states=("Building",))
        lab.stop(run["id"])
        done = wait_until(lab, run["id"])
        assert done["status"] == "Stopped", done
        key = json.loads((lab.runs_root / run["id"] / "build.json").read_text())["key"]
        assert not EnvironmentCache(lab.home).ready(key)
    finally:
        silent.close()


def env_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "env", *args], capture_output=True, text=True, timeout=60
    )


def test_env_ls_shows_sizes_and_rm_spares_environments_in_use(lab: Experiments, wheels: Path) -> None:
    waiting = "import tinyalpha, time; print('ready', flush=True); time.sleep(60)"
    run = lab.submit(
        {
            "command": ["python", "-c", waiting],
            "environment": {"packages": ["tinyalpha"], "find_links": [str(wheels)]},
        }
    )
    wait_until(lab, run["id"], states=("Running",))
    (entry,) = json.loads(env_cli("ls", "-o", "json").stdout)["items"]
    assert entry["size"] > 0 and entry["runs"] == [run["id"]]
    assert "tinyalpha" in env_cli("ls").stdout
    refused = env_cli("rm", entry["key"])
    assert refused.returncode != 0 and run["id"] in refused.stderr and "--force" in refused.stderr
    assert EnvironmentCache(lab.home).ready(entry["key"])
    assert env_cli("rm", "0123456789abcdef").returncode != 0
    lab.stop(run["id"])
    wait_until(lab, run["id"])
    removed = env_cli("rm", entry["key"])
    assert removed.returncode == 0 and f"removed environment {entry['key']}" in removed.stdout
    assert EnvironmentCache(lab.home).entries() == []


def test_a_backend_that_makes_no_environments_refuses_them_by_name(tmp_path: Path) -> None:
    """Without the hub's registry a Kubernetes pod gets no environment (`kubelab render --backend
    kubernetes` says so, by field), while its init steps are an init container."""
    (tmp_path / "spec.yml").write_text(
        "command: python train.py\nimage: python:3.11\nenvironment: [numpy]\ninit: [{paths: [spec.yml]}]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "render", "--backend", "kubernetes", "-f", "spec.yml"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "environment: the kubernetes backend does not build environments" in done.stderr
    assert "init" not in done.stderr  # init steps run there as an init container (without a registry)
    (tmp_path / "spec.yml").write_text(
        "command: python train.py\ninit: [{file: {filename: a, content: b}}]\n"
    )
    workspace = {
        "volumes": [{"name": "ws", "emptyDir": {}}],
        "mounts": [{"name": "ws", "mountPath": "/mnt/a"}],
    }
    env = dict(os.environ, KUBELAB_IMAGE="lab/notebook:1", KUBELAB_VOLUMES=json.dumps(workspace))
    rendered = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "render", "--backend", "kubernetes", "-f", "spec.yml"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert "initContainers" in rendered.stdout and "kubelab.environments.init_run" in rendered.stdout
