"""kubelab's Dockerfile for an environment builds a real image and pushes it to a real registry:
Debian's `buildah` (daemonless, chroot isolation) on this machine, Debian's Distribution server
on loopback. The base image is made here from this machine's own `sh`, `mkdir` and `cat` and
their libraries (nothing downloaded). Where buildah is missing or may not build here (it needs
root or user namespaces), the test skips and says so."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_registry import local_registry

from kubelab.backends.kubernetes.image_build import BuildSettings, ImageRecipe, dockerfile
from kubelab.backends.kubernetes.image_registry import Registry
from kubelab.backends.kubernetes.image_stage import error_line

TOOLS = ("/bin/sh", "/bin/mkdir", "/bin/cat")


class Buildah:
    def __init__(self, root: Path) -> None:
        self.flags = [
            "--root",
            str(root / "storage"),
            "--runroot",
            str(root / "run"),
            "--storage-driver",
            "vfs",
        ]
        self.env = {**os.environ, "BUILDAH_ISOLATION": "chroot"}

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["buildah", *self.flags, *args], capture_output=True, text=True, env=self.env, timeout=300
        )
        if check and done.returncode:
            raise AssertionError(f"buildah {' '.join(args)}: {done.stderr}")
        return done


def libraries(binary: str) -> set[str]:
    listing = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return {word for word in listing.split() if word.startswith("/")}


@pytest.fixture
def buildah(tmp_path: Path) -> Buildah:
    if shutil.which("buildah") is None:
        pytest.skip("no buildah here: apt-get install buildah (Debian's package)")
    tool = Buildah(tmp_path / "buildah")
    probe = tool("from", "scratch", check=False)
    if probe.returncode:
        pytest.skip(f"buildah cannot build on this machine: {probe.stderr.strip()[-300:]}")
    return tool


@pytest.fixture
def base(buildah: Buildah, tmp_path: Path) -> str:
    """A tiny image with this machine's shell, mkdir and cat (and their libraries) and /tmp."""
    rootfs = tmp_path / "rootfs"
    (rootfs / "tmp").mkdir(parents=True)
    for path in {*TOOLS, *(lib for tool in TOOLS for lib in libraries(os.path.realpath(tool)))}:
        target = rootfs / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(path), target)
    (tmp_path / "Base").write_text("FROM scratch\nCOPY rootfs/ /\n")
    buildah("bud", "-f", str(tmp_path / "Base"), "-t", "localhost/kubelab-base:1", str(tmp_path))
    return "localhost/kubelab-base:1"


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    folder = tmp_path / "registry"
    folder.mkdir()
    with local_registry(folder) as host:
        yield host


def build(buildah: Buildah, recipe: ImageRecipe, folder: Path) -> str:
    context = folder / recipe.tag
    context.mkdir()
    (context / "Dockerfile").write_text(dockerfile(recipe))
    buildah("bud", "-t", f"localhost/kubelab-env:{recipe.tag}", str(context))
    return f"localhost/kubelab-env:{recipe.tag}"


def test_the_dockerfile_builds_an_image_the_registry_then_has(
    buildah: Buildah, base: str, registry: str, tmp_path: Path
) -> None:
    hostile = "numpy==2.1\n# $(touch /pwned) `touch /pwned` \"'\n"
    recipe = ImageRecipe(
        base,
        ("cat requirements-0.txt > /installed.txt", "mkdir -p /opt/env"),
        (("requirements-0.txt", hostile),),
    )
    settings = BuildSettings(registry=f"{registry}/lab/envs", namespace="builds", secret="s")
    image = build(buildah, recipe, tmp_path)
    check = Registry(scheme="http")
    assert not check.has(recipe.image(settings))

    buildah("push", "--tls-verify=false", image, f"docker://{recipe.image(settings)}")
    assert check.has(recipe.image(settings))

    container = buildah("from", image).stdout.strip()
    mounted = Path(buildah("mount", container).stdout.strip())
    assert (mounted / "installed.txt").read_text() == hostile  # the file's content, byte for byte
    assert (mounted / "opt" / "env").is_dir() and not (mounted / "pwned").exists()


def test_a_failing_step_and_a_refused_push_say_why(buildah: Buildah, base: str, tmp_path: Path) -> None:
    broken = ImageRecipe(base, ("cat no-such-file",))
    context = tmp_path / "broken"
    context.mkdir()
    (context / "Dockerfile").write_text(dockerfile(broken))
    failed = buildah("bud", str(context), check=False)
    assert failed.returncode != 0 and "no-such-file" in failed.stderr + failed.stdout

    image = build(buildah, ImageRecipe(base, ("mkdir -p /opt/env",)), tmp_path)
    folder = tmp_path / "read-only"
    folder.mkdir()
    with local_registry(folder, read_only=True) as host:
        pushed = buildah("push", "--tls-verify=false", image, f"docker://{host}/lab/envs:env-1", check=False)
    assert pushed.returncode != 0
    reason = error_line(pushed.stderr)
    assert reason.lower().startswith("error") and "lab/envs" in reason, pushed.stderr
