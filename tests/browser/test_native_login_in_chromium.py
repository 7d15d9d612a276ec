"""The `native` login in Chromium, on a real hub with the JupyterHub kubelab installs: a user
signs up on the page, is told to wait for an admin, the admin approves them on NativeAuthenticator's
authorization page, and the user then logs in (the login was a 500 on JupyterHub 6)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser.conftest import CHROMIUM, CHROMIUM_ARGS
from playwright.sync_api import Browser, Page, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spawner"))
from hub_process import Hub, local_hub_env, open_folder

pytest.importorskip("nativeauthenticator", reason="pip install kubelab[native]")
PASSWORD = "a-long-lab-password-7"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium, or set KUBELAB_CHROMIUM")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


def sign_up(page: Page, hub: Hub, name: str) -> None:
    page.goto(f"{hub.url}/hub/signup")
    page.fill("input[name=username]", name)
    page.fill("input[name=signup_password]", PASSWORD)
    page.fill("input[name=signup_password_confirmation]", PASSWORD)
    page.click("#signup_submit")
    page.wait_for_load_state()


def log_in(page: Page, hub: Hub, name: str) -> None:
    page.goto(f"{hub.url}/hub/login")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", PASSWORD)
    with page.expect_navigation():
        page.click("#login_submit")


def test_sign_up_approval_and_login_in_chromium(browser: Browser) -> None:
    admin, user = "kladm" + os.urandom(2).hex(), "klnat" + os.urandom(2).hex()
    with open_folder("kubelab-native-browser-") as folder:
        env = local_hub_env(folder, KUBELAB_HUB_AUTH="native", KUBELAB_HUB_ADMINS=admin)
        with Hub(folder / "hub", "", env) as hub:
            users, admins = browser.new_context().new_page(), browser.new_context().new_page()
            sign_up(admins, hub, admin)
            sign_up(users, hub, user)
            log_in(users, hub, user)
            assert "has not been authorized by an administrator yet" in users.content()
            log_in(admins, hub, admin)
            assert "/hub/login" not in admins.url, admins.content()[:500]
            admins.goto(f"{hub.url}/hub/authorize")
            admins.click(f"a[href$='authorize/{user}']")
            admins.wait_for_load_state()
            log_in(users, hub, user)
            assert "/hub/login" not in users.url, (users.url, users.content()[:500], hub.log_tail())
            users.goto(f"{hub.url}/hub/home")
            assert user in users.content()
