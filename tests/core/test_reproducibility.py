"""Reproducibility: what a run records of its environment and code, `kubelab diff`, `kubelab
reopen` with lineage, and tags and notes, through the real `kubelab` command and real git."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from recorded_nvml import RecordedNvml

from kubelab.backends.local.system_sampler import NvmlReader
from kubelab.provenance import gpu_environment, record_image, trial_interpreter
from kubelab.records import RunDirectory, Status
from kubelab.run_diff import diff_packages

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture
def cli(lab_env: Path) -> Cli:
    def run(
        *args: str, check_rc: int | None = 0, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "kubelab.cli", *args],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            cwd=cwd or lab_env,
            timeout=120,
        )
        if check_rc is not None:
            assert done.returncode == check_rc, done.stdout + done.stderr
        return done

    return run


def git(folder: Path, *args: str) -> str:
    identity = ["-c", "user.name=Test", "-c", "user.email=test@example.com"]
    done = subprocess.run(["git", *identity, *args], cwd=folder, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def project(
    folder: Path, script: str = "import kubelab\nkubelab.report(loss=kubelab.params()['lr'])\n"
) -> Path:
    folder.mkdir()
    (folder / "train.py").write_text(script)
    (folder / "kubelab.yaml").write_text("command: [python, train.py]\ncode: {path: .}\nparams: {lr: 0.5}\n")
    return folder


def submit(cli: Cli, *args: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(cli("run", "--wait", "-o", "json", *args).stdout)
    assert record["status"] == "Succeeded", record
    return record


def run_dir(lab_env: Path, run_id: str) -> Path:
    return lab_env / "home" / "runs" / run_id


def test_a_run_records_its_commit_and_a_patch_that_rebuilds_its_code(cli: Cli, lab_env: Path) -> None:
    repo = project(lab_env / "repo")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    (repo / "train.py").write_text((repo / "train.py").read_text() + "# tuned\n")
    (repo / "notes.txt").write_text("not yet added\n")
    git(repo, "add", "train.py")  # the user's staged state must be left as it was
    staged_before = git(repo, "diff", "--cached", "--name-only")

    record = submit(cli, "-f", "repo/kubelab.yaml")

    environment = json.loads((run_dir(lab_env, record["id"]) / "environment.json").read_text())
    assert environment["git"]["commit"] == git(repo, "rev-parse", "HEAD")
    assert environment["git"]["dirty"] is True
    assert git(repo, "diff", "--cached", "--name-only") == staged_before == "train.py"
    # The commit plus the patch is the snapshot the run ran, untracked file included.
    clone = lab_env / "clone"
    git(lab_env, "clone", "-q", str(repo), str(clone))
    git(clone, "apply", str(run_dir(lab_env, record["id"]) / environment["git"]["patch"]))
    code = run_dir(lab_env, record["id"]) / "code"
    for name in ("train.py", "notes.txt", "kubelab.yaml"):
        assert (clone / name).read_text() == (code / name).read_text(), name


def test_a_clean_checkout_has_no_patch_and_a_folder_outside_git_has_no_git_section(
    cli: Cli, lab_env: Path
) -> None:
    repo = project(lab_env / "clean")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    clean = submit(cli, "-f", "clean/kubelab.yaml")
    state = json.loads((run_dir(lab_env, clean["id"]) / "environment.json").read_text())["git"]
    assert state["dirty"] is False and state["patch"] is None
    assert not (run_dir(lab_env, clean["id"]) / "uncommitted.patch").exists()

    project(lab_env / "plain")
    plain = submit(cli, "-f", "plain/kubelab.yaml")
    assert "git" not in json.loads((run_dir(lab_env, plain["id"]) / "environment.json").read_text())


def test_recording_a_repository_runs_none_of_its_configured_programs(cli: Cli, lab_env: Path) -> None:
    repo = project(lab_env / "hostile")
    marker = lab_env / "ran"
    hook = lab_env / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat "$1" 2>/dev/null\n')
    hook.chmod(0o755)
    git(repo, "init", "-q")
    (repo / ".gitattributes").write_text("* diff=evil\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    for key in ("core.fsmonitor", "diff.external", "diff.evil.textconv", "diff.evil.command"):
        git(repo, "config", key, str(hook))
    (repo / "train.py").write_text((repo / "train.py").read_text() + "# changed\n")

    record = submit(cli, "-f", "hostile/kubelab.yaml")

    assert not marker.exists(), marker.read_text()
    patch = (run_dir(lab_env, record["id"]) / "uncommitted.patch").read_text()
    assert "+# changed" in patch


def test_diff_reads_no_file_outside_the_snapshots(cli: Cli, lab_env: Path) -> None:
    secret = lab_env / "secret.txt"
    secret.write_text("top secret words\n")
    project(lab_env / "plain")
    linked = project(lab_env / "linked")
    (linked / "notes.txt").symlink_to(secret)
    a, b = submit(cli, "-f", "plain/kubelab.yaml"), submit(cli, "-f", "linked/kubelab.yaml")
    assert (run_dir(lab_env, b["id"]) / "code" / "notes.txt").is_symlink()
    diff = cli("diff", a["id"], b["id"], "-o", "json").stdout
    assert "top secret" not in diff


def test_packages_are_asked_of_the_trials_own_interpreter(cli: Cli, lab_env: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(lab_env / "venv")], check=True)
    other = lab_env / "venv" / "bin" / "python"
    ours = submit(cli, "--", "python", "-c", "print('ours')")
    theirs = submit(cli, "--", str(other), "-c", "print('theirs')")

    mine = json.loads((run_dir(lab_env, ours["id"]) / "environment.json").read_text())["python"]
    assert mine["version"] == platform.python_version()
    assert mine["packages"]["pytest"] == importlib.metadata.version("pytest")
    assert mine["packages"]["nbdime"] == importlib.metadata.version("nbdime")
    venv = json.loads((run_dir(lab_env, theirs["id"]) / "environment.json").read_text())["python"]
    assert Path(venv["executable"]).parent == other.parent
    assert "pytest" not in venv["packages"]  # a bare venv: not kubelab's packages

    # An install into the venv (a new distribution's metadata) is seen by its next run, not the
    # answer kept from the first.
    site = next((lab_env / "venv" / "lib").glob("python3*/site-packages"))
    (site / "tinypkg-1.2.dist-info").mkdir()
    (site / "tinypkg-1.2.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.2\n"
    )
    again = submit(cli, "--", str(other), "-c", "print('again')")
    assert json.loads((run_dir(lab_env, again["id"]) / "environment.json").read_text())["python"][
        "packages"
    ] == {"tinypkg": "1.2"}

    diff = json.loads(cli("diff", ours["id"], theirs["id"], "-o", "json").stdout)
    assert diff["environment"]["packages"]["removed"]["pytest"] == importlib.metadata.version("pytest")
    text = cli("diff", ours["id"], theirs["id"]).stdout
    assert f"- pytest {importlib.metadata.version('pytest')}" in text


def test_the_interpreter_of_a_command_is_found_from_its_first_word_or_shebang(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text(f"#!{sys.executable}\nprint(1)\n")
    script.chmod(0o755)
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}"}
    assert trial_interpreter(["tool", "--x"], env) == sys.executable
    assert trial_interpreter([sys.executable, "-c", "1"], env) == sys.executable
    assert trial_interpreter(["sh", "-c", "exit 0"], env) == sys.executable  # not a Python: kubelab's


def test_the_gpu_section_comes_from_the_nvml_reader() -> None:
    system = NvmlReader(RecordedNvml()).system()
    assert system == {"driver": "550.54.15", "cuda": "12.4", "gpus": ["NVIDIA H100 80GB HBM3", "Tesla T4"]}
    assert gpu_environment(None, "no driver") == {"error": "no driver"}


def test_the_image_digest_is_read_from_the_pods_status(tmp_path: Path) -> None:
    run = RunDirectory.create(tmp_path / "runs", {"command": ["true"]}, Status())
    digest = "sha256:" + "ab" * 32
    waiting = {"containerStatuses": [{"name": "main", "image": "python:3.11", "imageID": ""}]}
    record_image(run, waiting)  # not pulled yet: nothing to record
    assert "image" not in run.environment()
    pulled = {
        "containerStatuses": [
            {"name": "main", "image": "python:3.11", "imageID": f"docker.io/library/python@{digest}"}
        ]
    }
    record_image(run, pulled)
    assert run.environment()["image"] == {"image": "python:3.11", "digest": digest}


def test_package_changes_ignore_the_spelling_of_a_name() -> None:
    changes = diff_packages(
        {"Foo_Bar": "1", "gone": "2", "same": "3"}, {"foo-bar": "1.1", "new": "4", "same": "3"}
    )
    assert changes == {"added": {"new": "4"}, "removed": {"gone": "2"}, "changed": {"Foo_Bar": ["1", "1.1"]}}


def notebook(path: Path, lr: float) -> None:
    """A two-cell notebook (nbformat 4, as JSON) whose first cell is papermill's `parameters`."""

    def cell(source: str, tags: list[str]) -> dict[str, Any]:
        meta = {"tags": tags} if tags else {}
        return {
            "cell_type": "code",
            "execution_count": None,
            "metadata": meta,
            "outputs": [],
            "source": source,
        }

    kernel = {"name": "python3", "language": "python", "display_name": "Python 3"}
    cells = [cell(f"lr = {lr}", ["parameters"]), cell("import kubelab\nkubelab.report(loss=lr)", [])]
    document = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": kernel}, "cells": cells}
    path.write_text(json.dumps(document))


