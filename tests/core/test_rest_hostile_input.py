"""Bad input through the REST API: a clear 4xx naming the field, nothing changed, never a 500."""

from __future__ import annotations

import json
import marshal
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from jupyter_server_process import JupyterServer


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("hostile")
    env = {"KUBELAB_MACHINE_DIR": str(base / "machine"), "KUBELAB_STOP_GRACE": "2"}
    with JupyterServer(base / "root", base / "home", env=env) as running:
        yield running


def post_raw(server: JupyterServer, path: str, data: bytes) -> requests.Response:
    headers = {**server.headers, "Content-Type": "application/json"}
    return requests.post(server.api + path, headers=headers, data=data, timeout=30)


def total(server: JupyterServer) -> int:
    return int(server.get("experiments").json()["total"])


def fields(response: requests.Response) -> dict[str, str]:
    return {f["path"]: f["reason"] for f in response.json()["fields"]}


def test_a_non_ascii_token_is_refused_not_a_server_error(server: JupyterServer) -> None:
    for token in ("tökén", "\u00e9" * 40):
        headers = {"Authorization": f"token {token}".encode()}
        response = requests.get(server.api + "experiments", headers=headers, timeout=30)
        assert response.status_code in (401, 403), (token, response.status_code, response.text[:200])


@pytest.mark.parametrize("cpu", ["1e1000000", "-1e1000000", "nan", "inf"])
def test_an_impossible_cpu_count_names_the_field(server: JupyterServer, cpu: str) -> None:
    before = total(server)
    response = server.post("experiments", {"command": ["true"], "resources": {"cpu": cpu}})
    assert response.status_code == 422, response.text
    assert "resources.cpu" in fields(response)
    assert total(server) == before


def test_a_timeout_beyond_any_float_names_the_field(server: JupyterServer) -> None:
    before = total(server)
    body = json.dumps({"command": ["true"], "timeout": 10**400}).encode()
    response = post_raw(server, "experiments", body)
    assert response.status_code == 422, response.text
    assert "timeout" in fields(response)
    assert total(server) == before


@pytest.mark.parametrize("path", ["experiments", "sweeps", "tensorboards", "sweeps/000000000000/resume"])
def test_a_body_that_is_not_utf8_is_a_400(server: JupyterServer, path: str) -> None:
    response = post_raw(server, path, b'{"command": ["\xff\xfe"]}')
    assert response.status_code in (400, 422), (path, response.status_code, response.text[:300])
    assert "body" in fields(response)


def test_deeply_nested_parentheses_in_a_query_are_refused(server: JupyterServer) -> None:
    query = "(" * 3000 + "status:running" + ")" * 3000
    response = server.get("experiments", params={"query": query})
    assert response.status_code == 422, response.text[:300]
    assert "query" in fields(response)


def test_an_alias_bomb_spec_file_is_refused_by_name(server: JupyterServer) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 8)]
    bomb = "\n".join(
        ["command: [python, train.py]", "inputs:", "  - name: x", "    description: *a7", *lines]
    )
    (server.root / "bomb.yaml").write_text(bomb + "\n")
    assert len(bomb) < 1000
    before = total(server)
    response = server.post("experiments", {"file": "bomb.yaml"})
    assert response.status_code == 422, response.text[:300]
    assert "aliases" in response.text
    assert total(server) == before


def test_spec_strings_are_bounded(server: JupyterServer) -> None:
    before = total(server)
    for spec, field in (
        (
            {"command": ["true"], "inputs": [{"name": "x", "description": "x" * 200_000}]},
            "inputs[0].description",
        ),
        ({"command": ["true"], "env": {"A": "x" * 200_000}}, "env.A"),
        ({"command": ["x" * 200_000]}, "command"),
        ({"command": ["true"], "tags": ["t" * 1000]}, "tags"),
    ):
        response = server.post("experiments", spec)
        assert response.status_code == 422, response.text[:300]
        assert field in fields(response), response.text[:300]
    assert total(server) == before


def test_a_malformed_index_entry_does_not_break_listings(server: JupyterServer) -> None:
    run = server.post("experiments", {"command": ["true"], "name": "kept"}).json()["id"]
    server.wait_for(run)
    server.get("experiments")  # a listing saves the index
    index = server.home / "index.marshal"
    data = marshal.loads(index.read_bytes())
    data["entries"]["zzzzzzzzzzzz"] = ("not", "an", "entry")
    data["entries"][run] = (None, {"no": "status"}, "x")
    index.write_bytes(marshal.dumps(data))
    server.stop()
    server.start()
    listed = server.get("experiments")
    assert listed.status_code == 200, listed.text[:300]
    assert run in [item["id"] for item in listed.json()["items"]]


@pytest.mark.parametrize("name", ["offset", "length", "replica"])
def test_a_log_range_beyond_any_file_names_the_field(server: JupyterServer, name: str) -> None:
    run = server.post("experiments", {"command": ["python", "-c", "print('a log to read')"]}).json()["id"]
    server.wait_for(run)  # its log exists: seeking in it is what failed
    for value in ("9223372036854775807", str(10**30)):
        response = server.get(f"experiments/{run}/logs", params={"length": "1", name: value})
        assert response.status_code == 422, (name, value, response.status_code, response.text[:300])
        assert name in fields(response)


def test_a_fifo_in_a_code_folder_is_left_out_of_the_snapshot(server: JupyterServer) -> None:
    code = server.root / "with-fifo"
    code.mkdir()
    (code / "train.py").write_text("print('trained')\n")
    os.mkfifo(code / "pipe")
    before = total(server)
    response = server.post("experiments", {"command": ["python", "train.py"], "code": str(code)})
    assert response.status_code == 201, response.text[:500]
    record = server.wait_for(response.json()["id"])
    snapshot = Path(server.get(f"experiments/{record['id']}").json()["run_dir"]) / "code"
    assert sorted(p.name for p in snapshot.iterdir()) == ["train.py"]
    assert record["status"] == "Succeeded" and total(server) == before + 1
