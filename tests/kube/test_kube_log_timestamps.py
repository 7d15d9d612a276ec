"""Log timestamps on the Kubernetes backend: the pod logs API's own `timestamps=true` while
the pod lives, and the times archived beside the log once the run ends (real control plane,
KWOK serving the container log in the CRI format a kubelet writes)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from controlplane.cluster import ControlPlane
from kube_support import wait_for, wait_running
from kubelab_testing import wait_until
from kubernetes import client

from kubelab.experiments import Experiments
from kubelab.log_times import index_of

STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z (.*)$")


def stamped_lines(text: str) -> list[tuple[datetime, str]]:
    lines = []
    for line in text.splitlines():
        match = STAMP.match(line)
        assert match, f"line without its time: {line!r}"
        whole, _, fraction = match.group(1).partition(".")
        lines.append((datetime.fromisoformat(f"{whole}.{(fraction + '000000')[:6]}"), match.group(2)))
    return lines


def test_live_and_archived_logs_carry_the_kubelets_times(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
) -> None:
    project_node()
    record = lab.submit({"command": ["python", "train.py"]}, base_dir=home)
    run_id = record["id"]
    name = wait_running(admin, lab, namespace, run_id)[0]["metadata"]["name"]
    simulated_cluster.append_log(namespace, name, "epoch 1 loss 0.5", "epoch 2 loss 0.25")
    wait_for(lambda: "epoch 2" in "".join(lab.logs(run_id)), what="the log")

    live = stamped_lines("".join(lab.logs(run_id, timestamps=True)))
    assert [text for _, text in live] == ["epoch 1 loss 0.5", "epoch 2 loss 0.25"]
    assert live[0][0] <= live[1][0]
    assert "".join(lab.logs(run_id)) == "epoch 1 loss 0.5\nepoch 2 loss 0.25\n"  # without: as printed
    text = "".join(lab.logs(run_id, timestamps=True))
    assert "".join(lab.logs(run_id, start=4, length=20, timestamps=True)).encode() == text.encode()[4:24]

    simulated_cluster.end_pod(namespace, name, "Succeeded")
    wait_until(lab, run_id, "Succeeded")
    archived_log = lab.runs_root / run_id / "logs" / "replica-0.log"
    wait_for(lambda: index_of(archived_log).exists(), what="the archived times")
    assert archived_log.read_text() == "epoch 1 loss 0.5\nepoch 2 loss 0.25\n"
    assert stamped_lines("".join(lab.logs(run_id, timestamps=True))) == live  # the same times, kept
