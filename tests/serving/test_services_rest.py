"""Services through a real Jupyter server: `/kubelab/api/services` and the proxy at
`/kubelab/services/<id>/` (behind the login, the model server's answers passed through, pages
sandboxed behind a capability, no credential of Jupyter's forwarded)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from jupyter_server_process import JupyterServer, run_in_kernel
from serving_support import IRIS_ROWS, infer_body, poll, write_model
from tornado import httputil, web

from kubelab.server_extension.services import ServiceEntry, ServiceView, route_first

ECHO = """
import http.server, json, os
class Echo(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("<!doctype html><pre id=headers>" + json.dumps(dict(self.headers)) + "</pre>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Set-Cookie", "planted=1; Path=/")
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Echo).serve_forever()
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("serving")
    root = base / "root"
    root.mkdir()
    write_model(root)
    (root / "echo.py").write_text(ECHO)
    env = {"KUBELAB_MACHINE_DIR": str(base / "machine"), "KUBELAB_WARM_RUNNERS": "0"}
    with JupyterServer(root, base / "home", env=env) as running:
        yield running
        for view in running.get("services").json()["items"]:
            running.post(f"services/{view['id']}/stop")


def running(server: JupyterServer, service_id: str) -> dict[str, Any]:
    view: dict[str, Any] = poll(
        lambda: (v := server.get(f"services/{service_id}").json())["state"] in ("Running", "Failed") and v,
        what=f"{service_id} starts",
    )
    assert view["state"] == "Running", view
    return view


def test_a_model_answers_through_the_proxy_behind_the_login(server: JupyterServer) -> None:
    started = server.post("services", {"name": "iris", "model": "outputs/model.joblib"})
    assert started.status_code == 201, started.text
    view = running(server, "iris-v1")
    assert view["lineage"]["file"] == "outputs/model.joblib"
    endpoint = server.url + view["url"].lstrip("/") + view["endpoint"]
    answer = requests.post(endpoint, json=infer_body(), headers=server.headers, timeout=30)
    assert answer.status_code == 200 and answer.json()["outputs"][0]["data"] == [0, 2]
    assert "sandbox" in answer.headers["Content-Security-Policy"]
    assert answer.headers["Content-Type"] == "application/json"  # MLServer's, not beside Tornado's default
    wrong = requests.post(endpoint, json={"instances": IRIS_ROWS}, headers=server.headers, timeout=30)
    assert wrong.status_code == 422 and wrong.json()["detail"][0]["loc"] == ["body", "inputs"]  # MLServer's
    other = server.url + view["url"].lstrip("/") + "v2/models/nosuch/infer"
    missing = requests.post(other, json=infer_body(), headers=server.headers, timeout=30)
    assert missing.status_code == 404 and "nosuch" in missing.text
    assert requests.post(endpoint, json=infer_body(), timeout=30).status_code == 403  # no login
    to_login = requests.get(server.url + view["url"].lstrip("/"), allow_redirects=False, timeout=30)
    assert to_login.status_code == 302 and "/login" in to_login.headers["Location"]
    assert server.get("services").json()["items"][0]["id"] == "iris-v1"
    assert "HTTP server running" in server.get("services/iris-v1/logs?replica=0").text
    assert server.post("services/iris-v1/stop").json()["state"] == "Stopped"
    gone = requests.post(endpoint, json=infer_body(), headers=server.headers, timeout=30)
    assert gone.status_code == 503 and "iris-v1 is Stopped" in gone.json()["detail"]


def test_bad_requests_name_the_field_and_change_nothing(server: JupyterServer) -> None:
    for body, field, words in (
        ({"model": "outputs/none.joblib"}, "model.path", "no such file"),
        ({"model": "outputs/model.joblib", "folder": "../.."}, "folder", "outside the workspace"),
        ({"model": "outputs/model.joblib", "replicas": {"min": 3, "max": 1}}, "replicas.max", "at least"),
        ({"kind": "service"}, "command", "needs one of model"),
        ([], "", "mapping"),
    ):
        answer = server.post("services", body)
        assert answer.status_code == 422, answer.text
        assert words in {f["path"]: f["reason"] for f in answer.json()["fields"]}[field]
    assert server.get("services/nosuch-v1").status_code == 404
    assert server.get("services/..%2F..%2Fetc").status_code == 404
    assert server.page("kubelab/services/nosuch-v1/v2/health/ready").status_code == 404
    assert [v["id"] for v in server.get("services").json()["items"] if v["id"].startswith("svc")] == []


def test_pages_render_sandboxed_behind_a_capability_without_jupyter_s_credentials(
    server: JupyterServer,
) -> None:
    started = server.post("services", {"name": "echo", "command": ["python", "echo.py"]})
    assert started.status_code == 201, started.text
    view = running(server, "echo-v1")
    pages = server.url + view["url"].lstrip("/")
    entry = requests.get(
        pages + "page", headers={**server.headers, "Accept": "text/html"}, allow_redirects=False, timeout=30
    )
    assert entry.status_code == 302 and entry.headers["Cache-Control"] == "no-store"
    location = entry.headers["Location"]
    assert location.startswith("/kubelab/service-view/") and location.endswith("/page")
    page = requests.get(server.url + location.lstrip("/"), cookies={"_xsrf": "x"}, timeout=30)
    assert page.status_code == 200 and "<pre id=headers>" in page.text
    policy = page.headers["Content-Security-Policy"]
    assert "sandbox" in policy and "allow-same-origin" not in policy
    assert "Set-Cookie" not in page.headers
    assert "cookie" not in page.text.lower()
    api_call = requests.get(
        pages + "data", headers={**server.headers, "Accept": "application/json"}, timeout=30
    )
    assert api_call.status_code == 200 and "sandbox" in api_call.headers["Content-Security-Policy"]
    assert server.token not in api_call.text and "authorization" not in api_call.text.lower()
    assert requests.get(server.url + "kubelab/service-view/not-a-capability/", timeout=30).status_code == 404
    server.delete("services/echo-v1")
    assert server.get("services/echo-v1").status_code == 404


