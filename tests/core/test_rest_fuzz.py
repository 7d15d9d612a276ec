"""Property-based fuzzing of the REST API from its own OpenAPI document: no input gets a 5xx.

Schemathesis generates requests for every operation `/kubelab/api/openapi.json` describes
(bodies from its schemas, odd strings and numbers in every parameter) against a real server.
The run is bounded and repeatable: a fixed number of examples per operation, derandomized.
Streams that never end by design (`events`, followed logs) are left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from jupyter_server_process import JupyterServer

if TYPE_CHECKING:
    from schemathesis.specs.openapi.schemas import OpenApiCase

EXAMPLES = 20


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("fuzz")
    env = {
        "KUBELAB_MACHINE_DIR": str(base / "machine"),
        "KUBELAB_STOP_GRACE": "1",
        "KUBELAB_WARM_RUNNERS": "0",
    }
    with JupyterServer(base / "root", base / "home", env=env) as running:
        yield running


@pytest.fixture(scope="module")
def api_schema(server: JupyterServer) -> schemathesis.BaseSchema:
    schema = schemathesis.openapi.from_url(server.api + "openapi.json", headers=server.headers)
    schema.config.update(base_url=server.url.rstrip("/"))
    return schema


schema = schemathesis.pytest.from_fixture("api_schema").exclude(path_regex=r"/events$")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_no_request_gets_a_server_error(case: OpenApiCase, server: JupyterServer) -> None:
    if case.query and "follow" in case.query:
        case.query["follow"] = "0"  # a followed log lasts as long as its run
    response = case.call(headers=server.headers, timeout=60)
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} query={case.query} body={case.body!r:.300} "
        f"-> {response.status_code}: {response.text[:500]}"
    )
