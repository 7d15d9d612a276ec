"""CustomResourceDefinitions of optional cluster add-ons kubelab discovers: the Kubeflow
Training Operator's job kinds and Argo Workflows' Workflow, written from their documented API
group, version and kind; KServe's InferenceService and the Gateway API's kinds as their projects
publish them (`published_crds`). Only the API surface is installed, never the operator or
controller: tests play it by writing the status it would."""

from __future__ import annotations

from typing import Any

import yaml

TRAINING_OPERATOR = ("PyTorchJob", "TFJob")


def crd(group: str, version: str, kind: str, short_names: tuple[str, ...] = ()) -> dict[str, Any]:
    """A namespaced resource whose spec and status take any fields, with a status subresource."""
    plural = kind.lower() + "s"
    names: dict[str, Any] = {
        "kind": kind,
        "plural": plural,
        "singular": kind.lower(),
        "listKind": f"{kind}List",
    }
    if short_names:
        names["shortNames"] = list(short_names)
    loose = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": names,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "properties": {"spec": loose, "status": loose}}
                    },
                }
            ],
        },
    }


def training_operator_crd(kind: str) -> dict[str, Any]:
    return crd("kubeflow.org", "v1", kind)


# Argo Workflows: group argoproj.io, version v1alpha1, kind Workflow (short name wf).
WORKFLOW_CRD = crd("argoproj.io", "v1alpha1", "Workflow", ("wf",))


def published_crds(*names: str) -> list[dict[str, Any]]:
    """The CRDs named, as their projects publish them in the Go modules `cluster/addons` pins
    (KServe's full InferenceService schema, the Gateway API's standard channel): the API server
    validates objects against their real schemas."""
    from .build import ensure_addon_crds

    paths = ensure_addon_crds()
    documents = []
    for name in names:
        (document,) = [d for d in yaml.safe_load_all(paths[name].read_text()) if d]
        documents.append(document)
    return documents


KSERVE = "inferenceservices.serving.kserve.io"
GATEWAY_API = tuple(
    f"{plural}.gateway.networking.k8s.io"
    for plural in ("gatewayclasses", "gateways", "httproutes", "referencegrants")
)
