"""Whether an image tag is already in the lab's registry: one question, behind a narrow interface.

`Registry.has(image)` asks the registry's HTTP API (Distribution v2: `HEAD
/v2/<repository>/manifests/<tag>`), with the credential of a mounted Docker config file (the
admin's Secret), answering a `Bearer` challenge by the token endpoint it names. Tests point it at
a real registry; a backend takes any object with `has`.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Protocol

from kubelab.errors import KubelabError

MANIFESTS = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
TIMEOUT = 10.0


class TagLookup(Protocol):
    def has(self, image: str) -> bool: ...


def split(image: str) -> tuple[str, str, str]:
    """`host[:port]/repo/path:tag` as (host, repository, tag)."""
    host, _, rest = image.partition("/")
    repository, _, tag = rest.rpartition(":")
    if not rest or not repository or not tag or "/" in tag:
        raise KubelabError(f"{image!r} is not host/repository:tag")
    return host, repository, tag


class Registry:
    """A Distribution v2 registry; `auth_file` is a Docker config (`{"auths": {host: ...}}`)."""

    def __init__(self, auth_file: str | None = None, scheme: str = "https") -> None:
        self.auth_file = auth_file
        self.scheme = scheme

    def _basic(self, host: str) -> str | None:
        if not self.auth_file:
            return None
        try:
            auths = json.loads(Path(self.auth_file).read_text()).get("auths") or {}
        except (OSError, ValueError) as exc:
            raise KubelabError(f"cannot read the registry credential {self.auth_file}: {exc}") from exc
        entry = auths.get(host) or auths.get(f"https://{host}") or {}
        if entry.get("auth"):
            return str(entry["auth"])
        if entry.get("username"):
            return base64.b64encode(f"{entry['username']}:{entry.get('password', '')}".encode()).decode()
        return None

    def has(self, image: str) -> bool:
        host, repository, tag = split(image)
        url = f"{self.scheme}://{host}/v2/{repository}/manifests/{urllib.parse.quote(tag)}"
        basic = self._basic(host)
        headers = {"Accept": MANIFESTS}
        if basic:
            headers["Authorization"] = f"Basic {basic}"
        status, challenge = _head(url, headers)
        if status == 401 and challenge.lower().startswith("bearer "):
            headers["Authorization"] = f"Bearer {self._token(challenge, basic)}"
            status, challenge = _head(url, headers)
        if status == 200:
            return True
        if status == 404:
            return False
        raise KubelabError(f"the registry {host} answered {status} when asked for {repository}:{tag}")

    def _token(self, challenge: str, basic: str | None) -> str:
        fields = dict(
            (key.strip(), value.strip().strip('"'))
            for key, _, value in (part.partition("=") for part in challenge[7:].split(","))
        )
        query = urllib.parse.urlencode({k: v for k, v in fields.items() if k in ("service", "scope")})
        request = urllib.request.Request(f"{fields.get('realm', '')}?{query}")
        if basic:
            request.add_header("Authorization", f"Basic {basic}")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                body = json.load(response)
        except (OSError, ValueError) as exc:
            raise KubelabError(f"the registry's token service refused: {exc}") from exc
        return str(body.get("token") or body.get("access_token") or "")


def _head(url: str, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return int(response.status), ""
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("WWW-Authenticate", "")
    except OSError as exc:
        raise KubelabError(f"cannot reach the registry at {url.split('/v2/')[0]}: {exc}") from exc
