"""Every command in docs/deploy.md has a test, and the ones that need no cluster run here.

A command added to the guide without an entry below fails this test; an entry naming a test
that does not exist fails it too. Where a command cannot run in the test environment (no
container engine, no helm, no kubelet or GPU), its entry names the test of what it consumes.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "deploy.md"
HERE = Path(__file__).resolve().parent

DOCKER = [
    "test_deploy_objects.py::test_dockerfiles_lint_clean",
    "test_deploy_objects.py::test_images_are_the_ones_the_dockerfiles_build",
    "test_deploy_objects.py::test_dockerfiles_pin_their_bases",
]
HELM = [
    "test_deploy_objects.py::test_values_give_the_chart_what_per_user_namespaces_need",
    "test_deploy_objects.py::test_images_are_the_ones_the_dockerfiles_build",
]
COVERED = {
    "docker build -f hub_config/hub/Dockerfile -t kubelab/k8s-hub:0.1.0 .": DOCKER,
    "docker build -f hub_config/notebook/Dockerfile -t kubelab/notebook:0.1.0 .": DOCKER,
    "docker build -f hub_config/notebook/Dockerfile -t kubelab/notebook-cuda:0.1.0 --build-arg "
    "BASE=quay.io/jupyter/pytorch-notebook:cuda12-2026-08-24 .": DOCKER,
    "kubectl create namespace jhub": [
        "test_deploy_cluster.py::test_two_users_spawn_and_get_every_documented_object"
    ],
    "kubelab hub render --all --hub-namespace jhub > kubelab-admin.yaml": [
        "test_deploy_docs.py::test_render_all_as_the_guide_writes_it",
        "test_deploy_objects.py::test_render_all_prints_the_admins_objects",
    ],
    "kubectl apply --server-side --field-manager=kubelab --dry-run=server -f kubelab-admin.yaml": [
        "test_deploy_cluster.py::test_the_guides_install_and_uninstall_commands",
        "test_deploy_cluster.py::test_render_all_is_accepted_by_a_dry_run_and_then_applied",
    ],
    "kubectl apply --server-side --field-manager=kubelab -f kubelab-admin.yaml": [
        "test_deploy_cluster.py::test_the_guides_install_and_uninstall_commands"
    ],
    "kubectl auth can-i patch networkpolicies -n any-namespace --as=system:serviceaccount:jhub:hub": [
        "test_deploy_cluster.py::test_the_guides_install_and_uninstall_commands"
    ],
    "helm repo add jupyterhub https://hub.jupyter.org/helm-chart/": HELM,
    "helm upgrade --install hub jupyterhub/jupyterhub --version 4.4.0 -n jhub -f hub_config/values.yaml": HELM,
    "kubectl -n jhub rollout status deploy/hub": HELM,
    "kubectl get namespaces -l app.kubernetes.io/managed-by=kubelab,kubelab.io/user": [
        "test_deploy_cluster.py::test_two_users_spawn_and_get_every_documented_object"
    ],
    "kubectl -n jhub-alice get serviceaccounts,roles,rolebindings,resourcequotas,limitranges,"
    "networkpolicies,persistentvolumeclaims": [
        "test_deploy_cluster.py::test_two_users_spawn_and_get_every_documented_object"
    ],
    # needs a kubelet and a GPU: the test that the notebook pod asks for the GPU on its type's node
    "kubectl -n jhub-alice exec jupyter-alice -- nvidia-smi -L": [
        "test_spawner_render.py::test_render_prints_every_object_of_a_spawn"
    ],
    "helm upgrade hub jupyterhub/jupyterhub --version 4.4.0 -n jhub -f hub_config/values.yaml": HELM,
    "kubelab hub render --all --hub-namespace jhub | kubectl apply --server-side --field-manager=kubelab -f -": [
        "test_deploy_cluster.py::test_the_guides_install_and_uninstall_commands"
    ],
    "kubectl -n jhub exec deploy/hub -- kubelab hub reconcile --config "
    "/usr/local/etc/jupyterhub/jupyterhub_config.py": [
        "test_deploy_cluster.py::test_reconcile_brings_a_previous_versions_namespace_up_to_date"
    ],
    "helm uninstall hub -n jhub": HELM,
    "kubectl delete -f kubelab-admin.yaml": [
        "test_deploy_cluster.py::test_the_guides_install_and_uninstall_commands"
    ],
}


def guide_commands() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", GUIDE.read_text(), re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_every_command_of_the_guide_has_a_test() -> None:
    commands = guide_commands()
    assert len(commands) == len(set(commands))
    assert set(commands) == set(COVERED), set(commands) ^ set(COVERED)
    defined = {}
    for path in [*HERE.glob("test_deploy_*.py"), HERE / "test_spawner_render.py"]:
        tree = ast.parse(path.read_text())
        defined[path.name] = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for command, tests in COVERED.items():
        for test in tests:
            module, name = test.split("::")
            assert name in defined.get(module, set()), f"{command}: {test} does not exist"


def test_render_all_as_the_guide_writes_it(tmp_path: Path) -> None:
    command = next(c for c in guide_commands() if c.startswith("kubelab hub render --all") and ">" in c)
    args = command.split(">")[0].split()[1:]
    done = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    objects = list(yaml.safe_load_all(done.stdout))
    assert {o["metadata"].get("namespace") for o in objects} == {None, "jhub"}


def test_the_guides_tables_name_what_the_builders_build() -> None:
    from kubelab.spawner.network import EXTRA_EGRESS_POLICY, POLICY_NAMES

    text = GUIDE.read_text()
    for name in (*POLICY_NAMES, EXTRA_EGRESS_POLICY):
        assert f"| NetworkPolicy | `{name}` |" in text
    for metric in (
        "jupyterhub_kubelab_gpus_allocated",
        "jupyterhub_kubelab_gpus_total",
        "jupyterhub_kubelab_gpus_free",
        "jupyterhub_kubelab_experiments",
    ):
        assert f"`{metric}`" in text
    for setting in (
        "network_policy",
        "network_policy_internet",
        "network_policy_extra_egress",
        "api_server_cidrs",
        "hub_namespace",
        "check_availability",
        "trusted_lab",
    ):
        assert f"`{setting}`" in text
