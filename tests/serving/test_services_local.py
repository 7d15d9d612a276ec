"""Local services with real processes: a run's model served by MLServer over the Open Inference
Protocol, internal services from a command, supervision (restart, stop, a killed supervisor) and
each bad input named by its field or failing the service with the library's own error line."""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving_support import IRIS_ROWS, TRAIN, infer_body, poll, post_json, write_model

from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.pids import pid_alive
from kubelab.serving.service import Services


def fields(caught: pytest.ExceptionInfo[ValidationError]) -> dict[str, str]:
    return {f.path: f.reason for f in caught.value.fields}


def test_a_run_s_model_answers_the_open_inference_protocol(services: Services, tmp_path: Path) -> None:
    lab = Experiments(services.home)
    run = lab.submit({"name": "train-iris", "command": [sys.executable, "-c", TRAIN]}, base_dir=tmp_path)
    poll(lambda: lab.get(run["id"])["status"] == "Succeeded", what="the training run succeeds")
    view = services.start({"name": "iris", "model": {"run": run["id"], "path": "outputs/model.joblib"}})
    assert view["id"] == "iris-v1" and view["url"] == "/kubelab/services/iris-v1/"
    view = services.wait(view["id"])
    assert view["state"] == "Running", view
    assert view["lineage"]["run"] == run["id"] and view["lineage"]["file"] == "outputs/model.joblib"
    assert view["lineage"]["run_name"] == "train-iris"
    folder = services.home / "services" / "iris-v1"
    assert (folder.stat().st_mode & 0o777, (folder / "capability").stat().st_mode & 0o777) == (0o700, 0o600)
    port = view["replicas"][0]["port"]
    status, answer = post_json(f"http://127.0.0.1:{port}/{view['endpoint']}", infer_body())
    assert status == 200 and answer["outputs"][0]["data"] == [0, 2]
    status, answer = post_json(f"http://127.0.0.1:{port}/{view['endpoint']}", {"instances": IRIS_ROWS})
    assert status == 422 and answer["detail"][0]["loc"] == ["body", "inputs"]  # the model server's own
    pid = view["replicas"][0]["pid"]
    stopped = services.stop(view["id"])
    assert stopped["state"] == "Stopped" and stopped["replicas"][0]["pid"] is None
    poll(lambda: not pid_alive(pid), 10, "the replica has ended")


def test_refused_before_anything_runs_each_naming_its_field(services: Services, tmp_path: Path) -> None:
    write_model(tmp_path)
    for data, field, words in (
        ({"model": "outputs/none.joblib"}, "model.path", "no such file"),
        ({"model": {"run": "0000000000aa", "path": "outputs/model.joblib"}}, "model.run", "no experiment"),
        ({"model": "outputs/model.onnx"}, "model.path", "no such file"),
        ({"model": "outputs/model.joblib", "folder": "nowhere"}, "folder", "is not a folder"),
        ({"command": ["x"], "ports": [8080], "replicas": 2}, "ports", "cannot share a fixed port"),
    ):
        with pytest.raises(ValidationError) as caught:
            services.start(data)
        assert words in fields(caught)[field], (data, fields(caught))
    (tmp_path / "outputs" / "model.onnx").write_bytes(b"onnx")
    with pytest.raises(ValidationError) as caught:
        services.start({"model": "outputs/model.onnx"})
    assert "no runtime serves '.onnx'" in fields(caught)["model.path"]
    assert services.list() == []  # nothing was created


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_port_in_use_and_a_name_already_serving_are_refused(services: Services, taken_port: int) -> None:
    with pytest.raises(ValidationError) as caught:
        services.start({"command": ["sleep", "30"], "ports": [taken_port]})
    assert fields(caught)["ports[0]"] == f"port {taken_port} is already in use on this machine"
    web = services.start(
        {"name": "web", "command": "exec python3 -m http.server {{ port }} --bind 127.0.0.1"}
    )
    assert services.wait(web["id"])["state"] == "Running"
    with pytest.raises(ValidationError) as caught:
        services.start({"name": "web", "command": ["sleep", "30"]})
    assert "web version 1 is Running" in fields(caught)["name"]
    second = services.start({"name": "web", "version": 2, "command": ["sleep", "30"], "health_path": "/x"})
    assert second["id"] == "web-v2" and services.get("web")["id"] == "web-v2"  # a name: its newest


def test_a_file_that_does_not_load_fails_with_the_library_s_error_line(
    services: Services, tmp_path: Path
) -> None:
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "model.joblib").write_text("not a model\n")
    view = services.wait(services.start({"name": "broken", "model": "outputs/model.joblib"})["id"])
    assert view["state"] == "Failed"
    assert view["reason"].startswith(("KeyError", "UnpicklingError", "_pickle.UnpicklingError")), view[
        "reason"
    ]
    assert "not a model" in (tmp_path / "outputs" / "model.joblib").read_text()  # untouched
    assert all(r["pid"] is None for r in view["replicas"])


