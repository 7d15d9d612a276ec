"""Build the control plane's binaries from their Go modules, once per version.

`cluster/kubernetes` and `cluster/kwok` are wrapper Go modules that pin one Kubernetes
release (every staging module replaced by its published version of that release), its etcd,
and KWOK. Binaries land in `.cache/cluster/<component>-<version>/` (or
`$KUBELAB_CLUSTER_CACHE`); a folder that exists is trusted, so a second run costs nothing and a
new pin builds beside the old one. Go's module and build caches make a rebuild cheap too.

    python tests/controlplane/build.py          # build what is missing, print the folder
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODULES = REPO / "cluster"


def cache_root() -> Path:
    return Path(os.environ.get("KUBELAB_CLUSTER_CACHE") or REPO / ".cache" / "cluster")


def _pinned(module_dir: Path, module: str) -> str:
    match = re.search(
        rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)", (module_dir / "go.mod").read_text(), re.MULTILINE
    )
    if not match:
        raise RuntimeError(f"{module_dir}/go.mod does not require {module}")
    return match.group(1)


@dataclass(frozen=True)
class Component:
    """One Go build: the packages of a wrapper module and the binaries they become."""

    key: str  # folder name under the cache root
    module_dir: Path
    packages: dict[str, str]  # binary name -> Go package
    ldflags: str = ""
    files: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Files kept beside the binaries: cached name -> (module, path inside the module)."""

    @property
    def folder(self) -> Path:
        return cache_root() / self.key

    def missing(self) -> bool:
        return not all((self.folder / name).is_file() for name in [*self.packages, *self.files])


def components() -> list[Component]:
    kube_dir, kwok_dir = MODULES / "kubernetes", MODULES / "kwok"
    k8s = _pinned(kube_dir, "k8s.io/kubernetes")
    etcd = _pinned(kube_dir, "go.etcd.io/etcd/server/v3")
    kwok = _pinned(kwok_dir, "sigs.k8s.io/kwok")
    major, minor = k8s.lstrip("v").split(".")[:2]
    stamp = " ".join(
        f"-X {pkg}.{var}={value}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for var, value in (
            ("gitVersion", k8s),
            ("gitMajor", major),
            ("gitMinor", minor),
            ("gitTreeState", "clean"),
        )
    )
    return [
        Component(
            f"kubernetes-{k8s}-etcd-{etcd}",
            kube_dir,
            {
                "etcd": "go.etcd.io/etcd/server/v3",
                "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
                "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
                "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
                "kubectl": "k8s.io/kubernetes/cmd/kubectl",  # the same release's, for the checks
            },
            ldflags=stamp,
        ),
        Component(
            f"kwok-{kwok}",
            kwok_dir,
            {"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
            ldflags=f"-X sigs.k8s.io/kwok/pkg/consts.Version={kwok.lstrip('v')}",
            files={"logs-crd.yaml": ("sigs.k8s.io/kwok", "kustomize/crd/bases/kwok.x-k8s.io_logs.yaml")},
        ),
    ]


ADDON_CRDS = {
    "inferenceservices.serving.kserve.io": (
        "github.com/kserve/kserve",
        "config/crd/full/serving.kserve.io_inferenceservices.yaml",
    ),
    **{
        f"{plural}.gateway.networking.k8s.io": (
            "sigs.k8s.io/gateway-api",
            f"config/crd/standard/gateway.networking.k8s.io_{plural}.yaml",
        )
        for plural in ("gatewayclasses", "gateways", "httproutes", "referencegrants")
    },
}


def addons() -> Component:
    """The published CRD manifests of the add-ons `cluster/addons` pins (KServe, the Gateway
    API): files only, nothing compiled. Not part of `components()`: only the tests that install
    them fetch these modules."""
    addons_dir = MODULES / "addons"
    kserve = _pinned(addons_dir, "github.com/kserve/kserve")
    gateway = _pinned(addons_dir, "sigs.k8s.io/gateway-api")
    return Component(
        f"addons-kserve-{kserve}-gateway-api-{gateway}",
        addons_dir,
        {},
        files={f"{name}.yaml": source for name, source in ADDON_CRDS.items()},
    )


def ensure_addon_crds() -> dict[str, Path]:
    """Fetch the add-ons' modules if missing; each CRD's manifest path by the CRD's name."""
    component = addons()
    if component.missing():
        print(f"==> copying {component.key}'s CRDs from Go modules (once)", flush=True)
        _build(component)
    return {name: component.folder / f"{name}.yaml" for name in ADDON_CRDS}


def metrics_server() -> Component:
    """metrics-server at the release `cluster/metrics-server` pins: the resource metrics API
    (`metrics.k8s.io`). Not part of `components()`: only the tests that start it build it."""
    module_dir = MODULES / "metrics-server"
    version = _pinned(module_dir, "sigs.k8s.io/metrics-server")
    return Component(
        f"metrics-server-{version}",
        module_dir,
        {"metrics-server": "sigs.k8s.io/metrics-server/cmd/metrics-server"},
        ldflags=f"-X k8s.io/client-go/pkg/version.gitVersion={version}",  # as its Makefile stamps it
    )


def ensure_metrics_server() -> Path:
    """Build metrics-server if missing (once per pinned version); its binary's path."""
    component = metrics_server()
    if component.missing():
        print(
            f"==> building {component.key} from Go modules (once; cached in {component.folder})", flush=True
        )
        started = time.monotonic()
        _build(component)
        print(f"    built in {time.monotonic() - started:.0f} s", flush=True)
    return component.folder / "metrics-server"


def _build(component: Component) -> None:
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("Go is needed to build the control plane (https://go.dev/doc/install)")
    component.folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=component.folder.parent, prefix=".build-") as tmp:
        for name, package in component.packages.items():
            print(f"    go build {package}", flush=True)
            subprocess.run(
                [
                    go,
                    "build",
                    "-buildvcs=false",
                    "-ldflags",
                    f"-s -w {component.ldflags}",
                    "-o",
                    str(Path(tmp) / name),
                    package,
                ],
                cwd=component.module_dir,
                check=True,
            )
        for name, (module, path) in component.files.items():
            root = subprocess.run(
                [go, "list", "-m", "-f", "{{.Dir}}", module],
                cwd=component.module_dir,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
            shutil.copyfile(Path(root) / path, Path(tmp) / name)
        if component.folder.exists():  # an older build of the same pins, missing a binary
            shutil.rmtree(component.folder)
        Path(tmp).rename(component.folder)  # whole or not at all


def ensure_built(quiet: bool = False) -> dict[str, Path]:
    """Build what is missing; return every binary's and kept file's path by name."""
    paths: dict[str, Path] = {}
    for component in components():
        if component.missing():
            print(
                f"==> building {component.key} from Go modules (once; cached in {component.folder})",
                flush=True,
            )
            started = time.monotonic()
            _build(component)
            print(f"    built in {time.monotonic() - started:.0f} s", flush=True)
        elif not quiet:
            print(f"==> {component.key}: cached in {component.folder}", flush=True)
        paths.update({name: component.folder / name for name in [*component.packages, *component.files]})
    return paths


if __name__ == "__main__":
    try:
        for binary in ensure_built().values():
            print(binary)
    except (RuntimeError, subprocess.CalledProcessError) as error:
        sys.exit(f"control plane build failed: {error}")
