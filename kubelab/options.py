"""Experiment options and TensorBoard requests: declared once for the CLI, the magics and REST.

`kubelab run`, `kubelab render` and `%%train` add the same flags with `add_experiment_options`
and lay them over a spec with `apply_options`; `kubelab tensorboard start`, `%tensorboard`
and `POST /kubelab/api/tensorboards` all go through `tensorboard_request`. A flag means
the same thing, with the same type and the same error, wherever it is typed.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.gpu_share import parse_gpus

FRAMEWORKS = ("none", "pytorch", "tensorflow", "paddle")
TENSORBOARD_SOURCES = ("experiments", "sweep", "query", "project")
# The spec field each experiment option sets, so a bad option is reported as that field.
OPTION_FIELDS = {
    "--name": "name",
    "--gpus": "resources.gpus",
    "--gpu-type": "resources.gpu_type",
    "--cpu": "resources.cpu",
    "--memory": "resources.memory",
    "--image": "image",
    "--replicas": "replicas",
    "--framework": "framework",
    "--param": "param",
    "--tag": "tags",
}


def counted(minimum: int, what: str) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `minimum` (`--gpus -1` is refused here)."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number of {what}, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, not {value}")
        return value

    return convert


def gpu_amount(text: str) -> float:
    """An argparse type for `--gpus`: whole GPUs, or 1/n of one to share it (`--gpus 0.5`)."""
    amount, problem = parse_gpus(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return amount


def one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    """An argparse type that names the choices in its error, as spec validation does."""

    def convert(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(f"must be one of {', '.join(choices)}, not {text!r}")
        return text

    return convert


def param(text: str) -> tuple[str, str]:
    """An argparse type for `-P NAME=VALUE`: the pair, the value still text."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"must be NAME=VALUE, not {text!r}")
    return name.strip(), value


def add_experiment_options(parser: argparse.ArgumentParser | Any) -> None:
    """The flags that describe an experiment (a parser or an argument group)."""
    parser.add_argument("--name")
    parser.add_argument("--gpus", type=gpu_amount, help="GPUs per replica (0.5: half of one, shared)")
    parser.add_argument("--gpu-type", dest="gpu_type")
    parser.add_argument("--cpu", help="CPU per replica, e.g. 2 or 500m")
    parser.add_argument("--memory", help="memory per replica, e.g. 8Gi")
    parser.add_argument("--image")
    parser.add_argument("--replicas", type=counted(1, "replicas"))
    parser.add_argument("--framework", type=one_of(FRAMEWORKS), metavar="{" + ",".join(FRAMEWORKS) + "}")
    parser.add_argument(
        "-P",
        "--param",
        action="append",
        type=param,
        default=[],
        metavar="NAME=VALUE",
        help="a parameter value (repeatable)",
    )
    parser.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")


def option_error(message: str) -> ValidationError | None:
    """argparse's "argument --gpus: REASON" as the error of the field the option sets, or None."""
    found = re.fullmatch(r"argument ([^:]+): (.*)", message, re.S)
    if not found:
        return None
    for name in found.group(1).split("/"):
        if name in OPTION_FIELDS:
            return ValidationError("invalid option", [FieldError(OPTION_FIELDS[name], found.group(2))])
    return None


def parse_params(pairs: list[tuple[str, str]], typed: bool = True) -> dict[str, Any]:
    """`-P lr=0.1 -P act=relu`. With `typed`, numbers and booleans are read as JSON reads
    them; without (the spec declares inputs), text is kept for the declared types to convert,
    so `-P name=007` stays "007" for a string input.
    """
    params: dict[str, Any] = {}
    for name, value in pairs:
        try:
            parsed = json.loads(value) if typed else value
        except ValueError:
            parsed = value
        params[name] = parsed if isinstance(parsed, (int, float, bool)) else value
    return params


def apply_options(spec: Mapping[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """`spec` with the experiment options laid over it; options left as None keep the spec's value."""
    result = dict(spec)
    if args.param:
        params = dict(result.get("params") or {})
        params.update(parse_params(args.param, typed=not result.get("inputs")))
        result["params"] = params
    resources = dict(result.get("resources") or {})
    for flag in ("gpus", "gpu_type", "cpu", "memory"):
        if getattr(args, flag) is not None:
            resources[flag] = getattr(args, flag)
    if resources:
        result["resources"] = resources
    for key in ("name", "replicas", "framework", "image"):
        if getattr(args, key) is not None:
            result[key] = getattr(args, key)
    if args.tag:
        result["tags"] = [*(result.get("tags") or []), *args.tag]
    return result


def add_tensorboard_options(parser: argparse.ArgumentParser) -> None:
    """What a TensorBoard shows: experiment ids, `--sweep ID`, `--query PQL` or `--project`."""
    parser.add_argument("ids", nargs="*", metavar="ID", help="experiment ids")
    parser.add_argument("--sweep", help="every trial of a sweep")
    parser.add_argument("--query", "-q", help="experiments matching a PQL query")
    parser.add_argument("--project", action="store_true", help="every experiment")


def tensorboard_request(args: argparse.Namespace) -> dict[str, Any]:
    """The request body the options describe (checked as the server checks it)."""
    given = {
        "experiments": list(args.ids),
        "sweep": args.sweep,
        "query": args.query,
        "project": bool(args.project),
    }
    chosen = {k: v for k, v in given.items() if v}
    if len(chosen) != 1:  # said in flags, as the user typed them
        raise ValidationError(
            "nothing to show",
            [FieldError("", "give experiment ids, --sweep ID, --query PQL or --project (exactly one)")],
        )
    kind, value = tensorboard_source(chosen)
    return {kind: value}


def tensorboard_source(request: Any) -> tuple[str, Any]:
    """The one source a TensorBoard request names, as (kind, value), or a ValidationError."""
    if not isinstance(request, dict):
        raise ValidationError(
            "invalid TensorBoard request",
            [FieldError("", "must be a mapping with one of experiments, sweep, query or project")],
        )
    problems = [
        FieldError(str(k), "unknown field" + did_you_mean(str(k), TENSORBOARD_SOURCES))
        for k in request
        if k not in TENSORBOARD_SOURCES
    ]
    given = [k for k in TENSORBOARD_SOURCES if k in request and request[k] not in (None, False)]
    if not problems and len(given) != 1:
        problems.append(FieldError("", "give exactly one of experiment ids, sweep, query or project"))
    if problems:
        raise ValidationError("invalid TensorBoard request", problems)
    return given[0], request[given[0]]
