"""What a lab admin or a user trying kubelab does first with the control plane: kubectl, the
same release's, built with it. Proves the loopback cluster is a real one (TLS, OpenAPI v2/v3,
authorization.k8s.io, server-side apply with managedFields, Table output)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from controlplane.build import ensure_built
from controlplane.cluster import ControlPlane
from controlplane.fixtures import RealCluster
from kubernetes import client


@pytest.fixture(scope="module")
def kubectl() -> str:
    return str(ensure_built(quiet=True)["kubectl"])


def run(kubectl: str, kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [kubectl, f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_get_nodes_shows_the_simulated_fleet(simulated_cluster: ControlPlane, kubectl: str) -> None:
    table = run(kubectl, simulated_cluster.kubeconfig, "get", "nodes", "-L", "gpu-type", "--no-headers")
    rows = {line.split()[0]: line.split() for line in table.splitlines()}
    assert {"a100-0", "a100-1", "t4-0", "t4-1", "cpu-0", "cpu-1"} <= set(rows)
    assert rows["a100-0"][1] == "Ready" and rows["a100-0"][-1] == "A100"


def test_auth_can_i_answers_for_a_notebook_token(
    cluster: ControlPlane | RealCluster, kubectl: str, tmp_path: Path, admin: client.ApiClient, namespace: str
) -> None:
    kubeconfig = cluster.write_kubeconfig(
        tmp_path / "nb", token=cluster.token_for(namespace, "notebook"), namespace=namespace
    )
    assert run(kubectl, kubeconfig, "auth", "can-i", "create", "jobs").strip() == "yes"
    denied = subprocess.run(
        [kubectl, f"--kubeconfig={kubeconfig}", "auth", "can-i", "create", "namespaces"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert denied.stdout.strip() == "no" and denied.returncode == 1


def test_server_side_apply_and_explain(
    cluster: ControlPlane | RealCluster, kubectl: str, namespace: str
) -> None:
    manifest = (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: "
        f"{namespace}}}\ndata: {{lr: '0.1'}}\n"
    )
    out = run(
        kubectl,
        cluster.kubeconfig,
        "apply",
        "--server-side",
        "--field-manager=kubelab",
        "-f",
        "-",
        stdin=manifest,
    )
    assert "serverside-applied" in out
    fields = run(
        kubectl,
        cluster.kubeconfig,
        "get",
        "configmap",
        "settings",
        "-n",
        namespace,
        "--show-managed-fields",
        "-o",
        "jsonpath={.metadata.managedFields[0].manager}",
    )
    assert fields == "kubelab"
    explained = run(kubectl, cluster.kubeconfig, "explain", "job.spec")
    assert "backoffLimit" in explained and "completionMode" in explained
