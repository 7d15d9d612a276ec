"""Proxied TensorBoard pages live in a sandbox of their own, and TensorBoard still works there.

A script in a TensorBoard page (a hostile event file, a plugin) must not act as the user on
Jupyter's origin. The proxy serves every page with `Content-Security-Policy: sandbox` without
`allow-same-origin`, at a capability URL; these tests open it in Chromium as a user would and
try, from inside the page, what such a script would: read Jupyter's cookies, call the kubelab
API with the user's credentials, run an experiment. Then the same page must still render the
scalar, which needs the storage shim and the CORS answers (`kubelab.tensorboard.sandbox`).
"""

from __future__ import annotations

import io
import shutil
import time
from collections.abc import Iterable, Iterator
from typing import Any, cast

import pytest
import requests
from browser.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS
from jupyter_server_process import JupyterServer
from PIL import Image
from playwright.sync_api import Browser, Page, sync_playwright

TRAIN = "import kubelab\nfor s in range(5):\n    kubelab.report(step=s, loss=1 / (s + 1))\n"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, dict[str, Any]]]:
    base = tmp_path_factory.mktemp("tb-sandbox")
    with JupyterServer(
        base / "root", base / "home", env={"KUBELAB_MACHINE_DIR": str(base / "machine")}
    ) as server:
        run = server.post("experiments", {"name": "tb", "command": ["python", "-c", TRAIN]}).json()["id"]
        assert server.wait_for(run)["status"] == "Succeeded"
        started = server.post("tensorboards", {"experiments": [run]})
        assert started.status_code in (200, 201), started.text
        yield server, started.json()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not shutil.which(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def opened(
    session: tuple[JupyterServer, dict[str, Any]], browser: Browser
) -> Iterator[tuple[Page, list[str]]]:
    """The session's `url`, opened by a logged-in browser (Jupyter's login cookie is set)."""
    server, started = session
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{server.url}lab?token={server.token}")  # logs in: the cookie a hostile page wants
    assert any(c["name"].startswith("_xsrf") for c in context.cookies())
    page.goto(server.url.rstrip("/") + started["url"])
    yield page, errors
    context.close()


def line_pixels(page: Page) -> int:
    """Pixels of the run's curve (a dark slate blue) in the chart's canvas: the chart worker
    draws it on an OffscreenCanvas, so only a screenshot sees it."""
    canvas = page.locator("line-chart canvas, canvas").first
    if not canvas.count():
        return 0
    image = Image.open(io.BytesIO(canvas.screenshot())).convert("RGB")
    pixels = cast(Iterable[tuple[int, int, int]], image.get_flattened_data())
    return sum(1 for r, g, b in pixels if r < 120 and b - r >= 25)


def test_the_page_renders_the_scalar_inside_the_sandbox(opened: tuple[Page, list[str]]) -> None:
    page, errors = opened
    page.get_by_text("loss", exact=True).first.wait_for(timeout=60_000)
    assert "/kubelab/tensorboard-view/" in page.url  # the capability URL, reached by redirect
    assert "token" not in page.url
    assert "Data could not be loaded" not in page.locator("body").inner_text()
    assert not [e for e in errors if "Security" in e or "CORS" in e or "Failed to load" in e], errors[:5]
    deadline = time.monotonic() + 60
    while line_pixels(page) < 30 and time.monotonic() < deadline:  # drawn by its chart worker
        time.sleep(0.5)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "tensorboard-sandboxed.png"))
    assert line_pixels(page) >= 30, "the loss curve was not drawn (see tensorboard-sandboxed.png)"


