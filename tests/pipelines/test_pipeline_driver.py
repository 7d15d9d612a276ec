"""Real pipelines on the local backend: results passed between steps, failures, retries,
stop and resume, the cache, and a driver killed at each step boundary.

Steps are ordinary experiments and sweeps run by the local runner: tiny Python scripts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pipeline_support import step_runs, step_sweeps, wait_driver_gone, wait_pipeline, write_script

from kubelab.errors import Conflict, ValidationError
from kubelab.pipelines.service import Pipelines

TRAIN = """
    import json, os, kubelab
    p = kubelab.params()
    out = os.path.join(os.environ["KUBELAB_RUN_DIR"], "outputs", "model.json")
    json.dump({"lr": p["lr"]}, open(out, "w"))
    kubelab.report(acc=0.5 + p["lr"])
"""
EVAL = """
    import json, sys, kubelab
    model = json.load(open(sys.argv[1] + "/model.json"))
    kubelab.report(score=float(sys.argv[2]), lr=model["lr"])
"""
WAITS = """
    import os, time
    open("started", "w").close()
    while not os.path.exists("go"):
        time.sleep(0.05)
"""


def grid_sweep(values: list[Any], command: list[str], **more: Any) -> dict[str, Any]:
    """A sweep step's body: every value of `x` in turn, each trial reporting the metric `m`."""
    space = {"x": {"_type": "choice", "_value": values}}
    trial = {"command": command}
    return {
        "space": space,
        "tuner": "grid",
        "max_trials": len(values),
        "objective": {"metric": "m"},
        **more,
        "trial": trial,
    }


def killed_then_restarted(
    pipelines: Pipelines, monkeypatch: pytest.MonkeyPatch, crash: str, spec: dict[str, Any]
) -> dict[str, Any]:
    """Run `spec` with its driver made to die at `crash`, start it again once it died, and
    wait for the pipeline to succeed."""
    monkeypatch.setenv("KUBELAB_PIPELINE_CRASH", crash)
    record = pipelines.create(spec)
    wait_driver_gone(pipelines, record["id"])
    assert pipelines.record(pipelines.pipeline(record["id"]))["status"] == "Running"  # died, not finished
    monkeypatch.delenv("KUBELAB_PIPELINE_CRASH")
    pipelines.list()  # `kubelab pipeline ls` (and the server) restart a dead driver
    done = wait_pipeline(pipelines, record["id"])
    assert done["status"] == "Succeeded", done
    home = pipelines.lab.home
    ran = {**step_runs(home, record["id"]), **step_sweeps(home, record["id"])}
    assert ran == {s["name"]: [s["id"]] for s in done["steps"]}  # each step ran exactly once
    return done


def stopped_once_started(
    pipelines: Pipelines, pipeline_env: Path, steps: list[dict[str, Any]]
) -> dict[str, Any]:
    """Create the pipeline, and stop it once a step running `waits.py` has started."""
    write_script(pipeline_env, "waits.py", WAITS)
    record = pipelines.create({"steps": steps})
    wait_pipeline(pipelines, record["id"], until=lambda r: (pipeline_env / "started").exists())
    stopped = pipelines.stop(record["id"])
    assert stopped["status"] == "Stopped", stopped
    return stopped


def worked_example() -> dict[str, Any]:
    return {
        "name": "tune-train-eval",
        "params": {"bonus": 1},
        "steps": [
            {
                "name": "tune",
                "sweep": {
                    "space": {"x": {"_type": "choice", "_value": [0.1, 0.2, 0.3]}},
                    "objective": {"metric": "loss", "direction": "minimize"},
                    "tuner": "grid",
                    "max_trials": 3,
                    "parameter_style": "env",
                    "trial": {
                        "command": [
                            "python",
                            "-c",
                            "import kubelab; kubelab.report(loss=abs(kubelab.params()['x'] - 0.2))",
                        ]
                    },
                },
            },
            {
                "name": "train",
                "depends_on": ["tune"],
                "outputs": ["acc"],
                "experiment": {
                    "command": ["python", "train.py"],
                    "params": {"lr": "{{ steps.tune.best.params.x }}", "bonus": "{{ params.bonus }}"},
                },
            },
            {
                "name": "eval",
                "depends_on": ["train"],
                "experiment": {
                    "command": "python eval.py {{ steps.train.outputs }} {{ steps.train.metrics.acc }}"
                },
            },
        ],
    }


