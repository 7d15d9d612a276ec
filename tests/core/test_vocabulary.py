"""Each vocabulary is declared once: the experiment options, the spec's schema, frameworks,
tuners, pruners, states and the run directory's names reach the CLI, the magics, REST's
OpenAPI document and the sidebar's TypeScript from their one declaration."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import jsonschema
import pytest

from kubelab import options, records, sidebar_vocabulary, spec_schema
from kubelab.magics import options as magic_options
from kubelab.server_extension.openapi import document
from kubelab.server_extension.routes import API_ROUTES
from kubelab.spec import FRAMEWORKS, ExperimentSpec
from kubelab.sweeps.pruners import PRUNER_KINDS
from kubelab.sweeps.tuner_catalog import TUNER_KINDS, TunerKind, optuna_sampler, resolve_tuner
from kubelab.sweeps.tuners import build_sampler

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "labextension" / "src"


def test_the_sidebars_typescript_is_generated_from_the_declarations() -> None:
    committed = (ROOT / sidebar_vocabulary.TARGET).read_text()
    assert committed == sidebar_vocabulary.render(), (
        "labextension/src/vocabulary.ts is stale: run `python -m kubelab.sidebar_vocabulary`"
    )


def typescript_list(name: str) -> list[str]:
    source = (SRC / "vocabulary.ts").read_text()
    match = re.search(rf"export const {name} = \[(.*?)\]", source, re.S)
    assert match, name
    return re.findall(r"'([^']*)'", match.group(1))


def test_typescript_lists_are_pythons() -> None:
    assert typescript_list("FRAMEWORKS") == list(FRAMEWORKS)
    assert typescript_list("TUNERS") == [n for n, kind in TUNER_KINDS.items() if kind.offered]
    assert typescript_list("EARLY_STOPPING") == list(PRUNER_KINDS)
    assert typescript_list("STATES") == list(records.STATES)
    # and no hand-written copy is left in the sidebar
    for path in set(SRC.glob("*.ts*")) - {SRC / "vocabulary.ts"}:
        text = path.read_text()
        for name in ("FRAMEWORKS", "TUNERS", "EARLY_STOPPING", "STATES"):
            assert not re.search(rf"export const {name}\b", text), f"{path.name} declares {name} again"


def test_the_form_fields_are_the_options_with_a_form() -> None:
    source = (SRC / "vocabulary.ts").read_text()
    keys = re.findall(r"key: '(\w+)'", source)
    paths = re.findall(r"path: '([\w.]+)'", source)
    declared = [o for o in options.EXPERIMENT_OPTIONS if o.form]
    assert keys == [o.form.key for o in declared if o.form]
    assert paths == [o.path for o in declared]
    # form.ts reads the generated fields rather than listing them
    form = (SRC / "form.ts").read_text()
    assert "'resources.gpu_type'" not in form and "RUN_FORM_FIELDS" in form


def test_every_option_sets_a_spec_field_and_both_parsers_have_it() -> None:
    cli = argparse.ArgumentParser()
    options.add_experiment_options(cli)
    magic = magic_options.train_parser()
    for option in options.EXPERIMENT_OPTIONS:
        spec_schema.field_meta(option.path)  # a KeyError names an option for no field
        for parser in (cli, magic):
            assert option.flag in parser._option_string_actions


def test_openapi_spec_schema_is_the_spec() -> None:
    schema = document(API_ROUTES)["components"]["schemas"]["Spec"]
    assert schema == spec_schema.json_schema()
    assert set(schema["properties"]) == {f.name for f in dataclasses.fields(ExperimentSpec)}
    assert schema["properties"]["framework"]["enum"] == list(FRAMEWORKS)
    assert schema["properties"]["replicas"]["anyOf"][0]["minimum"] == 1  # or MIN:MAX, {min, max}
    assert schema["properties"]["resources"]["properties"]["gpus"]["minimum"] == 0
    validator = jsonschema.Draft202012Validator(schema)
    full = ExperimentSpec.parse({"command": ["python", "t.py"], "resources": {"gpus": 1}}).to_dict()
    assert not list(validator.iter_errors(full))
    assert not list(validator.iter_errors({"command": "x", "resources": {"cpu": 2}, "tags": "a,b"}))
    elastic = ExperimentSpec.parse({"command": "x", "replicas": "1:4", "framework": "pytorch"}).to_dict()
    assert not list(validator.iter_errors(elastic)) and elastic["elastic"]["max"] == 4
    for bad in ({"replicas": 0}, {"framework": "jax"}, {"gpu": 1}, {"resources": {"gpus": -1}}):
        assert list(validator.iter_errors({"command": "x", **bad})), bad
        with pytest.raises(Exception, match="invalid experiment spec"):
            ExperimentSpec.parse({"command": "x", **bad})  # the parser refuses what the schema does


def test_a_tuner_is_one_registry_entry() -> None:
    """The "add a tuner" recipe: an entry alone makes it validated, resolved and built."""
    TUNER_KINDS["sobol-only"] = TunerKind(
        TUNER_KINDS["qmc"].args, optuna_sampler("QMCSampler"), requires=("scipy",), offered=False
    )
    try:
        choice = resolve_tuner({"name": "sobol-only", "args": {"qmc_type": "sobol", "seed": 3}})
        assert choice.to_dict() == {"name": "sobol-only", "args": {"qmc_type": "sobol", "seed": 3}}
        assert type(build_sampler(choice, 3)).__name__ == "QMCSampler"
        with pytest.raises(Exception, match="unknown argument|not a|qmc_typ"):
            resolve_tuner({"name": "sobol-only", "args": {"qmc_typ": "sobol"}})
    finally:
        del TUNER_KINDS["sobol-only"]


def test_the_trial_side_writes_the_files_run_directory_names() -> None:
    """The trial side imports nothing of kubelab's records (it runs in images without kubelab),
    so it spells the files it writes itself; this holds its spelling to RUN_FILES."""
    writers = [
        ROOT / "kubelab" / "trial.py",
        ROOT / "kubelab" / "nni_compat" / "nni" / "__init__.py",
        ROOT / "kubelab" / "nni_compat" / "polyaxon" / "_kubelab.py",
    ]
    for path in writers:
        assert f'"{records.RUN_FILES["metrics"]}"' in path.read_text(), path
    assert f'"{records.RUN_FILES["tensorboard"]}"' in writers[0].read_text()
    assert f'"{records.RUN_FILES["checkpoints"]}"' in (ROOT / "kubelab" / "checkpoints.py").read_text()
    assert f'"{records.RUN_FILES["tracking"]}"' in writers[2].read_text()
    assert f'"{records.RUN_FILES["outputs"]}"' in (ROOT / "kubelab" / "papermill_run.py").read_text()
