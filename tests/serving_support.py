"""What the serving tests share: a scikit-learn model file, a request in the protocol's shape,
a poll with a deadline (the `services` fixture is conftest.py's)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

IRIS_ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]  # a setosa and a virginica
TRAIN = """
import joblib, os
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression
X, y = load_iris(return_X_y=True)
outputs = os.environ["KUBELAB_OUTPUTS_DIR"]  # the run's outputs/: `outputs/model.joblib` in its folder
joblib.dump(LogisticRegression(max_iter=500).fit(X, y), os.path.join(outputs, "model.joblib"))
"""


def write_model(folder: Path) -> Path:
    """A fitted iris classifier saved with joblib, as a training script would."""
    import joblib
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    features, labels = load_iris(return_X_y=True)
    path = folder / "outputs" / "model.joblib"
    path.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(LogisticRegression(max_iter=500).fit(features, labels), path)
    return path


def infer_body(rows: list[list[float]] = IRIS_ROWS) -> dict[str, Any]:
    """An Open Inference Protocol v2 request: one FP64 tensor."""
    flat = [value for row in rows for value in row]
    return {"inputs": [{"name": "x", "shape": [len(rows), len(rows[0])], "datatype": "FP64", "data": flat}]}


def post_json(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def poll(check: Callable[[], Any], timeout: float = 90.0, what: str = "") -> Any:
    """`check()`'s first truthy answer, polled until a deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = check()
        if answer:
            return answer
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")