def test_a_script_in_the_page_is_off_jupyters_origin(opened: tuple[Page, list[str]]) -> None:
    page, _ = opened
    assert page.evaluate("() => window.origin") == "null"
    real = """() => {
        const cookie = Object.getOwnPropertyDescriptor(Document.prototype, 'cookie').get;
        try { return cookie.call(document) } catch (e) { return e.name }
    }"""
    assert page.evaluate(real) == "SecurityError"  # no _xsrf to read, past the shim either
    assert "_xsrf" not in page.evaluate("() => document.cookie")  # the shim's jar is the page's own
    storage = page.evaluate("() => { localStorage.setItem('k', 'v'); return localStorage.getItem('k') }")
    assert storage == "v"  # TensorBoard's storage works, in memory: not Jupyter's


def test_a_script_in_the_page_cannot_use_the_users_credentials(
    session: tuple[JupyterServer, dict[str, Any]], opened: tuple[Page, list[str]]
) -> None:
    server, _ = session
    page, _ = opened
    api = server.api + "experiments"
    read = page.evaluate(
        """async (url) => {
            try { const r = await fetch(url, {credentials: 'include'}); return 'read ' + r.status }
            catch (e) { return e.name }
        }""",
        api,
    )
    assert read == "TypeError"  # cross-origin to the opaque page, and Jupyter sends no CORS grant
    before = server.get("experiments").json()["total"]
    page.evaluate(
        """async (url) => {
            const body = JSON.stringify({name: 'forged', command: ['true']});
            await fetch(url, {method: 'POST', mode: 'no-cors', credentials: 'include', body});
            const form = new URLSearchParams({name: 'forged'});
            await fetch(url, {method: 'POST', mode: 'no-cors', credentials: 'include', body: form});
        }""",
        api,
    )
    time.sleep(1.0)  # had a run been accepted, it would be listed by now
    listed = server.get("experiments").json()
    assert listed["total"] == before and all(r["name"] != "forged" for r in listed["items"])


def test_every_answer_of_the_view_is_sandboxed_and_reachable_only_by_its_capability(
    session: tuple[JupyterServer, dict[str, Any]], opened: tuple[Page, list[str]]
) -> None:
    server, started = session
    page, _ = opened
    view = page.url.split("#")[0].split("?")[0]
    document = requests.get(view, timeout=30)  # no cookie, no token: the capability is enough
    assert document.status_code == 200 and "<script>" in document.text
    policy = document.headers["Content-Security-Policy"]
    assert "sandbox allow-scripts" in policy and "allow-same-origin" not in policy
    assert "frame-ancestors 'self'" in policy and document.headers["Referrer-Policy"] == "no-referrer"
    data = requests.get(view + "data/runs", timeout=30)
    assert data.status_code == 200 and "sandbox" in data.headers["Content-Security-Policy"]
    assert data.headers["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Credentials" not in data.headers
    capability = view.rstrip("/").rsplit("/", 1)[1]
    guessed = view.replace(capability, capability[:-1] + ("A" if capability[-1] != "A" else "B"))
    assert requests.get(guessed, timeout=30).status_code == 404
    assert capability not in server.get("tensorboards").text  # the API lists sessions, not secrets
    anonymous = server.page(started["url"], token=False)
    assert anonymous.status_code == 302 and "/login" in anonymous.headers["Location"]
    entered = server.page(started["url"] + "data/runs?x=1")
    assert entered.status_code == 302 and entered.headers["Cache-Control"] == "no-store"
    assert entered.headers["Location"].endswith(f"/kubelab/tensorboard-view/{capability}/data/runs?x=1")


def test_a_worker_whose_script_cannot_be_fetched_fails_as_any_worker_does(
    opened: tuple[Page, list[str]],
) -> None:
    """(As when a session is stopped while its page starts a chart: no exception, an event.)"""
    page, _ = opened
    outcome = page.evaluate(
        """() => new Promise(resolve => {
            let worker;
            try { worker = new Worker('no-such-worker.js') } catch (e) { return resolve('threw ' + e.name) }
            worker.addEventListener('error', () => resolve('error event'));
            setTimeout(() => resolve('nothing'), 10000);
        })"""
    )
    assert outcome == "error event"
