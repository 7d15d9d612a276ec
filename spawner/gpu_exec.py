"""`python -m kubelab.spawner.gpu_exec --run NAME --gpus N [--type T] -- COMMAND...`

Takes GPUs from the machine-wide ledger (`kubelab.backends.local.gpus.GpuAllocator`) for its own pid, sets
`CUDA_VISIBLE_DEVICES`, then replaces itself with COMMAND. The pid stays the same across exec, so
the ledger's holder is the notebook server itself: when it exits, however it exits, its GPUs come
back to experiments and other notebooks.
"""

from __future__ import annotations

import argparse
import os
import sys

from kubelab.backends.local.gpus import GpuAllocator

GPUS_TAKEN = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubelab.spawner.gpu_exec")
    parser.add_argument("--run", required=True, help="the ledger name, e.g. notebook/alice/public/")
    parser.add_argument("--gpus", type=int, default=0)
    parser.add_argument("--type", default=None)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a COMMAND after -- is required")
    if args.gpus:
        allocator = GpuAllocator()
        try:
            chosen = allocator.try_acquire(args.run, os.getpid(), args.gpus, args.type or None)
        except ValueError as exc:
            print(f"kubelab: {exc}", file=sys.stderr)
            return GPUS_TAKEN
        if chosen is None:  # taken since the form checked: do not wait in the queue
            allocator.release(args.run)
            kind = f" {args.type}" if args.type else ""
            print(
                f"kubelab: the {args.gpus}{kind} GPU(s) were taken before this server started",
                file=sys.stderr,
            )
            return GPUS_TAKEN
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in chosen)
        os.environ["KUBELAB_NOTEBOOK_GPUS"] = os.environ["CUDA_VISIBLE_DEVICES"]
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.execvp(command[0], command)
    return 0  # pragma: no cover - exec does not return


if __name__ == "__main__":
    sys.exit(main())
