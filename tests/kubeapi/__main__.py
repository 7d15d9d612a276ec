"""Run the test API server as a process: `python -m kubeapi --port 0 --kubeconfig PATH`.

Prints the URL (first line) and then the admin token, and serves until interrupted. Test
controls are available over HTTP as `POST /_control/<method>` with a JSON body of keyword
arguments and the admin token (see `control.CONTROL_METHODS`).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading

from .resources import EXTENSIONS
from .server import KubeApiServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubeapi", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--kubeconfig", help="write an admin kubeconfig here")
    parser.add_argument("--namespace", default="default", help="the kubeconfig's namespace")
    parser.add_argument("--extension", action="append", choices=EXTENSIONS, default=[],
                        help="serve an optional API group (repeatable)")
    parser.add_argument("--history-size", type=int, default=10_000)
    args = parser.parse_args(argv)
    server = KubeApiServer(args.host, args.port, extensions=args.extension,
                           history_size=args.history_size).start()
    if args.kubeconfig:
        server.write_kubeconfig(args.kubeconfig, namespace=args.namespace)
    print(server.url, flush=True)
    print(server.admin_token, flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with contextlib.suppress(KeyboardInterrupt):
        done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
