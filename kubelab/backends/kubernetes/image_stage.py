"""A run whose spec has an `environment`, on a cluster: its image first, then its Job.

`prepare` (at submit) turns the environment into an `ImageRecipe` on the notebook's image, asks
the registry whether its tag exists (then the run starts at once in that image), or creates the
builder Job in the build namespace and records `build.json` in the run directory; the run is
`Building`. `advance` (from every `reconcile`: the server's refresh, `run --wait`, `logs -f`)
copies the builder's log to the run's `logs/build.log` and, when the builder succeeds, creates
the run's own objects; when it fails, the run fails with the builder's error line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubelab.backends.kubernetes import image_build
from kubelab.backends.kubernetes.api import KubeApi
from kubelab.backends.kubernetes.errors import RetryPolicy, translate
from kubelab.backends.kubernetes.image_build import BuildSettings, ImageRecipe
from kubelab.backends.kubernetes.image_registry import Registry, TagLookup
from kubelab.environments.definition import read_record
from kubelab.environments.prepare import BUILD_LOG
from kubelab.errors import FieldError, KubelabError, ValidationError
from kubelab.records import BUILDING, FAILED, RUN_FILES, RunDirectory, Status
from kubelab.spec import ExperimentSpec

BUILD_FILE = RUN_FILES["image_build"]
Obj = dict[str, Any]


def recipe(
    spec: ExperimentSpec, base: str | None, code: Path, read: dict[str, str] | None = None
) -> ImageRecipe | None:
    """The image an environment needs: pip steps on `base`; its files as read at submit (`read`,
    the run's `build.json`), else from the run's code."""
    env = spec.environment
    if env is None or env.empty:
        return None
    problems = []
    if not base:
        problems.append(FieldError("image", "an environment is built on an image: name one"))
    if env.python:
        problems.append(FieldError("environment.python", "an image build keeps the base image's Python"))
    if env.conda:
        problems.append(FieldError("environment.conda", "is built on this machine only, not into an image"))
    if any("://" not in link for link in env.find_links):
        problems.append(FieldError("environment.find_links", "a cluster build reaches only http(s) links"))
    files: list[tuple[str, str]] = []
    for index, name in enumerate(env.requirements):
        if read is not None and name in read:
            files.append((f"requirements-{index}.txt", read[name]))
            continue
        path = (code / name).resolve()
        if not path.is_relative_to(code.resolve()) or not path.is_file():
            where = f"environment.requirements[{index}]"
            problems.append(FieldError(where, f"{name} is not in the run's code"))
            continue
        files.append((f"requirements-{index}.txt", path.read_text()))
    if problems:
        raise ValidationError("cannot build this environment's image", problems)
    pip = ["python", "-m", "pip", "install", "--no-cache-dir"]
    pip += ["--index-url", env.index_url] if env.index_url else []
    pip += [arg for link in env.find_links for arg in ("--find-links", link)]
    steps = [shlex.join([*pip, "-r", name]) for name, _ in files]
    steps += [shlex.join([*pip, *env.packages])] if env.packages else []
    return ImageRecipe(str(base), tuple(steps), tuple(files))


class ImageStage:
    """The build side of `KubernetesBackend`: one per backend, None settings when the hub has no
    registry (an environment is then refused naming the setting)."""

    def __init__(
        self,
        api_client: client.ApiClient | None,
        settings: BuildSettings | None,
        retry: RetryPolicy,
        registry: TagLookup | None = None,
    ) -> None:
        self.settings = settings
        self._client, self._retry = api_client, retry
        self.registry = registry or Registry(settings.auth_file if settings else None)
        self._api: KubeApi | None = None

    @property
    def api(self) -> KubeApi:
        if self._api is None:
            if self._client is None or self.settings is None:
                raise KubelabError("this backend builds no images")
            self._api = KubeApi(self._client, self.settings.namespace, self._retry)
        return self._api

    def prepare(self, run: RunDirectory, spec: ExperimentSpec, base: str | None, user: str) -> ExperimentSpec:
        """The spec to run (its image the built one); writes `build.json` if a build is needed."""
        code = run.code_dir if run.code_dir.is_dir() else Path(spec.workdir or ".")
        recorded = read_record(run.path) or {}
        wanted = recipe(spec, spec.image or base, code, (recorded.get("definition") or {}).get("files"))
        if wanted is None:
            return spec
        if self.settings is None:
            raise ValidationError(
                "this hub builds no images",
                [FieldError("environment", "needs the hub's `registry` setting (KUBELAB_REGISTRY)")],
            )
        image = wanted.image(self.settings)
        try:
            present = self.registry.has(image)
        except KubelabError:
            present = False  # unknown: building again is harmless, the tag is the content
        if not present:
            job = image_build.build_job(wanted, self.settings, user)
            try:
                self.api.create(job)
            except ApiException as exc:
                if exc.status != 409:  # 409: the same image is being built for another run
                    raise translate(exc, f"create the image build Job in {self.settings.namespace}") from exc
            (run.path / BUILD_FILE).write_text(json.dumps({"image": image, "job": job["metadata"]["name"]}))
        return dataclasses.replace(spec, image=image)

    def waiting(self, run: RunDirectory) -> bool:
        return (run.path / BUILD_FILE).exists() and not self._record(run).get("done")

    def _record(self, run: RunDirectory) -> Obj:
        try:
            return dict(json.loads((run.path / BUILD_FILE).read_text()))
        except (OSError, ValueError):
            return {}

    def advance(self, run: RunDirectory, status: Status, start: Callable[[ExperimentSpec], None]) -> Status:
        """Follow the build: its log into the run, then start the run (`start`) or fail it."""
        record = self._record(run)
        try:
            job = self.api.get("Job", record["job"])
            log = self._copy_log(run, record["job"])
        except (ApiException, KubelabError):
            return status  # keep the last known state; the API may be back soon
        conditions = {c.get("type"): c for c in ((job or {}).get("status") or {}).get("conditions") or []}
        if job is None or _true(conditions, "Failed"):
            cause = (conditions.get("Failed") or {}).get("message") or "its builder Job no longer exists"
            if job is not None:  # its log is kept in the run; the next run with this tag builds anew
                with contextlib.suppress(ApiException, KubelabError):
                    self.api.delete("Job", record["job"])
            return self._move(run, FAILED, f"environment: the image build failed: {error_line(log) or cause}")
        if _true(conditions, "Complete"):
            record["done"] = True
            spec = ExperimentSpec.parse(run.spec())
            start(dataclasses.replace(spec, image=record["image"]))
            (run.path / BUILD_FILE).write_text(json.dumps(record))
            return run.status()
        return self._move(run, BUILDING, f"building the image {record['image']}")

    def _copy_log(self, run: RunDirectory, job: str) -> str:
        pods = self.api.list("Pod", label_selector=f"job-name={job}").get("items") or []
        if not pods:
            return ""
        newest = max(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
        try:
            text = "".join(self.api.pod_log(newest["metadata"]["name"], container=image_build.CONTAINER))
        except ApiException as exc:
            if exc.status != 400:  # 400: the builder has not started yet
                raise
            return ""
        run.logs_dir.mkdir(exist_ok=True)
        (run.logs_dir / BUILD_LOG).write_text(text)
        return text

    def _move(self, run: RunDirectory, state: str, reason: str) -> Status:
        status = run.status()
        if not status.terminal and (status.state, status.reason) != (state, reason):
            run.write_status(status.move(state, reason))
        return status


def _true(conditions: dict[Any, Obj], kind: str) -> bool:
    return (conditions.get(kind) or {}).get("status") == "True"


def error_line(log: str) -> str:
    """BuildKit's last `error:` line (a failed step's command and exit code, a refused push)."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if line.lower().startswith("error")]
    return (errors or lines or [""])[-1][:500]
