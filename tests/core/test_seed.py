"""`seed`: the worked example of docs/architecture.md's "add a spec field" recipe. One field on
ExperimentSpec and one ExperimentOption reach the CLI, `%%train`, the OpenAPI document and the
sidebar's form; both backends hand it to every replica as KUBELAB_SEED and PYTHONHASHSEED."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubelab import cli, options
from kubelab.magics import options as magic_options
from kubelab.magics import train
from kubelab.server_extension.openapi import document
from kubelab.server_extension.routes import API_ROUTES

ROOT = Path(__file__).resolve().parents[2]
COMMAND = {"command": ["python", "t.py"]}


def kubelab(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelab.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=120,
    )


def test_the_seed_reaches_the_cli_the_magic_rest_and_the_sidebar() -> None:
    from_cli = options.apply_options(COMMAND, cli.build_parser().parse_args(["run", "--seed", "7"]))
    args = magic_options.train_parser().read("--seed 7")
    assert args is not None
    from_magic = train.overrides(args, dict(COMMAND))
    assert from_cli == from_magic == {**COMMAND, "seed": 7}
    schema = document(API_ROUTES)["components"]["schemas"]["Spec"]["properties"]["seed"]
    assert (schema["minimum"], schema["maximum"]) == (0, 2**32 - 1)
    assert "KUBELAB_SEED" in schema["description"]
    sidebar = (ROOT / "labextension" / "src" / "vocabulary.ts").read_text()
    assert "key: 'seed',\n    path: 'seed',\n    label: 'Seed',\n    kind: 'integer'" in sidebar


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("-1", "must be 0 or more, not -1"),
        ("x", "must be a whole number, not 'x'"),
        ("4294967296", "must be at most 4294967295"),
    ],
)
def test_a_bad_seed_is_refused_naming_the_field(lab_env: Path, value: str, reason: str) -> None:
    done = kubelab("run", "--seed", value, "--", "true", cwd=lab_env)
    assert done.returncode == 2 and f"seed: {reason}" in done.stderr, done.stderr
    assert not (lab_env / "home" / "runs").exists() or not any((lab_env / "home" / "runs").iterdir())


def test_every_kubernetes_replica_gets_the_seed(lab_env: Path) -> None:
    done = kubelab(
        "render", "--backend", "kubernetes", "-o", "yaml", "--seed", "7", "--replicas", "2",
        "--framework", "pytorch", "--", "python", "t.py",
        cwd=lab_env, env={"KUBELAB_IMAGE": "registry.example.org/lab/notebook:1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    containers = [
        c
        for obj in yaml.safe_load_all(done.stdout)
        if obj["kind"] in ("Job", "Pod")
        for c in obj["spec"].get("template", obj)["spec"]["containers"]
    ]
    assert containers
    for container in containers:
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["KUBELAB_SEED"] == env["PYTHONHASHSEED"] == "7"


def test_a_local_run_gets_the_seed(lab_env: Path) -> None:
    show = "import os; print('seed', os.environ.get('KUBELAB_SEED'), os.environ.get('PYTHONHASHSEED'), hash('kubelab'))"

    def output(*seed: str) -> str:
        done = kubelab("run", *seed, "--wait", "--", sys.executable, "-c", show, cwd=lab_env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    first, second = output("--seed", "42"), output("--seed", "42")
    assert first.startswith("seed 42 42 ") and first == second  # string hashes repeat too
    assert output().startswith("seed None ")
