"""The ledger of an `engine: argo` pipeline has several writers: each task's `kubelab pipeline
step` writes its own step's entry (kubelab/pipelines/step.py). Here eight processes hammer
one ledger at once; no write may lose another's, and the last step to end writes the
pipeline's status. A failed step fails the steps downstream of it, as the driver does."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from kubelab.driver_store import write_json
from kubelab.pipelines.spec import PipelineSpec
from kubelab.pipelines.step import StepRunner
from kubelab.pipelines.store import PipelineDirectory, PipelineState, StepEntry

WRITES = 40
WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from kubelab.pipelines.spec import PipelineSpec
    from kubelab.pipelines.step import StepRunner
    from kubelab.pipelines.store import PipelineDirectory

    folder, name, writes = PipelineDirectory(Path(sys.argv[1])), sys.argv[2], int(sys.argv[3])
    runner = StepRunner(folder, name)
    runner.state = folder.read_state()
    runner.spec = PipelineSpec.parse(folder.spec_data(), base_dir=Path(sys.argv[1]))
    entry = runner.state.steps[name]
    for n in range(writes):
        entry.attempt = n + 1
        entry.state = "succeeded" if n == writes - 1 else "running"
        runner.save()
""")


def pipeline(tmp_path: Path, steps: list[dict[str, Any]]) -> PipelineDirectory:
    spec = PipelineSpec.parse({"name": "p", "engine": "argo", "steps": steps}, base_dir=tmp_path)
    folder = PipelineDirectory(tmp_path / "home" / "pipelines" / "0123456789ab")
    folder.path.mkdir(parents=True)
    write_json(folder.spec_file, spec.to_dict())
    state = PipelineState(engine="argo", workflow="kubelab-pipeline-0123456789ab")
    state.steps = {s.name: StepEntry(s.name, s.kind) for s in spec.steps}
    folder.write_state(state)
    return folder


def test_concurrent_steps_lose_no_write(tmp_path: Path) -> None:
    names = [f"s{i}" for i in range(8)]
    folder = pipeline(tmp_path, [{"name": n, "experiment": {"command": "true"}} for n in names])
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(folder.path), n, str(WRITES)]) for n in names
    ]
    assert [w.wait(timeout=120) for w in writers] == [0] * len(names)
    state = folder.read_state()
    assert {n: (e.state, e.attempt) for n, e in state.steps.items()} == {
        n: ("succeeded", WRITES) for n in names
    }
    assert state.status == "Succeeded" and state.reason == "8 steps succeeded"


def test_a_step_failed_for_good_fails_its_dependants_and_ends_the_pipeline(tmp_path: Path) -> None:
    folder = pipeline(
        tmp_path,
        [
            {"name": "a", "experiment": {"command": "true"}},
            {"name": "b", "depends_on": ["a"], "experiment": {"command": "true"}},
            {"name": "c", "depends_on": ["b"], "experiment": {"command": "true"}},
        ],
    )
    runner = StepRunner(folder, "a")
    runner.state = folder.read_state()
    runner.spec = PipelineSpec.parse(folder.spec_data(), base_dir=tmp_path)
    runner.conclude(runner.state.steps["a"], "failed", "experiment x failed: exit code 1")
    state = folder.read_state()
    assert [(e.state, e.reason) for e in state.steps.values()] == [
        ("failed", "experiment x failed: exit code 1"),
        ("failed", "upstream step 'a' failed"),
        ("failed", "upstream step 'b' failed"),
    ]
    assert state.status == "Failed" and state.reason.startswith("failed steps: a (experiment x failed")
