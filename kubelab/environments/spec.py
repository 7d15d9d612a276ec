"""The spec's `environment` and `init` groups: declared once, read by the parser, the schema and
the sidebar's vocabulary like every other group of fields (`field_reader.about`).

Parsing is pure: files named here are read, and their content hashed, when a run is submitted
(`kubelab.environments.resolve`), not here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kubelab.errors import type_name
from kubelab.field_reader import FieldReader, about

PYTHON_VERSION = re.compile(r"^3\.\d{1,2}(\.\d{1,3})?$")
STRINGS = [{"type": "string"}]  # one file or package may be given as a plain string
MAX_ITEMS = 500
# git transports a spec may name; `ext::` runs a command and is never allowed
GIT_URL = re.compile(r"^(https?://|ssh://|git://|file://|/|[\w.-]+@[\w.-]+:)")
CHMOD = re.compile(r"^0?[0-7]{3}$")


@dataclass
class Environment:
    """A virtualenv the run's command runs in, built once per content hash and reused."""

    requirements: list[str] = field(
        default_factory=list,
        metadata=about("requirements files (pip's -r), relative to the code or working directory", STRINGS),
    )
    packages: list[str] = field(
        default_factory=list, metadata=about("packages to install, e.g. numpy==2.1 or scikit-learn", STRINGS)
    )
    python: str | None = field(
        default=None, metadata=about("the Python version, e.g. 3.11 (default: kubelab's own)")
    )
    conda: str | None = field(
        default=None,
        metadata=about("a conda environment.yml (built with micromamba or conda, where installed)"),
    )
    find_links: list[str] = field(
        default_factory=list, metadata=about("folders or pages of wheels to install from (pip's -f)", STRINGS)
    )
    index_url: str | None = field(default=None, metadata=about("the package index (pip's --index-url)"))

    @property
    def empty(self) -> bool:
        return not (self.requirements or self.packages or self.python or self.conda)


@dataclass
class GitSource:
    """A repository cloned into the run's code folder."""

    url: str = field(metadata=about("the repository: https://, ssh://, git@host:path or a local path"))
    revision: str | None = field(default=None, metadata=about("a branch, tag or commit (default: HEAD)"))


@dataclass
class ArtifactsSource:
    """Another run's outputs, copied into this run's code folder."""

    run: str = field(metadata=about("the run id whose outputs/ are copied"))
    files: list[str] = field(default_factory=list, metadata=about("only these files of its outputs"))
    dirs: list[str] = field(default_factory=list, metadata=about("only these folders of its outputs"))


@dataclass
class FileSource:
    """A file written from the spec's own text."""

    filename: str = field(metadata=about("the file's name"))
    content: str = field(default="", metadata=about("its text"))
    chmod: str | None = field(default=None, metadata=about("its mode, e.g. 0755"))


@dataclass
class InitStep:
    """One thing done in the run's code folder before the command: exactly one source."""

    git: GitSource | None = field(default=None, metadata=about("clone a repository"))
    artifacts: ArtifactsSource | None = field(default=None, metadata=about("copy another run's outputs"))
    file: FileSource | None = field(default=None, metadata=about("write a file"))
    paths: list[str] | None = field(
        default=None, metadata=about("files or folders of your workspace to copy", STRINGS)
    )
    path: str | None = field(
        default=None, metadata=about("where in the run's code folder (default: the repository's name)")
    )


INIT_SOURCES = ("git", "artifacts", "file", "paths")


