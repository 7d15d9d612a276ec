"""VS Code beside JupyterLab on the local hub, in Chromium: the spawn form's "Open in: VS Code"
opens code-server (through jupyter-vscode-proxy) on the user's workspace, whose files it lists;
its process (and so its terminals) finds `kubelab` first on the PATH; code-server listens on a
private socket, not a port; requests to it count as the server's activity (idle culling); and
stopping the server ends code-server with all it started.

code-server comes from npm (4.100, the last line on Node 20), installed by `scripts/setup --test`
into `.cache/code-server` (or named by KUBELAB_CODE_SERVER); without it the test skips and says so.
"""

from __future__ import annotations

import getpass
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS
from playwright.sync_api import Page, expect, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spawner"))
from hub_process import PASSWORD, Hub, local_hub_env
from hub_process import open_folder as open_folder_at

REPO = Path(__file__).resolve().parents[2]
MARKER = "hello_from_the_workspace.py"


def code_server() -> str:
    for candidate in (
        os.environ.get("KUBELAB_CODE_SERVER", ""),
        str(REPO / ".cache" / "code-server" / "node_modules" / ".bin" / "code-server"),
        shutil.which("code-server") or "",
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("no code-server: `scripts/setup --test` installs it (npm) into .cache/code-server")


@pytest.fixture
def open_folder() -> Iterator[Path]:
    with open_folder_at("kubelab-vscode-") as folder:
        yield folder


def processes_named(word: str, user_env: str) -> list[tuple[str, dict[str, str]]]:
    """(command line, environment) of the processes whose command line holds `word` and whose
    environment holds `user_env` (JUPYTERHUB_USER=...)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        variables = dict(v.decode(errors="replace").partition("=")[::2] for v in environ if b"=" in v)
        if word in command and user_env in [f"JUPYTERHUB_USER={variables.get('JUPYTERHUB_USER')}"]:
            found.append((command, variables))
    return found


def last_activity(page: Page, base: str) -> str:
    answer = page.request.get(f"{base}/api/status")
    assert answer.ok, answer.text()
    return str(answer.json()["last_activity"])


def test_vscode_opens_on_the_workspace_with_kubelab_on_its_path(open_folder: Path) -> None:
    executable = code_server()
    me = os.environ.get("USER") or getpass.getuser()
    workspace = open_folder / "root" / "workspaces" / me
    workspace.mkdir(parents=True)
    (workspace / MARKER).write_text("print('hi')\n")
    hub = Hub(
        open_folder / "hub",
        "c.LocalKubeLabSpawner.start_timeout = 120\n"
        "c.LocalKubeLabSpawner.run_as_users = False\n"
        f"c.LocalKubeLabSpawner.code_server = {executable!r}\n",
        local_hub_env(open_folder),
    )
    with hub, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_context().new_page()
        try:
            page.goto(f"{hub.url}/hub/login")
            page.fill("input[name=username]", me)
            page.fill("input[name=password]", PASSWORD)
            page.click("input[type=submit], button[type=submit]")
            page.wait_for_url("**/hub/spawn**", timeout=60_000)
            page.select_option("select[name=interface]", "vscode")
            page.click("form#spawn_form input[type=submit], form#spawn_form button[type=submit]")
            page.wait_for_url(f"**/user/{me}/vscode/**", timeout=180_000)
            expect(page.get_by_text(MARKER).first).to_be_visible(timeout=180_000)  # the explorer

            code = processes_named("--disable-telemetry", f"JUPYTERHUB_USER={me}")
            assert code, "no code-server process of this user"
            command, env = code[0]
            path = env["PATH"].split(os.pathsep)
            assert os.access(os.path.join(path[0], "kubelab"), os.X_OK), path[:3]  # its terminals' PATH
            assert env["CODE_WORKINGDIR"] == str(workspace) and command.rstrip().endswith(str(workspace))
            assert "--socket" in command and "--port" not in command, command  # no port to other accounts
            socket = Path(command.split("--socket ", 1)[1].split()[0])
            assert socket.parent.stat().st_mode & 0o077 == 0 and socket.stat().st_mode & 0o077 == 0

            base = f"{hub.url}/user/{me}"
            before = last_activity(page, base)
            deadline = time.monotonic() + 30
            while last_activity(page, base) == before:  # a proxied request is the server's activity
                assert time.monotonic() < deadline, "VS Code's requests did not count as activity"
                assert page.request.get(f"{base}/vscode/").ok

            # stopping the server ends code-server and every process it started (extension hosts)
            assert processes_named("code-server", f"JUPYTERHUB_USER={me}")
            assert hub.api("DELETE", f"users/{me}/server").status_code in (202, 204)
            hub.wait_server(me, ready=False, timeout=60)
            deadline = time.monotonic() + 30
            while left := processes_named("code-server", f"JUPYTERHUB_USER={me}"):
                assert time.monotonic() < deadline, [command for command, _ in left]
        except Exception as failure:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "vscode.png"))
            raise AssertionError(f"{failure}\n{hub.log_tail()}") from None
        finally:
            browser.close()