def test_the_worked_example_passes_results_between_steps(pipelines: Pipelines, pipeline_env: Path) -> None:
    write_script(pipeline_env, "train.py", TRAIN)
    write_script(pipeline_env, "eval.py", EVAL)
    record = pipelines.create(worked_example())
    done = wait_pipeline(pipelines, record["id"])
    assert done["status"] == "Succeeded", done
    assert [s["state"] for s in done["steps"]] == ["succeeded"] * 3
    lab = pipelines.lab
    train = lab.get(done["steps"][1]["id"])
    assert train["params"] == {"lr": 0.2, "bonus": 1}  # the sweep's best, typed as it was
    evaluation = lab.get(done["steps"][2]["id"])
    assert evaluation["metrics"] == {"score": pytest.approx(0.7), "lr": 0.2}
    # Steps are ordinary records, labelled with their pipeline and step.
    labelled = {r["id"] for r in lab.list(f"pipeline:{record['id']}, step:train|eval")[0]}
    assert labelled == {done["steps"][1]["id"], done["steps"][2]["id"]}
    assert len(lab.list(f"pipeline:{record['id']}, sweep:{done['steps'][0]['id']}")[0]) == 3  # the trials
    assert lab.list("step:>100")[1] == 0  # `step` with a number is still the metrics step
    sweep = step_sweeps(lab.home, record["id"])
    assert sweep == {"tune": [done["steps"][0]["id"]]}
    # A sweep step without a name of its own is named after its pipeline and step.
    assert pipelines.get(record["id"])["steps"][0]["record"]["name"] == f"{done['name']}.tune"


def test_failures_fail_dependants_and_retries_run_again(pipelines: Pipelines, pipeline_env: Path) -> None:
    write_script(
        pipeline_env,
        "flaky.py",
        """
        import os, sys
        if not os.path.exists("tried"):
            open("tried", "w").close()
            sys.exit(3)
    """,
    )
    ok = {"command": ["python", "-c", "pass"]}
    record = pipelines.create(
        {
            "steps": [
                {"name": "flaky", "retries": 1, "experiment": {"command": ["python", "flaky.py"]}},
                {"name": "broken", "experiment": {"command": ["python", "-c", "raise SystemExit(4)"]}},
                {"name": "after", "depends_on": ["broken", "flaky"], "experiment": ok},
                {"name": "later", "depends_on": ["after"], "experiment": ok},
                {"name": "alone", "experiment": ok},
            ]
        }
    )
    done = wait_pipeline(pipelines, record["id"])
    steps = {s["name"]: s for s in done["steps"]}
    assert done["status"] == "Failed"
    assert steps["flaky"]["state"] == "succeeded" and steps["flaky"]["attempt"] == 2
    assert len(steps["flaky"]["previous"]) == 1
    assert steps["broken"]["state"] == "failed" and "code 4" in steps["broken"]["reason"]
    assert steps["after"]["state"] == "failed" and steps["after"]["reason"] == "upstream step 'broken' failed"
    assert steps["later"]["reason"] == "upstream step 'after' failed"
    assert steps["alone"]["state"] == "succeeded"
    runs = step_runs(pipelines.lab.home, record["id"])
    assert {k: len(v) for k, v in runs.items()} == {"flaky": 2, "broken": 1, "alone": 1}
    assert "failed steps: broken" in done["reason"]


def chain() -> dict[str, Any]:
    step = {"command": ["python", "-c", "import kubelab; kubelab.report(v=1)"]}
    return {
        "steps": [
            {"name": "a", "outputs": ["v"], "experiment": step},
            {
                "name": "b",
                "depends_on": ["a"],
                "outputs": ["v"],
                "experiment": {
                    "command": [
                        "python",
                        "-c",
                        "import kubelab, sys; kubelab.report(v=float(sys.argv[1]) + 1)",
                        "{{ steps.a.metrics.v }}",
                    ]
                },
            },
            {"name": "c", "depends_on": ["b"], "experiment": step},
        ]
    }


@pytest.mark.parametrize("point", ["before-submit", "after-submit", "after-end"])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_driver_killed_at_each_step_boundary_loses_and_repeats_nothing(
    pipelines: Pipelines, monkeypatch: pytest.MonkeyPatch, point: str, count: int
) -> None:
    done = killed_then_restarted(pipelines, monkeypatch, f"{point}:{count}", chain())
    assert pipelines.lab.get(done["steps"][1]["id"])["metrics"] == {"v": 2.0}


