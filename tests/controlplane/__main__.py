"""`scripts/cluster --kubeconfig PATH`: a real control plane on this machine, by hand.

Builds what is missing, starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
KWOK (simulated A100, T4 and CPU nodes) on loopback, writes an admin kubeconfig to PATH, prints
PATH once everything is ready, and stops everything on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from .cluster import ControlPlane


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, required=True, help="where to write the admin kubeconfig")
    parser.add_argument(
        "--complete-after",
        type=float,
        metavar="SECONDS",
        help="a Job's pods succeed after this long unless annotated otherwise "
        "(default: they run until annotated; see docs/kubernetes.md)",
    )
    args = parser.parse_args(argv)
    done = threading.Event()

    def finish(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    workdir = Path(tempfile.mkdtemp(prefix="kubelab-cluster-"))
    try:
        with ControlPlane(workdir, complete_after=args.complete_after) as plane:
            args.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(plane.kubeconfig, args.kubeconfig)
            args.kubeconfig.chmod(0o600)
            print(f"control plane ready at {plane.server}; kubeconfig: {args.kubeconfig}", flush=True)
            print(f"(logs in {workdir / 'logs'}; Ctrl-C or SIGTERM stops everything)", flush=True)
            done.wait()
            print("stopping", flush=True)
    except (RuntimeError, TimeoutError) as error:
        print(f"scripts/cluster: {error}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