def test_a_predictor_raising_on_load_fails_with_its_error(services: Services, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "predictors.py").write_text(
        "class Broken:\n    def load(self):\n        raise RuntimeError('weights are missing')\n"
        "    def predict(self, x):\n        return x\n"
        "class Doubler:\n    def load(self):\n        self.factor = 2\n"
        "    def predict(self, x):\n        return x * self.factor\n"
    )
    broken = services.start({"name": "broken", "predictor": "predictors:Broken", "folder": "src"})
    view = services.wait(broken["id"])
    assert (view["state"], view["reason"]) == ("Failed", "RuntimeError: weights are missing")
    doubler = services.wait(services.start({"predictor": "predictors:Doubler", "folder": "src"})["id"])
    assert doubler["state"] == "Running" and doubler["lineage"]["predictor"] == "predictors:Doubler"
    port = doubler["replicas"][0]["port"]
    status, answer = post_json(f"http://127.0.0.1:{port}/{doubler['endpoint']}", infer_body([[1.5, 2.0]]))
    assert status == 200 and answer["outputs"][0]["data"] == [3.0, 4.0]


def test_a_crashed_replica_is_restarted_and_a_killed_supervisor_takes_its_replicas(
    services: Services,
) -> None:
    command = "exec python3 -m http.server {{ port }} --bind 127.0.0.1"
    services.start({"name": "web", "command": command, "replicas": 2})
    # A service is Running once one replica answers ("1 of 2 replicas ready"); replica 0 must
    # have answered before it is killed, or its end is a failure to start, not a crash.
    view = poll(
        lambda: (
            len((v := services.get("web-v1"))["replicas"]) == 2
            and all(r["state"] == "Ready" for r in v["replicas"])
            and v
        ),
        what="both replicas ready",
    )
    assert view["state"] == "Running" and len({r["port"] for r in view["replicas"]}) == 2
    first = view["replicas"][0]
    os.kill(first["pid"], signal.SIGKILL)
    again = poll(
        lambda: (
            (v := services.get("web-v1"))["replicas"][0]["restarts"] == 1
            and v["replicas"][0]["state"] == "Ready"
            and v
        ),
        what="the replica restarted",
    )
    assert again["replicas"][0]["pid"] != first["pid"] and again["state"] == "Running"
    pids = [r["pid"] for r in again["replicas"]]
    os.kill(again["supervisor_pid"], signal.SIGKILL)
    poll(lambda: not any(pid_alive(pid) for pid in pids), 10, "the replicas died with their supervisor")
    view = services.get("web-v1")
    assert view["state"] == "Failed" and "supervisor ended" in view["reason"]


def test_a_command_that_exits_before_answering_fails_with_its_last_line(services: Services) -> None:
    view = services.wait(
        services.start({"name": "oops", "command": "echo starting; echo 'no config' >&2; exit 3"})["id"]
    )
    assert (view["state"], view["reason"]) == ("Failed", "no config")
    assert "starting" in services.logs("oops-v1")
    services.delete("oops-v1")
    assert services.list() == []


def test_an_environment_the_system_refuses_fails_naming_env(services: Services) -> None:
    view = services.wait(services.start({"name": "badenv", "command": "true", "env": {"A=B": "c"}})["id"])
    assert view["state"] == "Failed" and view["reason"].startswith("env: ")


SWEEP_TRIAL = """
import joblib, os, kubelab
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression
X, y = load_iris(return_X_y=True)
c = kubelab.params()["c"]
model = LogisticRegression(C=c, max_iter=500).fit(X, y)
joblib.dump(model, os.path.join(os.environ["KUBELAB_OUTPUTS_DIR"], "model.joblib"))
kubelab.report_final({"loss": abs(c - 1.0)})
"""


def test_a_sweep_s_best_trial_is_served_with_its_lineage(services: Services, tmp_path: Path) -> None:
    from kubelab.sweeps.service import Sweeps

    sweeps = Sweeps(Experiments(services.home))
    created = sweeps.create(
        {
            "space": {"c": {"_type": "choice", "_value": [0.01, 1.0]}},
            "tuner": "grid",
            "objective": {"metric": "loss", "direction": "minimize"},
            "concurrency": 2,
            "trial": {"command": [sys.executable, "-c", SWEEP_TRIAL]},
        },
        base_dir=tmp_path,
    )
    ended = poll(
        lambda: (
            (r := sweeps.get(created["id"], with_importance=False))["status"] in ("Succeeded", "Failed") and r
        ),
        what="the sweep ends",
    )
    best = ended["best"]
    assert ended["status"] == "Succeeded" and best, ended["reason"]
    assert best["params"] == {"c": 1.0}
    view = services.wait(
        services.start({"name": "best", "model": {"run": created["id"], "path": "outputs/model.joblib"}})[
            "id"
        ]
    )
    assert view["state"] == "Running", view
    assert view["lineage"]["run"] == best["id"] and view["lineage"]["sweep"] == created["id"]
    assert view["lineage"]["trial"] == best["trial"]
    status, answer = post_json(
        f"http://127.0.0.1:{view['replicas'][0]['port']}/{view['endpoint']}", infer_body()
    )
    assert status == 200 and answer["outputs"][0]["data"] == [0, 2]
    with pytest.raises(ValidationError) as caught:
        services.start({"model": {"run": "0000000000zz", "path": "outputs/model.joblib"}})
    assert "no experiment or sweep" in fields(caught)["model.run"]
