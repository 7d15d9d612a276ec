"""The `kubelab` command as users type it, in real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml


def test_run_wait_streams_output_and_exit_code(cli: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    done = cli(
        "run",
        "--name",
        "hello",
        "-P",
        "lr=0.5",
        "--wait",
        "--",
        "python",
        "-c",
        "import kubelab; print('params', kubelab.params()); kubelab.report(loss=0.2)",
    )
    assert "params {'lr': 0.5}" in done.stdout
    assert "Succeeded" in done.stderr
    failed = cli("run", "--wait", "--", "sh", "-c", "exit 4", check_rc=1)
    assert "replica 0 exited with code 4" in failed.stderr


def test_ls_show_logs_stop_rm_with_json(cli: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    run_id = cli("run", "--", "sleep", "30").stdout.strip()
    listed = json.loads(cli("ls", "-o", "json").stdout)
    assert [item["id"] for item in listed["items"]] == [run_id]
    assert "sleep" in cli("ls", "status:pending|queued|running").stdout
    assert cli("ls", "status:succeeded").stdout.count("\n") == 1  # the header only
    assert json.loads(cli("show", run_id, "-o", "json").stdout)["id"] == run_id
    assert json.loads(cli("stop", run_id, "-o", "json").stdout)["id"] == run_id
    cli("logs", run_id)
    assert f"deleted {run_id}" in cli("rm", run_id).stdout
    assert json.loads(cli("ls", "-o", "json").stdout)["total"] == 0


def test_spec_file_and_polyaxonfile(
    cli: Callable[..., subprocess.CompletedProcess[str]], lab_env: Path
) -> None:
    (lab_env / "spec.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "from-file",
                "command": "echo lr={{ lr }}",
                "inputs": [{"name": "lr", "type": "float", "default": 0.1}],
            }
        )
    )
    assert "lr=0.3" in cli("run", "-f", "spec.yaml", "-P", "lr=0.3", "--wait").stdout
    (lab_env / "polyaxonfile.yaml").write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "kind": "experiment",
                "params": {"msg": "hi there"},
                "run": {"cmd": "echo {{ msg }}"},
            }
        )
    )
    assert "hi there" in cli("run", "-f", "polyaxonfile.yaml", "--wait").stdout


def test_render_prints_without_creating(
    cli: Callable[..., subprocess.CompletedProcess[str]], lab_env: Path
) -> None:
    rendered = list(
        yaml.safe_load_all(
            cli(
                "render",
                "-o",
                "yaml",
                "--replicas",
                "2",
                "--framework",
                "pytorch",
                "--",
                "python",
                "train.py",
            ).stdout
        )
    )
    assert [r["kind"] for r in rendered] == ["Process", "Process"]
    assert [r["env"]["RANK"] for r in rendered] == ["0", "1"] and rendered[1]["env"]["WORLD_SIZE"] == "2"
    assert json.loads(cli("ls", "-o", "json").stdout)["total"] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "--gpus", "-1", "--", "true"), "resources.gpus: must be 0 or more, not -1"),
        (("run", "--memory", "lots", "--", "true"), "resources.memory: 'lots' is not a Kubernetes quantity"),
        (("run", "-P", "novalue", "--", "true"), "param: must be NAME=VALUE, not 'novalue'"),
        (("run", "-f", "missing.yaml"), "file: no such file: missing.yaml"),
        (("run", "--framework", "jax", "--", "true"), "framework: must be one of"),
        (("show", "000000000000"), "no experiment '000000000000'"),
        (("ls", "status:nope"), "query: position"),
        (("render", "--backend", "slurm", "--", "true"), "backend: is not a backend: 'slurm'; choose one of"),
    ],
)
def test_bad_input_is_refused_with_the_field_and_nothing_created(
    cli: Callable[..., subprocess.CompletedProcess[str]],
    args: tuple[str, str, str, str, str] | tuple[str, str, str] | tuple[str, str],
    message: str,
) -> None:
    done = cli(*args, check_rc=2)
    assert message in done.stderr
    assert json.loads(cli("ls", "-o", "json").stdout)["total"] == 0


def test_bad_yaml_points_at_the_line(
    cli: Callable[..., subprocess.CompletedProcess[str]], lab_env: Path
) -> None:
    (lab_env / "broken.yaml").write_text("name: x\ncommand: [unclosed\n")
    message = cli("run", "-f", "broken.yaml", check_rc=2).stderr
    assert "broken.yaml is not valid YAML" in message and "file: line 3, column 1" in message


def test_json_errors_for_scripts(cli: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    done = cli("run", "-o", "json", "--gpus", "x", "--", "true", check_rc=2)
    assert json.loads(done.stderr)["fields"][0]["path"] == "resources.gpus"


def test_kubelab_lab_starts_jupyterlab_and_prints_a_working_url(lab_env: Path) -> None:
    import requests
    from jupyter_server_process import free_port

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "kubelab.cli", "lab", "--no-browser", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )
    try:
        url = None
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("kubelab is ready: "):
                url = line.split(": ", 1)[1].strip()
                break
        assert url and url.startswith(f"http://127.0.0.1:{port}/lab?token=")
        page = requests.get(url, timeout=30)
        assert page.status_code == 200 and "JupyterLab" in page.text
        token = url.split("token=", 1)[1]
        resources = requests.get(
            f"http://127.0.0.1:{port}/kubelab/api/resources",
            headers={"Authorization": f"token {token}"},
            timeout=30,
        )
        assert resources.json()["backend"] == "local"
    finally:
        process.terminate()
        process.wait(timeout=30)


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\u202eyp.live\u2066x\x9b"


def test_terminal_escapes_in_names_and_params_are_shown_not_obeyed(
    cli: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    cli("run", "--name", HOSTILE, "-P", f"note={HOSTILE}", "--wait", "--", "true")
    (run_id,) = [r["id"] for r in json.loads(cli("ls", "-o", "json").stdout)["items"] if "pwned" in r["name"]]
    for args in (("ls",), ("show", run_id), ("ls", "-o", "json"), ("show", run_id, "-o", "yaml")):
        shown = cli(*args).stdout
        for raw in ("\x1b", "\x07", "\u202e", "\u2066", "\x9b"):
            assert raw not in shown, (args, repr(shown[:400]))
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\u202eyp.live" in cli("show", run_id).stdout
