"""Pure builders of an environment's image build: the content tag, the Dockerfile, the builder Job
(valid against Kubernetes' schemas, its credential a mounted file), the recipe's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pytest

from kubelab.backends.kubernetes import build_namespace
from kubelab.backends.kubernetes.image_build import (
    BuildSettings,
    ImageRecipe,
    build_job,
    dockerfile,
    job_name,
)
from kubelab.backends.kubernetes.image_stage import error_line, recipe
from kubelab.errors import ValidationError
from kubelab.spec import ExperimentSpec

K8S_VERSION = kubernetes_validate.latest_version()
SETTINGS = BuildSettings(
    registry="registry.lab.example.org/lab/envs", namespace="kubelab-builds", secret="lab-registry-credential"
)
BASE = "registry.lab.example.org/lab/notebook:1"


def spec_with(environment: dict[str, object]) -> ExperimentSpec:
    return ExperimentSpec.parse({"command": "python train.py", "environment": environment})


def test_the_tag_is_the_content_of_base_steps_and_files() -> None:
    one = ImageRecipe(BASE, ("pip install numpy",), (("requirements-0.txt", "torch\n"),))
    assert one.tag == ImageRecipe(BASE, ("pip install numpy",), (("requirements-0.txt", "torch\n"),)).tag
    others = [
        ImageRecipe(BASE + "x", one.steps, one.files),
        ImageRecipe(BASE, ("pip install scipy",), one.files),
        ImageRecipe(BASE, one.steps, (("requirements-0.txt", "torch==2\n"),)),
    ]
    assert len({one.tag, *(r.tag for r in others)}) == 4
    assert one.image(SETTINGS) == f"registry.lab.example.org/lab/envs:{one.tag}"
    assert len(job_name(one)) <= 63


def test_steps_and_file_contents_reach_the_dockerfile_unparsed() -> None:
    hostile = 'a"b\\c $(id) `id`\nRUN echo pwned'
    text = dockerfile(ImageRecipe(BASE, ("echo 'x' && pip install numpy",), (("req.txt", hostile),)))
    lines = text.splitlines()
    assert lines[0] == f"FROM {BASE}"
    assert len(lines) == 3  # the newline in the content did not start an instruction
    assert json.loads(lines[1].removeprefix("RUN "))[-1] == hostile  # $0 of its step, verbatim
    assert json.loads(lines[2].removeprefix("RUN "))[-1].endswith("echo 'x' && pip install numpy")
    with pytest.raises(ValidationError, match="environment"):
        dockerfile(ImageRecipe(BASE, (), (("../etc/passwd", ""),)))


def test_the_builder_job_is_valid_and_keeps_its_credential_in_a_mounted_file() -> None:
    job = build_job(ImageRecipe(BASE, ("pip install numpy",)), SETTINGS, "alice@example.org")
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    command_line = " ".join(container["command"] + container["args"])
    assert "push" in command_line and SETTINGS.secret not in command_line and "auth" not in command_line
    assert pod["volumes"][0]["secret"]["secretName"] == SETTINGS.secret
    assert pod["automountServiceAccountToken"] is False
    assert container["securityContext"]["runAsUser"] != 0 and not container["securityContext"]["privileged"]
    assert job["metadata"]["namespace"] == SETTINGS.namespace


def test_the_admins_objects_are_valid() -> None:
    for obj in [*build_namespace.admin_objects(SETTINGS), build_namespace.role_binding(SETTINGS, "u", "nb")]:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_settings_name_what_is_missing() -> None:
    assert BuildSettings.from_environ({}) is None
    with pytest.raises(ValidationError) as caught:
        BuildSettings.from_environ({"KUBELAB_REGISTRY": "r.example.org/envs:latest"})
    assert {f.path for f in caught.value.fields} == {
        "KUBELAB_REGISTRY",
        "KUBELAB_BUILD_NAMESPACE",
        "KUBELAB_REGISTRY_SECRET",
    }


def test_the_recipe_reads_requirements_from_the_runs_code(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("numpy==2.1\n")
    spec = spec_with(
        {
            "requirements": "requirements.txt",
            "packages": ["scipy>=1"],
            "index_url": "https://pypi.example.org/simple",
        }
    )
    made = recipe(spec, BASE, tmp_path)
    assert made is not None and made.files == (("requirements-0.txt", "numpy==2.1\n"),)
    assert made.steps == (
        "python -m pip install --no-cache-dir --index-url https://pypi.example.org/simple -r requirements-0.txt",
        "python -m pip install --no-cache-dir --index-url https://pypi.example.org/simple 'scipy>=1'",
    )
    recorded = recipe(spec, BASE, tmp_path / "gone", {"requirements.txt": "numpy==2.2\n"})  # read at submit
    assert recorded is not None and recorded.files == (("requirements-0.txt", "numpy==2.2\n"),)
    assert recipe(ExperimentSpec.parse({"command": "python train.py"}), BASE, tmp_path) is None


def test_what_a_cluster_build_cannot_do_is_refused_by_field(tmp_path: Path) -> None:
    (tmp_path.parent / "outside.txt").write_text("x")
    (tmp_path / "link.txt").symlink_to(tmp_path.parent / "outside.txt")  # a link out of the code
    spec = spec_with({"requirements": ["link.txt", "missing.txt"], "python": "3.11"})
    with pytest.raises(ValidationError) as caught:
        recipe(spec, None, tmp_path)
    assert {f.path for f in caught.value.fields} == {
        "image",
        "environment.python",
        "environment.requirements[0]",
        "environment.requirements[1]",
    }


def test_the_failure_reason_is_buildkits_error_line() -> None:
    log = (
        "#5 [2/2] RUN pip install nosuchpackage\n#5 ERROR: process did not complete\n"
        "error: failed to solve: failed to push r.example.org/envs:env-1: 401 Unauthorized\n"
    )
    assert (
        error_line(log) == "error: failed to solve: failed to push r.example.org/envs:env-1: 401 Unauthorized"
    )
    assert error_line("only a line\n") == "only a line"
    assert error_line("") == ""
