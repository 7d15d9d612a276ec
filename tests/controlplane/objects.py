"""Create manifests on the session's cluster without tests colliding.

Several tests render the same objects (`user-alice`, the hub's ClusterRole). `create_renamed`
gives each listed name a per-call suffix, consistently wherever it appears (references,
environment values), then creates everything through the API server's full admission chain.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client, config, utils


def create_renamed(
    kubeconfig: Path, objects: list[dict[str, Any]], names: list[str], dry_run: bool = False
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Create `objects` with each of `names` suffixed; return the objects and the renaming."""
    suffix = uuid.uuid4().hex[:6]
    renaming = {name: f"{name}-{suffix}" for name in names}
    text = json.dumps(objects)
    for old, new in renaming.items():
        text = text.replace(f'"{old}"', f'"{new}"')
    renamed = json.loads(text)
    with config.new_client_from_config(str(kubeconfig)) as api:
        for obj in renamed:
            utils.create_from_dict(
                api,
                obj,
                namespace=obj["metadata"].get("namespace"),
                **({"dry_run": "All"} if dry_run else {}),
            )
    return renamed, renaming


def delete_namespaces(kubeconfig: Path, *names: str) -> None:
    with config.new_client_from_config(str(kubeconfig)) as api:
        core = client.CoreV1Api(api)
        for name in names:
            try:
                core.delete_namespace(name)
            except client.ApiException as error:
                if error.status != 404:
                    raise
