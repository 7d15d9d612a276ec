"""A real image registry on loopback for tests: Debian's `docker-registry` (the CNCF Distribution
server) over plain HTTP, and a way to put a minimal image into it through its HTTP API."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

BINARY = "docker-registry"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def local_registry(folder: Path, read_only: bool = False) -> Iterator[str]:
    """A registry serving `folder`; yields its `host:port`. `read_only` refuses every push."""
    if shutil.which(BINARY) is None:
        pytest.skip(f"no {BINARY} here: apt-get install docker-registry (Debian's Distribution server)")
    port = free_port()
    readonly = "\n  maintenance:\n    readonly:\n      enabled: true" if read_only else ""
    config = folder / "registry.yml"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {folder / 'data'}{readonly}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    with (folder / "registry.log").open("ab") as log:
        process = subprocess.Popen([BINARY, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1).close()
                break
            except (OSError, urllib.error.HTTPError):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise AssertionError((folder / "registry.log").read_text()) from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


def _blob(host: str, repository: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    start = urllib.request.Request(f"http://{host}/v2/{repository}/blobs/uploads/", method="POST")
    with urllib.request.urlopen(start) as answer:
        location = answer.headers["Location"]
    separator = "&" if "?" in location else "?"
    url = location if location.startswith("http") else f"http://{host}{location}"
    put = urllib.request.Request(f"{url}{separator}digest={digest}", data=data, method="PUT")
    put.add_header("Content-Type", "application/octet-stream")
    urllib.request.urlopen(put).close()
    return digest


def put_image(host: str, repository: str, tag: str) -> None:
    """An OCI image with an empty config and no layers, tagged `tag`."""
    config = b"{}"
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": _blob(host, repository, config),
            "size": len(config),
        },
        "layers": [],
    }
    request = urllib.request.Request(
        f"http://{host}/v2/{repository}/manifests/{tag}", data=json.dumps(manifest).encode(), method="PUT"
    )
    request.add_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
    urllib.request.urlopen(request).close()
