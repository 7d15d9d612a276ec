"""`%serve`: `kubelab serve`'s flags from a notebook; the service's state, URL and lineage shown
under the cell once it answers (or its reason, once it failed).

Inside a kubelab Jupyter server the kernel asks the server (`POST /kubelab/api/services`), so
the URL is the proxy's behind the user's login; in a plain IPython it starts the service itself
(`Services`, as the CLI does), reached on loopback.
"""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Any

from IPython.display import display

from kubelab.magics import options
from kubelab.serving.cli import add_serve_options, serve_request

ENDED_OR_RUNNING = ("Running", "Failed", "Stopped")
WAIT = 120.0  # seconds `%serve` waits for a service to answer


class ServiceView:
    """A service under the cell: text in a terminal, a small card with its link in a frontend."""

    def __init__(self, view: dict[str, Any], url: str) -> None:
        self.view, self.url = view, url

    def lines(self) -> list[str]:
        view, lineage = self.view, self.view.get("lineage") or {}
        reason = f" ({view['reason']})" if view.get("reason") else ""
        found = [f"service {view['id']}: {view['state']}{reason}", f"  url: {self.url}"]
        if view.get("endpoint") and view["state"] == "Running":
            found.append(f"  predict: POST {self.url}{view['endpoint']}")
        if lineage.get("file"):
            source = f"run {lineage['run']}, " if lineage.get("run") else ""
            found.append(f"  serves: {source}{lineage['file']}")
        return found

    def __repr__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        first, *rest = self.lines()
        link = f'<a href="{html.escape(self.url)}" target="_blank" rel="noopener">{html.escape(self.url)}</a>'
        items = "".join(f"<li>{html.escape(line.strip())}</li>" for line in rest[1:])
        return f"<div class='kubelab-service'><b>{html.escape(first)}</b> {link}<ul>{items}</ul></div>"


def run(magics: Any, line: str) -> None:
    parser = options.MagicParser("serve", "Serve a run's model, a predictor class, or a command.")
    add_serve_options(parser)
    args = parser.read(line)
    if args is None:
        return
    data, base = serve_request(args)
    base_dir = base or Path.cwd()
    service = magics.service
    if service.remote:
        client = service.client
        view = client.record("POST", "services", json=data, params=client.cwd_param(base_dir))
        deadline = time.monotonic() + (0 if args.no_wait else WAIT)
        while view["state"] not in ENDED_OR_RUNNING and time.monotonic() < deadline:
            time.sleep(0.1)
            view = client.record("GET", f"services/{view['id']}")
        display(ServiceView(view, client.page_url(view["url"])))
        return
    from kubelab.serving.cluster import services as for_backend

    services = for_backend(lab=service.lab)  # the cluster's where the backend has a namespace
    view = services.start(data, base_dir=base_dir)
    if not args.no_wait:
        view = services.wait(view["id"], WAIT)
    ports = [r["port"] for r in view["replicas"] if r["state"] == "Ready"]
    local = f"http://127.0.0.1:{ports[0]}/" if ports else view["url"]
    display(ServiceView(view, view["url"] if view["url"].startswith("http") else local))
