"""Why proxied TensorBoard pages carry no `Content-Security-Policy: sandbox`, shown in Chromium.

A sandbox without `allow-same-origin` is the only kind that keeps a page's scripts away from
Jupyter's origin (its cookies, its XSRF token, the kubelab API). This test gives TensorBoard
every other help it would need in such a sandbox — the user's credentials on each request (a
sandboxed page sends no cookies) and CORS answers for its opaque origin — and shows that it
still cannot work: its own code reads `window.localStorage`, which throws in an opaque origin,
and it shows "Data could not be loaded". The same page without the sandbox renders the scalar,
so the sandbox alone is the cause. When a TensorBoard release works sandboxed, the first test
fails: then the proxy should send the header (docs/security.md says what to do until then).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from browser.conftest import CHROMIUM, CHROMIUM_ARGS
from jupyter_server_process import JupyterServer
from playwright.sync_api import Browser, Route, sync_playwright

TRAIN = "import kubelab\nfor s in range(5):\n    kubelab.report(step=s, loss=1 / (s + 1))\n"
SANDBOX = "sandbox allow-scripts"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, str]]:
    base = tmp_path_factory.mktemp("tb-sandbox")
    with JupyterServer(
        base / "root", base / "home", env={"KUBELAB_MACHINE_DIR": str(base / "machine")}
    ) as server:
        run = server.post("experiments", {"name": "tb", "command": ["python", "-c", TRAIN]}).json()["id"]
        assert server.wait_for(run)["status"] == "Succeeded"
        started = server.post("tensorboards", {"experiments": [run]})
        assert started.status_code in (200, 201), started.text
        yield server, server.url.rstrip("/") + started.json()["url"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not shutil.which(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


def open_tensorboard(browser: Browser, server: JupyterServer, url: str, policy: str | None) -> dict[str, Any]:
    """Load the page with `policy` added to its document; return what rendered and what broke."""
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)

    def answer(route: Route) -> None:
        request = route.request
        if request.method == "OPTIONS":  # a sandboxed page's data queries are cross-origin
            route.fulfill(
                status=204,
                headers={
                    "Access-Control-Allow-Origin": "*",
                    "Access-Control-Allow-Headers": "*",
                    "Access-Control-Allow-Methods": "GET, POST",
                },
            )
            return
        response = route.fetch(headers={**request.headers, **server.headers})  # credentials without cookies
        headers = {**response.headers, "access-control-allow-origin": "*"}
        if policy and request.resource_type == "document":
            headers["content-security-policy"] = policy
        route.fulfill(response=response, headers=headers)

    page.route("**/kubelab/tensorboard/**", answer)
    page.goto(url)
    try:
        page.get_by_text("loss", exact=True).first.wait_for(timeout=30_000)
        rendered = True
    except Exception:
        rendered = False
    result = {
        "rendered": rendered,
        "origin": page.evaluate("() => window.origin"),
        "cookie": page.evaluate(
            "() => { try { document.cookie; return 'readable' } catch (e) { return e.name } }"
        ),
        "body": page.locator("body").inner_text(),
        "errors": errors,
    }
    context.close()
    return result


def test_tensorboard_cannot_work_in_a_sandbox_that_keeps_it_off_jupyters_origin(session, browser) -> None:
    server, url = session
    sandboxed = open_tensorboard(browser, server, url, SANDBOX)
    assert sandboxed["origin"] == "null" and sandboxed["cookie"] == "SecurityError"  # what the sandbox buys
    assert not sandboxed["rendered"]
    assert "Data could not be loaded" in sandboxed["body"]
    assert any("localStorage" in e and "sandboxed" in e for e in sandboxed["errors"]), sandboxed["errors"][:5]


def test_the_same_page_without_the_sandbox_renders_the_scalar(session, browser) -> None:
    server, url = session
    plain = open_tensorboard(browser, server, url, None)
    assert plain["rendered"], plain["body"][:500]
    assert plain["origin"] != "null"