def test_serve_magic_in_a_kernel_goes_through_the_server(server: JupyterServer) -> None:
    code = (
        "%load_ext kubelab\n"
        "import kubelab.magics.serve as serve\n"
        "serve.display = print  # the view's text, on the kernel's stdout\n"
        "%serve --name magic --model outputs/model.joblib\n"
        "%serve --model outputs/none.joblib\n"
    )
    printed = run_in_kernel(server, code, timeout=120)
    assert "service magic-v1: Running" in printed, printed
    assert f"url: {server.url}kubelab/services/magic-v1/" in printed
    assert "predict: POST" in printed and "v2/models/magic/infer" in printed
    assert "model.path: no such file" in printed  # a refusal reads as a usage error, no traceback
    assert server.post("services/magic-v1/stop").json()["state"] == "Stopped"


def test_the_proxy_s_figures_of_a_service_s_requests_are_in_its_view(server: JupyterServer) -> None:
    started = server.post("services", {"name": "busy", "command": ["python", "echo.py"]})
    assert started.status_code == 201, started.text
    view = running(server, "busy-v1")
    assert view["stats"]["requests"] == 0 and view["stats"]["p50_ms"] is None
    data = server.url + view["url"].lstrip("/") + "data"
    for _ in range(5):
        answer = requests.get(data, headers={**server.headers, "Accept": "application/json"}, timeout=30)
        assert answer.status_code == 200
    stats = server.get("services/busy-v1").json()["stats"]
    assert stats["requests"] == 5 and stats["errors"] == 0 and stats["window_s"] == 60.0
    assert stats["rate"] > 0 and 0 < stats["p50_ms"] <= stats["p95_ms"]
    listed = {v["id"]: v for v in server.get("services").json()["items"]}
    assert listed["busy-v1"]["stats"]["requests"] == 5
    assert server.post("services/busy-v1/stop").json()["state"] == "Stopped"
    gone = requests.get(data, headers={**server.headers, "Accept": "application/json"}, timeout=30)
    assert gone.status_code == 503
    stats = server.get("services/busy-v1").json()["stats"]
    assert stats["requests"] == 6 and stats["errors"] == 1  # the refused request counts, as a failure
    to_login = requests.get(data, allow_redirects=False, timeout=30)
    assert to_login.status_code == 302  # no login: not forwarded, not counted
    assert server.get("services/busy-v1").json()["stats"]["requests"] == 6
    server.delete("services/busy-v1")


def test_a_traffic_request_is_checked_whole_and_refused_by_field_on_this_machine(
    server: JupyterServer,
) -> None:
    """`POST services/<name>/traffic` (the cluster's split): a body that cannot be one names its
    fields, all at once; a well-formed one is refused here by name (one machine has no router)."""
    for body, expected in (
        ({"traffic": {"2": "ten"}}, {"traffic.2": "not 'ten'"}),
        ({"traffic": {"2": 10.5}, "mirror": {"2": True}}, {"traffic.2": "10.5", "mirror.2": "True"}),
        ({"traffic": "2=10"}, {"traffic": "must map versions to percents"}),
        ({"weights": {"2": 10}}, {"weights": "unknown field", "traffic": "is required"}),
        ([["2", 10]], {"body": "must be a mapping"}),
        ({"traffic": {"2": 10}}, {"traffic": "versions share traffic on Kubernetes"}),
    ):
        answer = server.post("services/iris/traffic", body)
        assert answer.status_code == 422, (body, answer.text)
        reasons = {f["path"]: f["reason"] for f in answer.json()["fields"]}
        assert reasons.keys() == expected.keys() and all(
            words in reasons[path] for path, words in expected.items()
        ), (body, reasons)
    not_json = requests.post(
        server.api + "services/iris/traffic", data="2=10", headers=server.headers, timeout=30
    )
    assert not_json.status_code == 422 and not_json.json()["fields"][0]["path"] == "body"
    described = server.get("openapi.json").json()["paths"]["/kubelab/api/services/{name}/traffic"]["post"]
    assert described["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/Traffic")


class CatchAll(web.RequestHandler):
    """Another extension's route that matches any path."""


def test_the_proxy_s_routes_come_before_every_other_extension_s() -> None:
    """Tornado tries routes in order: the proxy's are placed first, so a prediction is matched
    against them alone, and no route another extension added before kubelab's can take it."""
    app = web.Application(base_url="/user/alice/")
    app.add_handlers(".*$", [(r"/user/alice/.*", CatchAll)])  # an extension loaded before kubelab
    route_first(app)
    for path, handler in (
        ("/user/alice/kubelab/services/iris-v1/v2/models/iris/infer", ServiceEntry),
        ("/user/alice/kubelab/service-view/abc_DEF-1/", ServiceView),
        ("/user/alice/kubelab/api/services", CatchAll),  # the REST routes keep their place
    ):
        request = httputil.HTTPServerRequest(method="POST", uri=path, headers=httputil.HTTPHeaders())
        delegate = app.find_handler(request)
        assert isinstance(delegate, web._HandlerDelegate) and delegate.handler_class is handler, path
