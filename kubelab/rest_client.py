"""A small REST client for the kubelab API, with the same verbs as `Experiments`.

Kernels use it (the server exports `KUBELAB_API_URL` and `KUBELAB_API_TOKEN` to them), so a
`%%train` cell goes through the same server, index and event stream as the sidebar. Errors
come back as the `KubelabError` subclass the server raised, rebuilt from `{error, detail,
fields}`, so callers handle REST and direct calls alike.
"""

from __future__ import annotations

import builtins
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from kubelab.errors import BackendError, Conflict, FieldError, KubelabError, NotFound, ValidationError

ERRORS: dict[str, type[KubelabError]] = {
    "invalid": ValidationError,
    "not_found": NotFound,
    "conflict": Conflict,
    "backend": BackendError,
}


class Unreachable(KubelabError):
    """The API did not answer (server stopped, wrong URL)."""

    status = 503
    error = "unreachable"


def error_from(response: requests.Response) -> KubelabError:
    """The `KubelabError` a failed response describes."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or "detail" not in body:
        if response.status_code == 404:
            return NotFound(f"{response.url} does not exist on this server")
        text = (response.text or response.reason or "").strip()[:300]
        error = KubelabError(f"HTTP {response.status_code} from {response.url}: {text}")
        error.status = response.status_code
        return error
    fields = [FieldError(f.get("path", ""), f.get("reason", "")) for f in body.get("fields") or []]
    cls = ERRORS.get(body.get("error", ""), KubelabError)
    error = cls(body["detail"], fields)
    if cls is KubelabError:
        error.status, error.error = response.status_code, body.get("error", "error")
    return error


class RestClient:
    """`RestClient()` reads the environment; `RestClient(url, token)` for anything else."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        server_root: str | None = None,
    ):
        url = url or os.environ.get("KUBELAB_API_URL")
        if not url:
            raise Unreachable(
                "no kubelab API: KUBELAB_API_URL is not set",
                [
                    FieldError(
                        "KUBELAB_API_URL",
                        "is set by the Jupyter server for its kernels; outside one, use the experiments "
                        "service",
                    )
                ],
            )
        self.url = url.rstrip("/") + "/"
        self.token = token if token is not None else os.environ.get("KUBELAB_API_TOKEN", "")
        self.timeout = timeout
        self.server_root = server_root or os.environ.get("KUBELAB_SERVER_ROOT")
        self.session = requests.Session()
        if self.token:
            self.session.headers["Authorization"] = f"token {self.token}"

    @classmethod
    def available(cls) -> bool:
        return bool(os.environ.get("KUBELAB_API_URL"))

    # -- plumbing -------------------------------------------------------------------------
    def request(self, method: str, path: str, stream: bool = False, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", None if stream else self.timeout)
        try:
            response = self.session.request(method, self.url + path, stream=stream, **kwargs)
        except requests.RequestException as exc:
            raise Unreachable(f"cannot reach the kubelab API at {self.url}: {exc}") from None
        if response.status_code >= 400:
            raise error_from(response)
        return response

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        return response.json() if response.content else None

    def record(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """A call the API answers with one JSON object (a record, a session, a body)."""
        body: dict[str, Any] = self.json(method, path, **kwargs)
        return body

    def items(self, path: str, key: str = "items") -> builtins.list[dict[str, Any]]:
        """`GET path`'s list of records."""
        found: builtins.list[dict[str, Any]] = self.json("GET", path)[key]
        return found

    def cwd_param(self, base_dir: str | os.PathLike[str] | None) -> dict[str, str]:
        """`?cwd=` for relative paths in a spec: `base_dir` as the server sees it (under its root)."""
        if base_dir is None or not self.server_root:
            return {}
        base, root = Path(base_dir).resolve(), Path(self.server_root).resolve()
        if base != root and root not in base.parents:
            return {}
        return {"cwd": str(base.relative_to(root))}

    # -- experiments (the experiments service's verbs) ----------------------------------------------------
    def submit(self, spec: dict[str, Any], base_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        return self.record("POST", "experiments", json=spec, params=self.cwd_param(base_dir))

    def list(
        self, query: str = "", sort: str = "", limit: int | None = None, offset: int = 0
    ) -> tuple[builtins.list[dict[str, Any]], int]:
        params: dict[str, Any] = {"query": query, "sort": sort, "offset": offset}
        if limit is not None:
            params["limit"] = limit
        body = self.record("GET", "experiments", params=params)
        return body["items"], body["total"]

    def get(self, run_id: str) -> dict[str, Any]:
        return self.record("GET", f"experiments/{_id(run_id)}")

    def stop(self, run_id: str) -> dict[str, Any]:
        return self.record("POST", f"experiments/{_id(run_id)}/stop")

    def delete(self, run_id: str) -> None:
        self.request("DELETE", f"experiments/{_id(run_id)}")

    def logs(
        self, run_id: str, replica: int = 0, follow: bool = False, timestamps: bool = False
    ) -> Iterator[str]:
        response = self.request(
            "GET",
            f"experiments/{_id(run_id)}/logs",
            stream=follow,
            params={"replica": replica, "follow": int(follow), "timestamps": int(timestamps)},
        )
        if not follow:
            yield response.text
            return
        with response:
            yield from response.iter_content(chunk_size=None, decode_unicode=True)

    def metrics(self, run_id: str) -> builtins.list[dict[str, Any]]:
        return self.items(f"experiments/{_id(run_id)}/metrics", "points")

    def system(self, run_id: str, points: int | None = None) -> dict[str, Any]:
        params = {} if points is None else {"points": points}
        return self.record("GET", f"experiments/{_id(run_id)}/system", params=params)

    def resources(self) -> dict[str, Any]:
        return self.record("GET", "resources")

    # -- sweeps ---------------------------------------------------------------------------
    def submit_sweep(
        self, spec: dict[str, Any], base_dir: str | os.PathLike[str] | None = None
    ) -> dict[str, Any]:
        return self.record("POST", "sweeps", json=spec, params=self.cwd_param(base_dir))

    def sweeps(self) -> builtins.list[dict[str, Any]]:
        return self.items("sweeps")

    def sweep(self, sweep_id: str) -> dict[str, Any]:
        return self.record("GET", f"sweeps/{_id(sweep_id)}")

    def stop_sweep(self, sweep_id: str) -> dict[str, Any]:
        return self.record("POST", f"sweeps/{_id(sweep_id)}/stop")

    def resume_sweep(self, sweep_id: str) -> dict[str, Any]:
        return self.record("POST", f"sweeps/{_id(sweep_id)}/resume")

    # -- pipelines and schedules -------------------------------------------------------------
    def submit_pipeline(
        self,
        spec: dict[str, Any],
        base_dir: str | os.PathLike[str] | None = None,
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return self._submit_with_params("pipelines", spec, base_dir, params)

    def pipelines(self) -> builtins.list[dict[str, Any]]:
        return self.items("pipelines")

    def pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return self.record("GET", f"pipelines/{_id(pipeline_id)}")

    def stop_pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return self.record("POST", f"pipelines/{_id(pipeline_id)}/stop")

    def resume_pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return self.record("POST", f"pipelines/{_id(pipeline_id)}/resume")

    def submit_schedule(
        self,
        spec: dict[str, Any],
        base_dir: str | os.PathLike[str] | None = None,
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return self._submit_with_params("schedules", spec, base_dir, params)

    def _submit_with_params(
        self,
        collection: str,
        spec: dict[str, Any],
        base_dir: str | os.PathLike[str] | None,
        params: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """A pipeline or schedule: its spec with `-P` values, files relative to `base_dir`."""
        body = {"spec": spec, "params": params or {}}
        return self.record("POST", collection, json=body, params=self.cwd_param(base_dir))

    # -- TensorBoard ----------------------------------------------------------------------
    def tensorboard(self, request: dict[str, Any]) -> dict[str, Any]:
        """Start or reuse a session: `{"experiments": [...]}`, `{"sweep": id}`, `{"query": q}`..."""
        return self.record("POST", "tensorboards", json=request)

    def tensorboards(self) -> builtins.list[dict[str, Any]]:
        return self.items("tensorboards")

    def stop_tensorboard(self, session_id: str) -> dict[str, Any]:
        return self.record("DELETE", f"tensorboards/{_id(session_id)}")

    def page_url(self, path: str) -> str:
        """An absolute URL for a server path such as a session's `url`."""
        from urllib.parse import urljoin

        return urljoin(self.url, path)

    # -- events ---------------------------------------------------------------------------
    def events(self) -> Iterator[tuple[str, Any]]:
        """Server-sent events as `(kind, data)`; `("connected", None)` first, so a reader knows
        when it is safe to read current state without missing a change."""
        response = self.request("GET", "events", stream=True)
        data: list[str]
        with response:
            kind, data = "message", []
            for raw in response.iter_lines(decode_unicode=True):
                line = raw if raw is not None else ""
                if line.startswith(":"):
                    if line[1:].strip() == "connected":
                        yield "connected", None
                    continue
                if line == "":
                    if data:
                        text = "\n".join(data)
                        try:
                            yield kind, json.loads(text)
                        except ValueError:
                            yield kind, text
                    kind, data = "message", []
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    kind = value
                elif name == "data":
                    data.append(value)

    def close(self) -> None:
        self.session.close()


def _id(value: str) -> str:
    return quote(str(value), safe="")