class EnvironmentReader(FieldReader):
    """Reads `environment` and `init` for `ExperimentSpec.parse`, into its error list."""

    def environment(self, value: Any) -> Environment | None:
        if value is None:
            return None
        if isinstance(value, list):  # a list of packages, the short form
            value = {"packages": value}
        if not isinstance(value, dict):
            what = "a mapping (requirements, packages, python)"
            self.fail("environment", f"must be {what}, not {type_name(value)}")
            return None
        self.known("environment", value, tuple(Environment.__dataclass_fields__))
        env = Environment()
        env.requirements = self.names("environment.requirements", value.get("requirements"), relative=True)
        env.packages = self.names("environment.packages", value.get("packages"))
        env.find_links = self.names("environment.find_links", value.get("find_links"))
        env.python = self.text(value, "python", None, path="environment.python")
        if env.python is not None and not PYTHON_VERSION.match(str(env.python)):
            self.fail("environment.python", f"must be a Python version such as 3.11, not {env.python!r}")
        env.conda = self.text(value, "conda", None, path="environment.conda")
        if env.conda is not None:
            self.relative("environment.conda", env.conda)
        env.index_url = self.text(value, "index_url", None, path="environment.index_url")
        for where, address in [("environment.index_url", env.index_url or "")] + [
            ("environment.find_links", link) for link in env.find_links
        ]:
            if re.match(r"^[a-z]+://[^/@]*:[^/@]*@", address):
                self.fail(
                    where, "holds a password or token: keep it in uv's settings or a netrc, not the spec"
                )
        if env.index_url is not None and not re.match(r"^(https?|file)://", env.index_url):
            self.fail("environment.index_url", "must be an http(s):// or file:// address")
        if env.conda and (env.requirements or env.packages or env.python):
            self.fail("environment.conda", "a conda environment file stands alone: list pip packages in it")
        return None if env.empty else env

    def init_steps(self, value: Any) -> list[InitStep]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail("init", f"must be a list of steps ({', '.join(INIT_SOURCES)}), not {type_name(value)}")
            return []
        steps = []
        for index, item in enumerate(value):
            where = f"init[{index}]"
            if not isinstance(item, dict):
                self.fail(where, f"must be a mapping with one of {', '.join(INIT_SOURCES)}")
                continue
            self.known(where, item, tuple(InitStep.__dataclass_fields__))
            given = [key for key in INIT_SOURCES if item.get(key) is not None]
            if len(given) != 1:
                self.fail(where, f"give exactly one of {', '.join(INIT_SOURCES)}, not {len(given)}")
                continue
            step = InitStep(path=self.text(item, "path", None, path=f"{where}.path"))
            if step.path is not None:
                self.relative(f"{where}.path", step.path)
            reader = getattr(self, f"_{given[0]}")
            setattr(step, given[0], reader(f"{where}.{given[0]}", item[given[0]]))
            steps.append(step)
        return steps

    def _git(self, where: str, value: Any) -> GitSource | None:
        if isinstance(value, str):
            value = {"url": value}
        if not isinstance(value, dict):
            self.fail(where, "must be a mapping with url (and revision)")
            return None
        self.known(where, value, ("url", "revision", "flags"))
        url = self.text(value, "url", None, path=f"{where}.url")
        revision = self.text(value, "revision", None, path=f"{where}.revision", limit=256)
        if value.get("flags"):
            self.fail(f"{where}.flags", "git flags are not supported: name a revision")
        if not url:
            self.fail(f"{where}.url", "is required")
            return None
        if not GIT_URL.match(url) or url.startswith("-"):
            what = "an https://, ssh://, git://, file:// address, git@host:path or a path"
            self.fail(f"{where}.url", f"must be {what}")
        elif re.match(r"^[a-z]+://[^/@]*:[^/@]*@", url):
            self.fail(
                f"{where}.url",
                "holds a password or token: keep credentials in your workspace's git credential store, "
                "never in the spec",
            )
        if revision is not None and (revision.startswith("-") or not revision.strip()):
            self.fail(f"{where}.revision", f"must be a branch, tag or commit, not {revision!r}")
        return GitSource(url=url, revision=revision)

    def _artifacts(self, where: str, value: Any) -> ArtifactsSource | None:
        if isinstance(value, str):
            value = {"run": value}
        if not isinstance(value, dict):
            self.fail(where, "must be a mapping with run (an id), files and dirs")
            return None
        self.known(where, value, tuple(ArtifactsSource.__dataclass_fields__))
        run = value.get("run")
        if not isinstance(run, str) or not re.match(r"^[0-9a-z]{12}$", run):
            self.fail(f"{where}.run", f"must be a run id (12 characters), not {run!r}")
            return None
        files = self.names(f"{where}.files", value.get("files"), relative=True)
        dirs = self.names(f"{where}.dirs", value.get("dirs"), relative=True)
        return ArtifactsSource(run=run, files=files, dirs=dirs)

    def _file(self, where: str, value: Any) -> FileSource | None:
        if not isinstance(value, dict):
            self.fail(where, "must be a mapping with filename and content")
            return None
        self.known(where, value, ("filename", "content", "chmod", "kind"))
        name = self.text(value, "filename", None, path=f"{where}.filename")
        content = self.text(value, "content", "", path=f"{where}.content", limit=1_000_000)
        chmod = value.get("chmod")
        if chmod is not None and not CHMOD.match(str(chmod)):
            self.fail(f"{where}.chmod", f"must be an octal mode such as 0644, not {chmod!r}")
        if not name:
            self.fail(f"{where}.filename", "is required")
            return None
        self.relative(f"{where}.filename", name)
        return FileSource(filename=name, content=content or "", chmod=None if chmod is None else str(chmod))

    def _paths(self, where: str, value: Any) -> list[str]:
        return self.names(where, value, relative=True)

    # -- helpers ------------------------------------------------------------------------------
    def names(self, where: str, value: Any, relative: bool = False) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            self.fail(where, "must be a list of non-empty strings")
            return []
        if len(value) > MAX_ITEMS or any(len(v) > 4096 for v in value):
            self.fail(where, f"may hold {MAX_ITEMS} entries of at most 4096 characters")
            return []
        for item in value:
            if item.startswith("-"):  # an option, not a name: never handed to uv or pip as one
                self.fail(where, f"{item!r} is an option, not a name")
            elif relative:
                self.relative(where, item)
        return [v.strip() for v in value]

    def relative(self, where: str, value: str) -> None:
        """Inside the folder it is read from or written to: no absolute path, no `..`."""
        if value.startswith("/") or ".." in value.replace("\\", "/").split("/"):
            self.fail(where, f"must be a relative path inside the folder, not {value!r}")
