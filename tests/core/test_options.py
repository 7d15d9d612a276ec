"""One declaration of the experiment options and TensorBoard requests, for the CLI, the
magics and the REST layer: the same flag gives the same value or the same error everywhere."""

from __future__ import annotations

import argparse
from typing import Any, cast

import pytest
from IPython.core.error import UsageError

from kubelab import cli, options
from kubelab.errors import ValidationError
from kubelab.magics import options as magic_options
from kubelab.magics import train
from kubelab.tensorboard import cli as tensorboard_cli


def cli_run(words: list[str]) -> argparse.Namespace:
    return cli.build_parser().parse_args(["run", *words])


def experiment_flags(parser: argparse.ArgumentParser) -> dict[str, tuple[Any, ...]]:
    """Each experiment option with what argparse knows of it (type, choices, action)."""
    names = {
        "--name",
        "--gpus",
        "--gpu-type",
        "--cpu",
        "--memory",
        "--image",
        "--replicas",
        "--framework",
        "--priority",
        "--param",
        "--tag",
    }
    return {
        opt: (a.dest, a.type, a.choices, type(a).__name__, a.default)
        for a in parser._actions
        for opt in a.option_strings
        if opt in names
    }


def test_cli_and_train_magic_declare_the_same_options() -> None:
    run_parser = cast(Any, cli.build_parser())._subparsers._group_actions[0].choices["run"]
    cli_flags = experiment_flags(run_parser)
    magic_flags = experiment_flags(magic_options.train_parser())
    assert len(cli_flags) == 11

    # the same dests, choices and actions; types are the same functions' closures, so compare by name
    def comparable(flags: dict[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
        return {k: (d, getattr(t, "__qualname__", t), c, a, df) for k, (d, t, c, a, df) in flags.items()}

    assert comparable(cli_flags) == comparable(magic_flags)


def test_the_same_line_gives_the_same_spec() -> None:
    line = [
        "--gpus",
        "2",
        "--replicas",
        "3",
        "-P",
        "lr=0.1",
        "-P",
        "act=relu",
        "-P",
        "name=a=b",
        "--tag",
        "x",
        "--framework",
        "pytorch",
        "--memory",
        "8Gi",
        "--priority",
        "low",
    ]
    from_cli = options.apply_options({"command": ["python", "t.py"]}, cli_run(line))
    args = magic_options.train_parser().read(" ".join(line))
    assert args is not None
    from_magic = train.overrides(args, {"command": ["python", "t.py"]})
    assert (
        from_cli
        == from_magic
        == {
            "command": ["python", "t.py"],
            "params": {"lr": 0.1, "act": "relu", "name": "a=b"},
            "resources": {"gpus": 2, "memory": "8Gi"},
            "replicas": 3,
            "framework": "pytorch",
            "tags": ["x"],
            "priority": "low",
        }
    )


def test_params_keep_text_for_declared_inputs() -> None:
    args = cli_run(["-P", "code=7", "-P", "on=true"])
    assert options.apply_options({"inputs": [{"name": "code"}]}, args)["params"] == {
        "code": "7",
        "on": "true",
    }
    assert options.apply_options({}, args)["params"] == {"code": 7, "on": True}


@pytest.mark.parametrize(
    "words, message",
    [
        (["--gpus", "-1"], "must be 0 or more"),
        (["--gpus", "two"], "must be a whole number of GPUs"),
        (["-P", "lr"], "must be NAME=VALUE"),
        (
            ["--framework", "jax"],
            "must be one of none, pytorch, tensorflow, paddle, keras, scikit-learn, xgboost, pytorch-ignite, mxnet, not 'jax'",
        ),
        (["--priority", "urgent"], "must be low, normal, high or a whole number, not 'urgent'"),
        (["--priority", "2000000000"], "must be between 0 and 1000000000"),
    ],
)
def test_a_bad_option_fails_the_same_way_in_both(words: list[str], message: str) -> None:
    with pytest.raises(ValidationError) as caught:  # the CLI reports it as the field it sets
        cli_run(words)
    assert message in caught.value.fields[0].reason
    with pytest.raises(UsageError, match=message):
        magic_options.train_parser().read(" ".join(words))


def read(parser: magic_options.MagicParser, line: str) -> argparse.Namespace:
    args = parser.read(line)
    assert args is not None
    return args


def test_tensorboard_requests_are_one_grammar() -> None:
    start = argparse.ArgumentParser()
    options.add_tensorboard_options(start)
    magic = magic_options.tensorboard_parser()
    for line in (["a", "b"], ["--sweep", "s1"], ["--query", "status:failed"], ["--project"]):
        expected = options.tensorboard_request(start.parse_args(line))
        assert magic_options.tensorboard_request(magic, read(magic, " ".join(line))) == expected
    assert options.tensorboard_request(start.parse_args(["--sweep", "s1"])) == {"sweep": "s1"}
    with pytest.raises(ValidationError, match="nothing to show"):
        options.tensorboard_request(start.parse_args(["a", "--project"]))
    with pytest.raises(UsageError, match="exactly one"):
        magic_options.tensorboard_request(magic, read(magic, "a --project"))
    # the server's check is the same function
    with pytest.raises(ValidationError) as caught:
        options.tensorboard_source({"experiments": ["a"], "colour": "red"})
    assert caught.value.fields[0].path == "colour"
    assert vars(tensorboard_cli)["tensorboard_request"] is options.tensorboard_request