def test_diff_compares_params_metrics_and_code_with_notebooks_by_cell(cli: Cli, lab_env: Path) -> None:
    a, b = project(lab_env / "a"), project(lab_env / "b")
    notebook(a / "explore.ipynb", 0.1)
    notebook(b / "explore.ipynb", 0.2)
    (b / "train.py").write_text((b / "train.py").read_text() + "print('v2')\n")
    (b / "data.bin").write_bytes(b"\0\1\2")
    ra = submit(cli, "-f", "a/kubelab.yaml")
    rb = submit(cli, "-f", "b/kubelab.yaml", "-P", "lr=0.25")

    diff = json.loads(cli("diff", ra["id"], rb["id"], "-o", "json").stdout)
    assert diff["params"] == [{"name": "lr", "a": 0.5, "b": 0.25}]
    assert diff["metrics"] == [{"name": "loss", "a": 0.5, "b": 0.25, "delta": -0.25}]
    files = {entry["path"]: entry for entry in diff["code"]}
    assert set(files) == {"explore.ipynb", "train.py", "data.bin"}
    assert "+print('v2')" in files["train.py"]["text"]
    assert files["data.bin"]["change"] == "added" and files["data.bin"]["binary"]
    assert files["explore.ipynb"]["notebook"] and files["explore.ipynb"]["nbdime"]
    assert "lr = 0.2" in files["explore.ipynb"]["text"] and "cell" in files["explore.ipynb"]["text"]

    text = cli("diff", ra["id"], rb["id"]).stdout
    assert "  lr    0.5  0.25\n" in text
    assert "modified: train.py" in text and "-0.25" in text
    missing = cli("diff", ra["id"], "000000000000", check_rc=2)
    assert "no experiment '000000000000'" in missing.stderr


