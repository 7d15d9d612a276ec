"""`kubelab diff`, `kubelab reopen`, `kubelab tag`, `kubelab note` and `kubelab resume`: comparing,
reopening, annotating and resuming runs (docs/reproducibility.md). Mounted by `kubelab.cli`
through `_extensions()`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kubelab.cli_output import emit, grid, say


def _lab() -> Any:
    from kubelab.experiments import Experiments

    return Experiments()


def _value(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def render_diff(diff: dict[str, Any], code: bool = True) -> str:
    """The comparison as text for a terminal (every line cleaned by `say`)."""
    a, b = diff["a"], diff["b"]
    lines = [f"a: {a['id']} {a['name']} ({a['status']})", f"b: {b['id']} {b['name']} ({b['status']})", ""]
    lines.append("params:" if diff["params"] else "params: the same")
    if diff["params"]:
        lines.append(
            grid(
                [("  NAME", "A", "B")]
                + [(f"  {p['name']}", _value(p["a"]), _value(p["b"])) for p in diff["params"]]
            )
        )
    if diff["metrics"]:
        rows = [("  METRIC", "A", "B", "B-A")]
        rows += [
            (f"  {m['name']}", _value(m["a"]), _value(m["b"]), _value(m["delta"])) for m in diff["metrics"]
        ]
        lines += ["", "metrics:", grid(rows)]
    lines += ["", *_environment_lines(diff["environment"])]
    if code:
        lines += ["", "code:" if diff["code"] else "code: the same"]
        for entry in diff["code"]:
            lines.append(f"  {entry['change']}: {entry['path']}")
            if entry.get("text"):
                lines.append(entry["text"].rstrip("\n"))
    return "\n".join(lines)


def _environment_lines(env: dict[str, Any]) -> list[str]:
    if not any(env["recorded"].values()):
        return ["environment: not recorded for either run"]
    lines = ["environment:"]
    python = env["python"]
    same = "the same" if python["a"] == python["b"] else "differs"
    lines.append(f"  python: {python['a'] or '-'} -> {python['b'] or '-'} ({same})")
    packages = env["packages"]
    if not any(packages.values()):
        lines.append("  packages: the same")
    for name, version in packages["added"].items():
        lines.append(f"  + {name} {version}")
    for name, version in packages["removed"].items():
        lines.append(f"  - {name} {version}")
    for name, (old, new) in packages["changed"].items():
        lines.append(f"  ~ {name} {old} -> {new}")
    for section in ("gpu", "image"):
        if section in env:
            lines.append(f"  {section}: {env[section]['a']} -> {env[section]['b']}")
    git = env["git"]
    commits = [
        g["commit"][:12] + (" + changes" if g.get("dirty") else "") if g and g.get("commit") else "-"
        for g in (git["a"], git["b"])
    ]
    lines.append(f"  git: {commits[0]} -> {commits[1]}")
    return lines


def _commit(git: dict[str, Any] | None) -> str:
    if not git or not git.get("commit"):
        return "-"
    return str(git["commit"])[:12] + (" + uncommitted changes" if git.get("dirty") else "")


def cmd_diff(args: argparse.Namespace) -> int:
    diff = _lab().diff(args.a, args.b)
    if args.output == "json":
        emit(diff, "json")
    else:
        say(render_diff(diff, code=not args.no_code))
    return 0


def cmd_reopen(args: argparse.Namespace) -> int:
    made = _lab().reopen(args.id, Path(args.dest).resolve())
    if args.output == "json":
        emit(made, "json")
        return 0
    say(f"reopened {made['id']} as {made['dest']}")
    if made["notebooks"]:
        say(f"parameters filled into {', '.join(made['notebooks'])} (cell tagged injected-parameters)")
    say(f"run it again: kubelab run -f {Path(made['dest']) / made['spec_file']}")
    return 0


def cmd_tag(args: argparse.Namespace) -> int:
    from kubelab.run_notes import parse_tag_edits

    add, remove = parse_tag_edits(args.edits)
    record = _lab().annotate(args.id, add, remove)
    if args.output == "json":
        emit(record, "json")
    else:
        say(f"{record['id']} tags: {', '.join(record['tags']) or '(none)'}")
    return 0


def cmd_note(args: argparse.Namespace) -> int:
    record = _lab().annotate(args.id, note=" ".join(args.text))
    if args.output == "json":
        emit(record, "json")
    else:
        say(f"{record['id']} note: {record['note'] or '(none)'}")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    record = _lab().resume(args.id)
    if args.output == "json":
        emit(record, "json")
    else:
        say(f"{record['id']} {record['status']}: {record['reason']}")
    return 0


def tag_words(argv: list[str]) -> list[str]:
    """`tag RUN -b +a -o json` as `tag -o json RUN -- -b +a`: argparse would read `-b` as an option."""
    options: list[str] = []
    rest: list[str] = []
    words = iter(argv[1:])
    for word in words:
        if word in ("-o", "--output"):
            options += [word, next(words, "")]
        elif word.startswith("--output=") or word in ("-h", "--help"):
            options.append(word)
        elif word != "--":
            rest.append(word)
    return ["tag", *options, *rest[:1], "--", *rest[1:]] if rest else ["tag", *options]


def register(sub: Any) -> None:
    def command(name: str, handler: Any, help: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
        p.set_defaults(handler=handler)
        p.add_argument("-o", "--output", choices=("json",))
        return p

    p = command("diff", cmd_diff, "compare two runs: params, metrics, environment and code")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--no-code", action="store_true", help="leave the file diffs out")
    p = command("reopen", cmd_reopen, "copy a run's code into a new folder with its parameters filled in")
    p.add_argument("id")
    p.add_argument("dest", help="a new (or empty) folder")
    p = command("tag", cmd_tag, "add (+name) or remove (-name) a run's tags")
    p.add_argument("id")
    p.add_argument("edits", nargs="+", metavar="+TAG|-TAG")
    p = command("resume", cmd_resume, "start a stopped run again from its latest checkpoint")
    p.add_argument("id")
    p = command("note", cmd_note, "set a run's note (an empty text clears it)")
    p.add_argument("id")
    p.add_argument("text", nargs="*")
