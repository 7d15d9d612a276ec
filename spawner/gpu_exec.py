"""`python -m kubelab.spawner.gpu_exec --run NAME --gpus N [--type T] -- COMMAND...`

Takes GPUs from the machine-wide ledger (`kubelab.backends.local.gpus.GpuAllocator`) for its own
pid, sets `CUDA_VISIBLE_DEVICES` (a share of one GPU, 1/n, is told in `KUBELAB_GPU_FRACTION` as a
run's share is), then replaces itself with COMMAND. The pid stays the same across exec, so
the ledger's holder is the notebook server itself: when it exits, however it exits, its GPUs come
back to experiments and other notebooks.
"""

from __future__ import annotations

import argparse
import os
import sys

from kubelab.backends.local.gpus import GpuAllocator
from kubelab.gpu_share import is_fraction, parse_gpus

GPUS_TAKEN = 3


def gpu_amount(text: str) -> float:
    """Whole GPUs or a 1/n share, as a run's `resources.gpus` (kubelab.gpu_share)."""
    amount, why = parse_gpus(text)
    if why:
        raise argparse.ArgumentTypeError(why)
    return amount


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubelab.spawner.gpu_exec")
    parser.add_argument("--run", required=True, help="the ledger name, e.g. notebook/alice/public/")
    parser.add_argument("--gpus", type=gpu_amount, default=0)
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
        if is_fraction(args.gpus):
            os.environ["KUBELAB_GPU_FRACTION"] = f"{args.gpus:.6g}"
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.execvp(command[0], command)
    return 0  # pragma: no cover - exec does not return


if __name__ == "__main__":
    sys.exit(main())
