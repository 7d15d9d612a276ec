"""YAML as kubelab reads it: plain data, small, no aliases.

A spec is a few kilobytes written by hand. Aliases (`&a`/`*a`) let a few hundred bytes expand
into millions of nodes (the "billion laughs"), so a document using them is refused by name,
as is a document over `MAX_DOCUMENT_BYTES`; nothing kubelab reads needs either.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_DOCUMENT_BYTES = 1 << 20  # 1 MiB: hundreds of times the largest real spec


class RefusedYaml(yaml.YAMLError):
    """A YAML feature kubelab does not accept; `str()` says which and why."""


class NoAliasLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses aliases and anchors where the parser meets them."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]  # types-PyYAML leaves it unannotated
            mark = event.start_mark
            raise RefusedYaml(
                f"line {mark.line + 1}, column {mark.column + 1}: YAML aliases (*{event.anchor}) "
                "are not supported in kubelab documents; write the value out"
            )
        return super().compose_node(parent, index)


def check_size(text: str | bytes) -> None:
    size = len(text.encode() if isinstance(text, str) else text)
    if size > MAX_DOCUMENT_BYTES:
        raise RefusedYaml(
            f"the document is {size} bytes; kubelab reads documents up to {MAX_DOCUMENT_BYTES} bytes"
        )


def load(text: str, loader: type[NoAliasLoader] = NoAliasLoader) -> Any:
    """Parse one document with `loader` (a `NoAliasLoader`), after the size check."""
    check_size(text)
    return yaml.load(text, Loader=loader)
