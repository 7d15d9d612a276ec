"""Polyaxon's and NNI's files that need something made for the run: pip build_steps (each framework
Polyaxon v0.5 names), a v1 component that clones its code with `init: git`, NNI trials that write
under NNI_OUTPUT_DIR. Each runs locally, end to end, offline: the framework packages are tiny
stand-in wheels with the real names, found through UV_FIND_LINKS (uv never reaches an index)."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from local_wheels import make_wheel
from sweeps.sweep_support import wait_sweep

from kubelab.experiments import Experiments
from kubelab.formats.detect import load_spec_file
from kubelab.sweeps.service import Sweeps

Cli = Callable[..., subprocess.CompletedProcess[str]]
STAND_INS = {  # Polyaxon v0.5 framework -> (the package pip installs, its module, its version)
    "keras": ("keras", "keras", "2.13.1"),
    "scikit-learn": ("scikit-learn", "sklearn", "1.3.2"),
    "xgboost": ("xgboost", "xgboost", "2.0.3"),
    "pytorch-ignite": ("pytorch-ignite", "ignite", "0.4.13"),
    "mxnet": ("mxnet", "mxnet", "1.9.1"),
}


@pytest.fixture
def offline(compat_env: Path) -> dict[str, str]:
    """The environment variables that keep uv on a local folder of stand-in wheels."""
    folder = compat_env.parent / "wheels"
    for package, module, version in STAND_INS.values():
        make_wheel(folder, package, version, module=module)
    return {"UV_OFFLINE": "1", "UV_FIND_LINKS": str(folder)}


@pytest.mark.parametrize("framework", sorted(STAND_INS))
def test_v05_experiments_with_pip_build_steps_run_with_their_framework(
    framework: str, cli: Cli, offline: dict[str, str], compat_env: Path
) -> None:
    done = cli("run", "-f", f"polyaxon/frameworks/{framework}.yml", "--wait", "-o", "json", env=offline)
    record = json.loads(done.stdout)
    assert record["status"] == "Succeeded", done.stderr
    assert record["framework"] == framework
    run = compat_env.parent / "home" / "runs" / record["id"]
    package, module, version = STAND_INS[framework]
    assert (run / "outputs" / "framework.txt").read_text() == f"{module} {version}\n"
    tracking = json.loads((run / "tracking.json").read_text())
    assert tracking["data_refs"]["toy"].startswith("sha256:") and "data:toy" in tracking["tags"]
    assert "data:toy" in record["tags"]
    build = (run / "logs" / "build.log").read_text()
    assert f"{package}=={version}" in build and "polyaxon-client" not in build  # the shim provides it


def test_a_v05_horovod_experiment_is_refused_with_the_reason(cli: Cli) -> None:
    done = cli("run", "-f", "polyaxon/frameworks/horovod.yml", rc=2)
    assert "framework: Horovod needs an MPI launcher" in done.stderr


def bare_repository(where: Path) -> Path:
    """A bare repository with Polyaxon's quick-start shape, tagged v1 (and a later commit)."""
    work, bare = where / "quick-start-work", where / "quick-start.git"
    work.mkdir()
    (work / "model.py").write_text(
        "import argparse, json, os\n"
        "from polyaxon import tracking\n"
        "p = argparse.ArgumentParser(); p.add_argument('--lr', type=float); a = p.parse_args()\n"
        "settings = json.load(open('settings.json'))\n"
        "tracking.init(); tracking.log_metrics(loss=a.lr * settings['batch_size'])\n"
        "print('revision', open('VERSION').read().strip())\n"
    )
    (work / "VERSION").write_text("v1\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-C", str(work)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "v1"], check=True)
    subprocess.run([*git, "tag", "v1"], check=True)
    (work / "VERSION").write_text("later\n")
    subprocess.run([*git, "commit", "-qam", "later"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return bare


def test_a_v1_component_with_init_git_clones_and_runs_at_its_revision(compat_env: Path) -> None:
    bare = bare_repository(compat_env.parent)
    fixture = compat_env / "polyaxon" / "v1_init_git.yml"
    fixture.write_text(fixture.read_text().replace("REPOSITORY", str(bare)))
    spec = load_spec_file(fixture)
    lab = Experiments()
    record = lab.submit(spec, base_dir=fixture.parent)
    deadline_record = _wait(lab, record["id"])
    assert deadline_record["status"] == "Succeeded", "".join(lab.logs(record["id"], replica="build"))
    assert "revision v1" in "".join(lab.logs(record["id"]))
    assert deadline_record["metrics"]["loss"] == pytest.approx(0.05 * 8)
    assert "cloning file://" in "".join(lab.logs(record["id"], replica="build"))


def test_an_uncloneable_url_fails_the_run_naming_the_step_without_the_credential(compat_env: Path) -> None:
    lab = Experiments()
    spec = {
        "command": "python3 model.py",
        "init": [{"git": {"url": "https://alice@127.0.0.1:9/nobody/repo.git"}}],
    }
    record = _wait(lab, lab.submit(spec)["id"])
    assert record["status"] == "Failed"
    assert record["reason"].startswith("init[0].git: fatal:"), record["reason"]
    build = "".join(lab.logs(record["id"], replica="build"))
    assert "alice" not in record["reason"] and "alice" not in build
    assert "cloning https://***@127.0.0.1:9/nobody/repo.git" in build


class _AuthorizedFiles(http.server.SimpleHTTPRequestHandler):
    """A git repository over git's "dumb" HTTP protocol (static files) behind basic auth."""

    expected = ""

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != self.expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="repo"')
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_private_repository_is_cloned_with_the_workspaces_credential_store(compat_env: Path) -> None:
    bare = bare_repository(compat_env.parent)
    subprocess.run(["git", "-C", str(bare), "update-server-info"], check=True)
    token = "tok-" + "7" * 20
    _AuthorizedFiles.expected = "Basic " + base64.b64encode(f"alice:{token}".encode()).decode()
    handler = functools.partial(_AuthorizedFiles, directory=str(bare.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{bare.name}"
        spec = {"command": "cat VERSION", "init": [{"git": {"url": url, "revision": "v1"}, "path": "."}]}
        lab = Experiments()
        refused = _wait(lab, lab.submit(spec)["id"])  # no credential yet: git may not prompt
        assert refused["status"] == "Failed" and refused["reason"].startswith("init[0].git:"), refused
        store = Path(lab.home) / "git-credentials"
        store.write_text(f"http://alice:{token}@127.0.0.1:{server.server_address[1]}\n")
        store.chmod(0o600)
        cloned = _wait(lab, lab.submit(spec)["id"])
        assert cloned["status"] == "Succeeded", "".join(lab.logs(cloned["id"], replica="build"))
        assert "".join(lab.logs(cloned["id"])) == "v1\n"
        for run in (refused, cloned):
            folder = lab.runs_root / run["id"]
            for path in folder.rglob("*"):
                if path.is_file():
                    assert token not in path.read_text(errors="replace"), path
    finally:
        server.shutdown()
        server.server_close()


def test_nni_trials_write_under_nni_output_dir(cli: Cli, sweeps: Sweeps, compat_env: Path) -> None:
    sweep_id = cli("sweep", "-f", "nni_output_dir/config.yml").stdout.strip()
    wait_sweep(sweeps, sweep_id, timeout=120)
    record = sweeps.get(sweep_id)
    assert record["status"] == "Succeeded", record
    saved = []
    for trial in record["trials"]:
        model = compat_env.parent / "home" / "runs" / trial["id"] / "outputs" / "model.json"
        saved.append(json.loads(model.read_text()))
    assert sorted(s["units"] for s in saved) == [8, 16]
    assert {s["experiment"] for s in saved} == {sweep_id} and {s["platform"] for s in saved} == {"local"}
    assert {s["trial"] for s in saved} == {t["id"] for t in record["trials"]}


def _wait(lab: Experiments, run_id: str) -> dict[str, Any]:
    from kubelab_testing import wait_until

    return wait_until(lab, run_id, timeout=120)


def test_a_cloned_link_cannot_lead_a_later_step_out_of_the_code_folder(compat_env: Path) -> None:
    outside = compat_env.parent / "outside"
    outside.mkdir()
    work = compat_env.parent / "linked"
    work.mkdir()
    (work / "cfg").symlink_to(outside)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-C", str(work)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "a link"], check=True)
    lab = Experiments()
    spec = {
        "command": "true",
        "init": [
            {"git": {"url": str(work)}, "path": "repo"},
            {"file": {"filename": "planted", "content": "x"}, "path": "repo/cfg"},
        ],
    }
    record = _wait(lab, lab.submit(spec)["id"])
    assert record["status"] == "Failed" and record["reason"].startswith("init[1].path:"), record
    assert list(outside.iterdir()) == []