@pytest.mark.parametrize("point", ["before-submit", "after-submit", "after-end"])
def test_a_sweep_step_is_adopted_after_a_kill_not_started_again(
    pipelines: Pipelines, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    report_x = ["python", "-c", "import kubelab; kubelab.report(m=kubelab.params()['x'])"]
    use_best = ["python", "-c", "import sys; assert sys.argv[1] == '1'", "{{ steps.tune.best.params.x }}"]
    spec = {
        "steps": [
            {"name": "tune", "sweep": grid_sweep([1, 2], report_x, parameter_style="env")},
            {"name": "use", "depends_on": ["tune"], "experiment": {"command": use_best}},
        ]
    }
    killed_then_restarted(pipelines, monkeypatch, f"{point}:1", spec)


def test_stop_then_resume_restarts_only_what_did_not_finish(pipelines: Pipelines, pipeline_env: Path) -> None:
    noop = {"command": ["python", "-c", "pass"]}
    stopped = stopped_once_started(
        pipelines,
        pipeline_env,
        [
            {"name": "first", "experiment": noop},
            {"name": "slow", "depends_on": ["first"], "experiment": {"command": ["python", "waits.py"]}},
            {"name": "last", "depends_on": ["slow"], "experiment": noop},
        ],
    )
    pipeline_id = stopped["id"]
    states = {s["name"]: s["state"] for s in stopped["steps"]}
    assert states == {"first": "succeeded", "slow": "stopped", "last": "stopped"}
    with pytest.raises(Conflict):
        pipelines.stop(pipeline_id)
    (pipeline_env / "go").touch()
    pipelines.resume(pipeline_id)
    done = wait_pipeline(pipelines, pipeline_id)
    assert done["status"] == "Succeeded", done
    runs = step_runs(pipelines.lab.home, pipeline_id)
    assert {k: len(v) for k, v in runs.items()} == {"first": 1, "slow": 2, "last": 1}
    with pytest.raises(Conflict, match="every step succeeded"):
        pipelines.resume(pipeline_id)


def test_cache_reuses_a_step_whose_inputs_did_not_change(pipelines: Pipelines, pipeline_env: Path) -> None:
    prep, use = pipeline_env / "prep", pipeline_env / "use"
    prep.mkdir()
    use.mkdir()
    write_script(prep, "prep.py", "import kubelab; kubelab.report(rows=open('data.csv').read().count(','))")
    (prep / "data.csv").write_text("a,b\n")
    (use / "notes.txt").write_text("v1")
    spec = {
        "cache": True,
        "params": {"seed": 1},
        "steps": [
            {
                "name": "prep",
                "outputs": ["rows"],
                "experiment": {"code": "prep", "command": ["python", "prep.py"]},
            },
            {
                "name": "use",
                "depends_on": ["prep"],
                "experiment": {
                    "code": "use",
                    "command": [
                        "python",
                        "-c",
                        "pass",
                        "{{ steps.prep.metrics.rows }}",
                        "{{ params.seed }}",
                        "{{ steps.prep.outputs }}",
                    ],
                },
            },
        ],
    }

    def run(**params: Any) -> dict[str, Any]:
        done = wait_pipeline(pipelines, pipelines.create(spec, params=params)["id"])
        assert done["status"] == "Succeeded", done
        return done

    first = run()
    again = run()
    assert [s["cached"] for s in again["steps"]] == [True, True]
    assert [s["id"] for s in again["steps"]] == [s["id"] for s in first["steps"]]
    assert step_runs(pipelines.lab.home, again["id"]) == {}  # nothing ran
    assert [s["cached"] for s in run(seed=2)["steps"]] == [True, False]  # only `use` sees the param
    (prep / "data.csv").write_text("c,d\n")  # prep's input changed, not what `use` sees
    same = run()
    assert [s["cached"] for s in same["steps"]] == [False, True]  # a new outputs folder, same contents
    assert same["steps"][1]["id"] == first["steps"][1]["id"]
    (use / "notes.txt").write_text("v2")  # the step's own code changed
    assert [s["cached"] for s in run()["steps"]] == [True, False]
    (prep / "data.csv").write_text("a,b,c\n")  # a result changed: nothing is reused
    changed = run()
    assert [s["cached"] for s in changed["steps"]] == [False, False]
    assert pipelines.lab.get(changed["steps"][0]["id"])["metrics"] == {"rows": 2}


def test_a_missing_result_fails_the_step_with_the_reason(pipelines: Pipelines) -> None:
    record = pipelines.create(
        {
            "steps": [
                {"name": "quiet", "outputs": ["acc"], "experiment": {"command": ["python", "-c", "pass"]}},
                {
                    "name": "next",
                    "depends_on": ["quiet"],
                    "experiment": {"command": ["echo", "{{ steps.quiet.metrics.acc }}"]},
                },
            ]
        }
    )
    done = wait_pipeline(pipelines, record["id"])
    reason = done["steps"][1]["reason"]
    assert done["steps"][1]["state"] == "failed"
    assert (
        reason.startswith("could not start: {{ steps.quiet.metrics.acc }}: step 'quiet'")
        and "'acc'" in reason
    )


BAD = [
    (
        {
            "steps": [
                {"name": "a", "depends_on": ["b"], "experiment": {"command": "x"}},
                {"name": "b", "depends_on": ["a"], "experiment": {"command": "x"}},
            ]
        },
        "steps.a.depends_on",
        "makes a cycle: a -> b -> a",
    ),
    (
        {"steps": [{"name": "a", "depends_on": ["z"], "experiment": {"command": "x"}}]},
        "steps.a.depends_on",
        "no step named 'z'",
    ),
    (
        {"steps": [{"name": "a", "experiment": {"command": "x {{ steps.q.outputs }}"}}]},
        "steps.a.experiment.command",
        "no step named 'q'",
    ),
    (
        {
            "steps": [
                {"name": "a", "experiment": {"command": "x"}},
                {"name": "b", "depends_on": ["a"], "experiment": {"command": "x {{ steps.a.metrics.acc }}"}},
            ]
        },
        "steps.b.experiment.command",
        "does not declare the metric 'acc'",
    ),
    ({"steps": [{"name": "a", "experiment": {"command": "x"}, "sweep": {}}]}, "steps.a", "exactly one of"),
    (
        {"steps": [{"name": "a", "experiment": {"command": "x"}}], "schedule": {"cron": "* * *"}},
        "schedule.cron",
        "not a valid cron expression",
    ),
    (
        {
            "steps": [{"name": "a", "experiment": {"command": "x"}}],
            "schedule": {"cron": "0 2 * * *", "timezone": "Nowhere/City"},
        },
        "schedule.timezone",
        "not an IANA time zone",
    ),
    (
        {"steps": [{"name": "a", "experiment": {"command": "x", "workdir": "missing"}}]},
        "steps.a.experiment.workdir",
        "does not exist",
    ),
    ({"steps": [{"name": "a", "file": "../outside.yml"}]}, "steps.a.file", "outside the pipeline's folder"),
]


@pytest.mark.parametrize(("data", "path", "reason"), BAD)
def test_bad_pipelines_are_refused_naming_the_step_and_field(
    pipelines: Pipelines, data: dict[str, Any], path: str, reason: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        pipelines.create(data)
    assert any(f.path == path and reason in f.reason for f in caught.value.fields), caught.value.fields
    home = pipelines.lab.home
    assert not [p for p in (home / "pipelines").glob("*")] if (home / "pipelines").exists() else True
    assert not list((home / "runs").iterdir())


def test_unknown_params_are_refused(pipelines: Pipelines) -> None:
    with pytest.raises(ValidationError, match="params.epoch: is not a pipeline param; did you mean 'epochs'"):
        pipelines.create(
            {"params": {"epochs": 1}, "steps": [{"name": "a", "experiment": {"command": "x"}}]},
            params={"epoch": 3},
        )


def test_steps_from_files(pipelines: Pipelines, pipeline_env: Path) -> None:
    (pipeline_env / "step.yml").write_text(json.dumps({"command": ["python", "-c", "pass"]}))
    sweep = grid_sweep([1], ["python", "-c", "import kubelab; kubelab.report(m=1)"])
    (pipeline_env / "sweep.yml").write_text(json.dumps(sweep))
    record = pipelines.create(
        {
            "steps": [
                {"name": "one", "file": "step.yml"},
                {"name": "two", "file": "sweep.yml", "depends_on": ["one"]},
            ]
        }
    )
    done = wait_pipeline(pipelines, record["id"])
    assert done["status"] == "Succeeded", done
    assert [s["kind"] for s in done["steps"]] == ["experiment", "sweep"]


def test_stopping_a_pipeline_stops_its_running_sweep(pipelines: Pipelines, pipeline_env: Path) -> None:
    tune = grid_sweep([1, 2], ["python", "waits.py"])
    stopped = stopped_once_started(pipelines, pipeline_env, [{"name": "tune", "sweep": tune}])
    step = stopped["steps"][0]
    assert step["state"] == "stopped" and step["reason"].startswith(f"sweep {step['id']} stopped")
    from kubelab.sweeps.service import Sweeps

    assert Sweeps(pipelines.lab).sweep(step["id"]).read_state().status == "Stopped"
    assert all(r["status"] == "Stopped" for r in pipelines.lab.list(f"sweep:{step['id']}")[0])


def test_a_value_is_rendered_once_so_its_quoting_holds(pipelines: Pipelines, pipeline_env: Path) -> None:
    """A pipeline value inside a command string is quoted for the shell; the step's own render
    must not read a template in it, or `{{ note }}` would be replaced by note's value inside the
    first quotes and the shell would run what note holds."""
    planted = pipeline_env.parent / "INJECTED"
    record = pipelines.create(
        {
            "params": {"label": "{{ note }}"},
            "steps": [
                {
                    "name": "say",
                    "experiment": {
                        "command": "echo {{ params.label }}",
                        "params": {"note": f"$(touch {planted})"},
                    },
                }
            ],
        }
    )
    done = wait_pipeline(pipelines, record["id"])
    assert done["status"] == "Succeeded", done
    assert not planted.exists(), "the param's command substitution ran"
    said = "".join(pipelines.lab.logs(done["steps"][0]["id"], 0))
    assert said.strip() == "{{ note }}", said
