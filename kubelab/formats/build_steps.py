"""Image build steps (Polyaxon v0 `build.build_steps`, v1 `dockerfile.run`) as an `environment`.

On one machine a run's packages go into a virtualenv (kubelab.environments), so the steps
that install Python packages with pip are honoured: their packages, requirements files,
`--find-links` and `--index-url` become the environment. A step that needs root or a container
image (apt-get, yum, conda install, a shell script) cannot run there and is refused by name,
with the reason, rather than skipped: the run would fail later without what it installs.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from kubelab.errors import FieldError

SYSTEM = ("apt-get", "apt", "yum", "dnf", "apk", "zypper", "dpkg", "rpm", "brew", "sudo")
PIP = re.compile(r"^(pip3?|python3?(\.\d+)? -m pip|uv pip)$")
IGNORED = {
    "--no-cache-dir",
    "-U",
    "--upgrade",
    "-q",
    "--quiet",
    "--user",
    "--no-warn-script-location",
    "--progress-bar",
    "--disable-pip-version-check",
    "-v",
    "--verbose",
    "--pre",
    "--no-input",
}
# pip (uv installs) and the clients kubelab's shims provide on every run's path (kubelab.shims)
PROVIDED = {"pip", "polyaxon", "polyaxon-client", "polyaxon_client", "nni"}
TAKES_VALUE = {
    "-r": "requirements",
    "--requirement": "requirements",
    "-f": "find_links",
    "--find-links": "find_links",
    "-i": "index_url",
    "--index-url": "index_url",
}


def environment_of(steps: Any, path: str) -> tuple[dict[str, Any], list[FieldError]]:
    """The `environment` that `steps` (a list of shell lines) describe, and what was refused."""
    problems: list[FieldError] = []
    env: dict[str, Any] = {"requirements": [], "packages": [], "find_links": []}
    if isinstance(steps, str):
        steps = [steps]
    if not isinstance(steps, list):
        return {}, [FieldError(path, "must be a list of shell lines (pip install ...)")]
    for index, line in enumerate(steps):
        where = f"{path}[{index}]"
        if not isinstance(line, str):
            problems.append(FieldError(where, "must be a shell line such as 'pip install numpy'"))
            continue
        for command in re.split(r"&&|;|\|\|", line):
            if command.strip():
                _command(command.strip(), where, env, problems)
    unique = list(dict.fromkeys(problems))
    return {k: v for k, v in env.items() if v}, unique


def _command(command: str, where: str, env: dict[str, Any], problems: list[FieldError]) -> None:
    try:
        words = shlex.split(command)
    except ValueError as exc:
        problems.append(FieldError(where, f"cannot be read as a shell line: {exc}"))
        return
    program = words[0].rsplit("/", 1)[-1]
    if program in SYSTEM or (program == "sudo" and len(words) > 1):
        name = words[1] if program == "sudo" and len(words) > 1 else program
        problems.append(
            FieldError(
                where,
                f"{name} installs system packages, which needs root or a container image build: "
                "not done for a run on this machine (pip lines are); use an image that has them",
            )
        )
        return
    head = " ".join(words[:3]) if words[:2] in (["python", "-m"], ["python3", "-m"]) else " ".join(words[:1])
    head = " ".join(words[:2]) if words[0] == "uv" else head
    if not PIP.match(head):
        problems.append(
            FieldError(
                where, f"{program}: only pip install lines build an environment here; this one is not run"
            )
        )
        return
    rest = words[len(head.split()) :]
    if not rest or rest[0] != "install":
        problems.append(
            FieldError(where, f"only 'pip install' builds an environment, not pip {' '.join(rest[:1])}")
        )
        return
    _install(rest[1:], where, env, problems)


def _install(words: list[str], where: str, env: dict[str, Any], problems: list[FieldError]) -> None:
    index = 0
    while index < len(words):
        word = words[index]
        option, _, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if option in TAKES_VALUE:
            value = inline or (words[index + 1] if index + 1 < len(words) else "")
            index += 1 if inline else 2
            if not value:
                problems.append(FieldError(where, f"{option} needs a value"))
            elif TAKES_VALUE[option] == "index_url":
                env["index_url"] = value
            else:
                env[TAKES_VALUE[option]].append(value)
            continue
        if word in IGNORED or option in IGNORED:
            pass
        elif word.startswith("-"):
            problems.append(FieldError(where, f"pip option {word} is not supported here"))
        elif word in (".", "./") or word.startswith(("./", "/")):
            problems.append(
                FieldError(where, f"installing a folder ({word}) is not supported; list packages")
            )
        elif re.split(r"[<>=!~\[ ;]", word, maxsplit=1)[0].lower() in PROVIDED:
            pass  # pip itself (uv installs), or what kubelab's shims provide to every run
        else:
            env["packages"].append(word)
        index += 1
