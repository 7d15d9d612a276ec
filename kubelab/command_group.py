"""A `kubelab NOUN COMMAND` group: the one way the pipeline, schedule and sweep CLIs declare
their commands, each taking `-o json` before or after the command."""

from __future__ import annotations

import argparse
from collections.abc import Callable

Handler = Callable[[argparse.Namespace], int]


class CommandGroup:
    def __init__(
        self,
        subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
        noun: str,
        help: str,
        description: str,
        required: bool = True,
    ) -> None:
        self.parser = subparsers.add_parser(noun, help=help, description=description)
        self.parser.add_argument("-o", "--output", choices=("json",))
        self.commands = self.parser.add_subparsers(
            dest=f"{noun}_command", metavar="COMMAND", required=required
        )

    def command(self, name: str, handler: Handler, help: str) -> argparse.ArgumentParser:
        """A command whose own `-o` keeps one given before it (`kubelab NOUN -o json ls`)."""
        p = self.commands.add_parser(name, help=help, description=help)
        p.set_defaults(handler=handler)
        p.add_argument("-o", "--output", choices=("json",), default=argparse.SUPPRESS)
        return p