def test_reopen_fills_a_notebooks_parameters_and_its_runs_record_their_parent(
    cli: Cli, lab_env: Path
) -> None:
    folder = lab_env / "nb"
    folder.mkdir()
    notebook(folder / "explore.ipynb", 0.1)
    (folder / "kubelab.yaml").write_text(
        "command: [python, -m, kubelab.papermill_run, explore.ipynb]\ncode: {path: .}\nparams: {lr: 0.3}\n"
    )
    first = submit(cli, "-f", "nb/kubelab.yaml")
    assert first["metrics"] == {"loss": 0.3}

    made = json.loads(cli("reopen", first["id"], "again", "-o", "json").stdout)
    assert made["notebooks"] == ["explore.ipynb"]
    cells = json.loads((lab_env / "again" / "explore.ipynb").read_text())["cells"]
    assert cells[0]["metadata"]["tags"] == ["parameters"]
    assert cells[1]["metadata"]["tags"] == ["injected-parameters"] and "lr = 0.3" in "".join(
        cells[1]["source"]
    )
    child = submit(cli, "-f", "again/kubelab-run.yaml")
    assert child["parent"] == first["id"]
    assert child["metrics"] == {"loss": 0.3}  # the filled-in notebook alone carries the value

    shown = cli("show", first["id"]).stdout
    assert child["id"] in shown and "children" in shown
    assert first["id"] in cli("show", child["id"]).stdout
    assert child["id"] in cli("ls", f"parent:{first['id']}").stdout
    taken = cli("reopen", first["id"], "again", check_rc=2)
    assert "dest" in taken.stderr and "not an empty folder" in taken.stderr


def test_reopen_writes_a_scripts_params_into_its_spec(cli: Cli, lab_env: Path) -> None:
    project(lab_env / "p")
    first = submit(cli, "-f", "p/kubelab.yaml", "-P", "lr=0.75")
    cli("reopen", first["id"], "p2")
    child = submit(cli, "-f", "p2/kubelab-run.yaml")
    assert child["params"] == {"lr": 0.75} and child["parent"] == first["id"]
    assert child["metrics"] == {"loss": 0.75}


def test_tags_and_notes_from_the_cli_are_columns_and_queryable(cli: Cli, lab_env: Path) -> None:
    first = submit(cli, "--tag", "base", "--", "python", "-c", "pass")
    other = submit(cli, "--", "python", "-c", "pass")
    cli("ls")  # the index caches both as finished: an edit must still reach every reader
    assert "best" in cli("tag", first["id"], "+best", "-base", "+keep").stdout
    cli("tag", first["id"], "-keep")
    cli("note", first["id"], "the", "good", "one")
    listed = json.loads(cli("ls", "tags:best", "-o", "json").stdout)["items"]
    assert [(r["id"], r["tags"], r["note"]) for r in listed] == [(first["id"], ["best"], "the good one")]
    assert json.loads(cli("ls", "tags:base", "-o", "json").stdout)["items"] == []
    assert [r["id"] for r in json.loads(cli("ls", "note:%good%", "-o", "json").stdout)["items"]] == [
        first["id"]
    ]
    table = cli("ls").stdout
    assert "TAGS" in table and "NOTE" in table and "the good one" in table

    bad = cli("tag", other["id"], "+a b", check_rc=2)
    assert "tags" in bad.stderr and "not a tag" in bad.stderr
    evil = cli("note", other["id"], "\x1b]0;pwned\x07", "-o", "json")
    assert "\\x1b" in cli("ls").stdout and "\x1b" not in cli("ls").stdout
    assert json.loads(evil.stdout)["tags"] == []
