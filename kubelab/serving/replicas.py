"""What one replica of a service runs: MLServer for a model or a predictor, or the user's command.

A model is served by MLServer (Seldon's server for KServe's Open Inference Protocol, v2 REST),
through the library's own runtime for the file's kind (scikit-learn's `joblib`/`pickle` files,
XGBoost and LightGBM where their runtime packages are installed) or, for `predictor:
module:Class`, kubelab's small runtime around the user's class (`predictor_runtime.py`).
The model's settings are a file in the service's folder, written once; the server's come
through MLServer's environment settings, each replica's ports chosen free. A command gets its port as
`{{ port }}` and `PORT`, unless the spec fixes `ports`.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubelab import templating
from kubelab.driver_store import write_json
from kubelab.errors import FieldError
from kubelab.serving.spec import ServiceSpec
from kubelab.serving.store import ServiceDirectory

# The model file's suffix -> (MLServer runtime, the package that provides it).
RUNTIMES = {
    ".joblib": ("mlserver_sklearn.SKLearnModel", "mlserver-sklearn"),
    ".pkl": ("mlserver_sklearn.SKLearnModel", "mlserver-sklearn"),
    ".pickle": ("mlserver_sklearn.SKLearnModel", "mlserver-sklearn"),
    ".ubj": ("mlserver_xgboost.XGBoostModel", "mlserver-xgboost"),
    ".bst": ("mlserver_xgboost.XGBoostModel", "mlserver-xgboost"),
    ".json": ("mlserver_xgboost.XGBoostModel", "mlserver-xgboost"),
    ".txt": ("mlserver_lightgbm.LightGBMModel", "mlserver-lightgbm"),
}
MLSERVER_MAIN = "from mlserver.cli import main; main()"  # `mlserver start`, run by this interpreter
PREDICTOR_RUNTIME = "kubelab.serving.predictor_runtime.PredictorModel"
# MLServer's settings, as its environment (a settings.json would hide the per-replica ports)
SERVER_SETTINGS = {
    "MLSERVER_DEBUG": "false",  # no access log line per request
    "MLSERVER_PARALLEL_WORKERS": "0",  # inference in the server's process: no worker pool to hop through
    "MLSERVER_METRICS_ENDPOINT": "",  # no third port per replica
    "MLSERVER_HOST": "127.0.0.1",  # reached through the Jupyter server's proxy only
    "MLSERVER_SERVER_NAME": "kubelab",
}


@dataclass
class Launch:
    """One replica's process: argv, environment, working folder and the port it answers on."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    port: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_in_use(port: int) -> bool:
    """True when something listens on `port` (loopback or any address) already."""
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def runtime_problems(spec: ServiceSpec, model_path: Path | None) -> list[FieldError]:
    """What keeps this machine from serving the spec's model: the file, the runtime package."""
    if spec.model is not None and model_path is not None:
        if not model_path.is_file():
            return [FieldError("model.path", f"no such file: {model_path}")]
        if spec.predictor is None:
            runtime = RUNTIMES.get(model_path.suffix.lower())
            if runtime is None:
                known = ", ".join(sorted(RUNTIMES))
                return [FieldError("model.path", f"no runtime serves {model_path.suffix!r} files ({known})")]
            if importlib.util.find_spec(runtime[0].split(".")[0]) is None:
                return [FieldError("model.path", f"needs the {runtime[1]} package to serve")]
    if spec.serves_model and importlib.util.find_spec("mlserver") is None:
        field = "model" if spec.model is not None else "predictor"
        return [FieldError(field, "serving a model needs MLServer: pip install 'kubelab[serving]'")]
    return []


def write_server_settings(directory: ServiceDirectory, spec: ServiceSpec, model_path: Path | None) -> None:
    """The model's model-settings.json, in the service's folder (MLServer's model repository)."""
    folder = directory.server_folder
    (folder / spec.name).mkdir(parents=True, exist_ok=True)
    parameters: dict[str, Any] = {"version": spec.version}
    if model_path is not None:
        parameters["uri"] = str(model_path)
    if spec.predictor is not None:
        implementation = PREDICTOR_RUNTIME
        parameters["extra"] = {"predictor": spec.predictor}
    else:
        implementation = RUNTIMES[model_path.suffix.lower() if model_path else ".joblib"][0]
    model = {"name": spec.name, "implementation": implementation, "parameters": parameters}
    write_json(folder / spec.name / "model-settings.json", model)


def launch(directory: ServiceDirectory, record: dict[str, Any], index: int) -> Launch:
    """The process replica `index` runs, with its ports chosen now (or fixed by the spec)."""
    spec = ServiceSpec.parse(record["spec"])
    cwd = record["cwd"]
    env = {**os.environ, **spec.env, "KUBELAB_SERVICE": directory.id, "KUBELAB_REPLICA": str(index)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (cwd, os.environ.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    if spec.serves_model:
        port = free_port()
        env.update(SERVER_SETTINGS, MLSERVER_HTTP_PORT=str(port), MLSERVER_GRPC_PORT=str(free_port()))
        argv = [
            sys.executable,
            "-c",
            "from mlserver.cli import main; main()",
            "start",
            str(directory.server_folder),
        ]
        return Launch(argv, env, cwd, port)
    port = spec.ports[0] if spec.ports else free_port()
    env["PORT"] = str(port)
    return Launch(templating.command_argv(spec.command, {"port": port}), env, cwd, port)
