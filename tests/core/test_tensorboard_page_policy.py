"""The sandbox policy and the storage shim, as pure functions (the browser test proves them)."""

from __future__ import annotations

import gzip

from kubelab.tensorboard.sandbox import SANDBOX, SHIM_SOURCE, STORAGE_SHIM, page_policy, with_storage_shim

TENSORBOARDS = "default-src 'self';font-src 'self';script-src 'self' 'unsafe-eval' 'sha256-abc='"


def directives(policy: str) -> dict[str, str]:
    return {d.split()[0]: d for d in (part.strip() for part in policy.split(";")) if d}


def test_tensorboards_own_policy_is_kept_and_allows_the_shim() -> None:
    policy = directives(page_policy(TENSORBOARDS))
    assert policy["script-src"] == f"script-src 'self' 'unsafe-eval' 'sha256-abc=' {SHIM_SOURCE}"
    assert policy["default-src"] == "default-src 'self'" and policy["font-src"] == "font-src 'self'"
    assert policy["sandbox"] == SANDBOX and "allow-same-origin" not in SANDBOX
    assert policy["frame-ancestors"] == "frame-ancestors 'self'"
    assert policy["worker-src"] == "worker-src 'self' blob:"  # the shim's way to start its workers


def test_an_answer_cannot_loosen_the_sandbox_or_its_framing() -> None:
    loose = "sandbox allow-scripts allow-same-origin; frame-ancestors *; default-src 'self' https:"
    policy = directives(page_policy(loose))
    assert policy["sandbox"] == SANDBOX and policy["frame-ancestors"] == "frame-ancestors 'self'"
    assert policy["script-src"] == f"script-src 'self' https: {SHIM_SOURCE}"  # from default-src


def test_a_repeated_directive_counts_once_the_first_as_in_browsers() -> None:
    policy = directives(page_policy("script-src 'none'; script-src *"))
    assert policy["script-src"] == f"script-src 'none' {SHIM_SOURCE}"


def test_an_answer_without_a_policy_is_still_sandboxed() -> None:
    assert page_policy(None) == f"worker-src 'self' blob:; frame-ancestors 'self'; {SANDBOX}"


def test_the_shim_is_the_first_script_of_the_page_gzip_or_not() -> None:
    page = b"<!doctype html><html><HEAD data-x='1'><script src=index.js></script></head></html>"
    for body, encoding in ((page, None), (gzip.compress(page), "gzip")):
        shimmed = with_storage_shim(body, encoding)
        assert shimmed.startswith(b"<!doctype html><html><HEAD data-x='1'><script>" + STORAGE_SHIM.encode())
        assert shimmed.index(STORAGE_SHIM.encode()) < shimmed.index(b"index.js")
    assert with_storage_shim(b"<p>no head</p>", None).startswith(b"<script>")
    fonts = with_storage_shim(b"<style>@font-face{src:url(/font-roboto/a.woff2)}</style>", None)
    assert b"url(font-roboto/a.woff2)" in fonts  # under the page's own path, not the server's root
    assert b"<header>" in with_storage_shim(b"<header>x</header>", None)  # not mistaken for <head>
