"""Names and labels of the objects kubelab creates.

A name must be a DNS-1123 label (the Service name even a DNS-1035 one) short enough that
the Job controller's pod hostnames `<job>-<index>` still fit in 63 characters. The run id
makes it unique within one home; a short hash of user and home makes it unique when several
users (or homes) share a namespace, as in the trusted-lab layout.
"""

from __future__ import annotations

import hashlib
import re

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "kubelab"
EXPERIMENT = "kubelab.io/experiment"
USER = "kubelab.io/user"
SWEEP = "kubelab.io/sweep"
PIPELINE = "kubelab.io/pipeline"
PIPELINE_STEP = "kubelab.io/pipeline-step"
ROLE = "kubelab.io/role"
SPEC_ANNOTATION = "kubelab.io/spec"
RUN_DIR_ANNOTATION = "kubelab.io/run-dir"
USER_ANNOTATION = "kubelab.io/user"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
ELASTIC_ANNOTATION = "kubelab.io/elastic"  # MIN:MAX on an elastic Indexed Job kubelab resizes
RESIZED_ANNOTATION = "kubelab.io/resized"  # why it has its size now (the run's status reason)

SLUG_LIMIT = 20  # keeps `<slug>-<id>-<owner>-ps-<index>` within 63 characters
_INVALID = re.compile(r"[^a-z0-9]+")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def slug(text: str, limit: int = SLUG_LIMIT) -> str:
    """Lower-case letters, digits and single dashes, starting with a letter."""
    words = _INVALID.sub("-", text.lower()).strip("-")
    if not words or not words[0].isalpha():
        words = ("run-" + words).strip("-")
    return words[:limit].rstrip("-")


def owner_hash(user: str, home: str) -> str:
    """Four characters that tell apart runs of different users or homes in one namespace."""
    return hashlib.sha256(f"{user}\0{home}".encode()).hexdigest()[:4]


def job_name(display_name: str, run_id: str, owner: str) -> str:
    """`<name>-<run id>-<owner>`: readable in `kubectl get jobs`, unique, DNS-1035 safe."""
    if not owner:
        return f"{slug(display_name)}-{run_id}"
    return f"{slug(display_name)}-{run_id}-{owner}"


def ps_job_name(job: str) -> str:
    return f"{job}-ps"


def label_value(text: str) -> str:
    """`text` as a valid label value; changed or long values get a hash so they stay distinct."""
    if len(text) <= 63 and _LABEL_VALUE.match(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")[:54].rstrip("-_.")
    return f"{cleaned}-{digest}" if cleaned else digest


def user_selector(user: str) -> str:
    """The label selector for every object kubelab made for `user`."""
    return f"{MANAGED_BY}={MANAGER},{USER}={label_value(user)}"


def run_selector(user: str, run_id: str) -> str:
    return f"{user_selector(user)},{EXPERIMENT}={run_id}"
