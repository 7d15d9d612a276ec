"""The `native` login (NativeAuthenticator, sign-up with an admin's approval) on a real hub with
the JupyterHub kubelab installs: sign up, be refused until approved, log in."""

from __future__ import annotations

import os
import re

import pytest
import requests
from hub_process import Hub, local_hub_env, open_folder

pytest.importorskip("nativeauthenticator", reason="pip install kubelab[native]")

PASSWORD = "a-long-lab-password-7"


def form(session: requests.Session, url: str) -> str:
    page = session.get(url, timeout=30)
    assert page.status_code == 200, page.text[:300]
    found = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
    return found.group(1) if found else str(session.cookies.get("_xsrf", ""))


def sign_up(hub: Hub, name: str) -> None:
    session = requests.Session()
    xsrf = form(session, f"{hub.url}/hub/signup")
    data = {"username": name, "signup_password": PASSWORD, "signup_password_confirmation": PASSWORD}
    reply = session.post(f"{hub.url}/hub/signup", data={**data, "_xsrf": xsrf}, timeout=30)
    assert reply.status_code == 200, reply.text[:500]


def log_in(hub: Hub, name: str) -> tuple[requests.Session, requests.Response]:
    session = requests.Session()
    xsrf = form(session, f"{hub.url}/hub/login")
    reply = session.post(
        f"{hub.url}/hub/login",
        data={"username": name, "password": PASSWORD, "_xsrf": xsrf},
        timeout=30,
        allow_redirects=False,
    )
    assert reply.status_code < 500, (reply.status_code, reply.text[:500], hub.log_tail())
    return session, reply


def test_a_native_sign_up_logs_in_once_an_admin_approved_it() -> None:
    admin, user = "kladm" + os.urandom(2).hex(), "klnat" + os.urandom(2).hex()
    with open_folder("kubelab-native-") as folder:
        env = local_hub_env(folder, KUBELAB_HUB_AUTH="native", KUBELAB_HUB_ADMINS=admin)
        with Hub(folder / "hub", "", env) as hub:
            sign_up(hub, admin)  # an admin's sign-up is approved at once
            sign_up(hub, user)
            _, refused = log_in(hub, user)
            assert refused.status_code == 200 and "has not been authorized" in refused.text
            session, entered = log_in(hub, admin)
            assert entered.status_code == 302, entered.text[:300]
            approved = session.get(f"{hub.url}/hub/authorize/{user}", timeout=30, allow_redirects=False)
            assert approved.status_code == 302, approved.text[:300]
            session, entered = log_in(hub, user)
            assert entered.status_code == 302 and "/hub/login" not in entered.headers["Location"]
            me = session.get(f"{hub.url}/hub/home", timeout=30, allow_redirects=False)
            assert me.status_code == 200 and user in me.text
