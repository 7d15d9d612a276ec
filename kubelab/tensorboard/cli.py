"""`kubelab tensorboard start|ls|stop`.

Sessions live in a Jupyter server (it supervises and proxies them), so with
`KUBELAB_API_URL` set these commands talk to it. Without a server, `start` runs the
session in the foreground on a loopback port until Ctrl-C, as `tensorboard` itself does.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

from kubelab.cli_output import say
from kubelab.errors import FieldError, ValidationError
from kubelab.options import add_tensorboard_options, tensorboard_request


def _client() -> Any:
    from kubelab.rest_client import RestClient

    return RestClient()


def _print(session: dict[str, Any], output: str | None, url: str) -> None:
    if output == "json":
        say(json.dumps(session, indent=2))
        return
    say(f"{session['id']}  {session['state']:9} {url}  runs: {', '.join(session['logdirs'])}")


def cmd_start(args: argparse.Namespace) -> int:
    from kubelab.rest_client import RestClient

    request = tensorboard_request(args)
    if RestClient.available():
        client = _client()
        session = client.tensorboard(request)
        _print(session, args.output, client.page_url(session["url"]))
        return 0
    from kubelab.experiments import Experiments
    from kubelab.tensorboard.session import RUNNING
    from kubelab.tensorboard.supervisor import TensorBoardSupervisor

    supervisor = TensorBoardSupervisor(Experiments())
    session = supervisor.start(request)
    if not supervisor.wait_ready(session, timeout=60):
        say(f"kubelab: TensorBoard did not start: {supervisor.log_tail(session)}", file=sys.stderr)
        supervisor.stop_all()
        return 1
    served = {**session.to_json(), "url": session.direct_url}
    _print(served, args.output, served["url"])
    say("(no Jupyter server: serving here until Ctrl-C)", file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        while supervisor.check(session) == RUNNING:
            time.sleep(0.5)
        say(f"kubelab: TensorBoard ended: {session.reason}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        supervisor.stop_all()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _needs_server() -> None:
    from kubelab.rest_client import RestClient

    if not RestClient.available():
        raise ValidationError(
            "no Jupyter server",
            [
                FieldError(
                    "KUBELAB_API_URL",
                    "sessions live in a Jupyter server; run this from its terminal or set "
                    "KUBELAB_API_URL and KUBELAB_API_TOKEN",
                )
            ],
        )


def cmd_ls(args: argparse.Namespace) -> int:
    _needs_server()
    client = _client()
    items = client.tensorboards()
    if args.output == "json":
        say(json.dumps({"items": items}, indent=2))
    for session in [] if args.output == "json" else items:
        _print(session, None, client.page_url(session["url"]))
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    _needs_server()
    session = _client().stop_tensorboard(args.id)
    if args.output == "json":
        say(json.dumps(session, indent=2))
    else:
        say(f"stopped {session['id']}")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "tensorboard", help="TensorBoard sessions", description="Start, list and stop TensorBoard sessions."
    )
    sub = parser.add_subparsers(dest="tensorboard_cmd", required=True, metavar="ACTION")
    start = sub.add_parser("start", help="start (or reuse) a session")
    add_tensorboard_options(start)
    start.set_defaults(handler=cmd_start)
    ls = sub.add_parser("ls", help="list sessions")
    ls.set_defaults(handler=cmd_ls)
    stop = sub.add_parser("stop", help="stop a session")
    stop.add_argument("id")
    stop.set_defaults(handler=cmd_stop)
    for p in (start, ls, stop):
        p.add_argument("-o", "--output", choices=("json",))
