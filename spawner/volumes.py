"""cube-studio's `volume_mount` grammar, turned into Kubernetes volumes and mounts.

Labs moving from cube-studio keep their group settings as they wrote them, e.g.
`kubeflow-user-workspace(pvc):/mnt/;data/aidata(hostpath):/aidata;4G(memory):/dev/shm`.
Entries are `SOURCE(KIND):MOUNT_PATH`, separated by `;` or `,`:

- `name(pvc):/mnt/` — a mount path ending in `/` mounts the user's own subPath of the claim
  at `/mnt/<user>`; `name(pvc):/data` mounts the whole claim.
- `path(hostpath):/aidata` — a relative host path is taken from the root `/`.
- `4G(memory):/dev/shm` — a memory-backed emptyDir of that size.
- `name(configmap):/etc/x`, `name(secret):/etc/y` — read-only.
- `server:/export(nfs):/nfs` — an NFS export.

A malformed string is refused with the character position of the bad entry and the reason.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.quantity import parse_quantity

KINDS = ("pvc", "hostpath", "memory", "configmap", "secret", "nfs")
_ENTRY = re.compile(r"^(?P<source>[^()]*)[(（](?P<kind>[^()（）]*)[)）]:(?P<path>.*)$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclass(frozen=True)
class VolumeMount:
    """One parsed entry; `per_user` means the claim is mounted at `<path>/<user>` by the user's
    subPath; `sub_path` is a fixed folder of the claim (a user's own claim's `workspace`)."""

    kind: str
    source: str
    path: str
    per_user: bool = False
    read_only: bool = False
    sub_path: str = ""

    def mount_path(self, user: str) -> str:
        return f"{self.path.rstrip('/')}/{user}" if self.per_user else self.path


def parse_volume_mount(text: str, field: str = "volume_mount") -> list[VolumeMount]:
    """Every entry of `text`, or a ValidationError listing each bad entry by position."""
    if not isinstance(text, str):
        raise ValidationError(
            "invalid volume_mount",
            [FieldError(field, f"must be a string such as 'name(pvc):/mnt/', not {type(text).__name__}")],
        )
    errors: list[FieldError] = []
    mounts: list[VolumeMount] = []
    for position, entry in _split(text):
        try:
            mounts.append(_parse_entry(entry))
        except ValueError as exc:
            errors.append(FieldError(field, f"entry '{entry}' at position {position}: {exc}"))
    if errors:
        raise ValidationError("invalid volume_mount", errors)
    return mounts


def _split(text: str) -> Iterable[tuple[int, str]]:
    """(1-based position, stripped entry) for each non-empty entry; `;`, `,` and `；` split."""
    start = 0
    for index, char in enumerate(text + ";"):
        if char in ";,；，":
            raw = text[start:index]
            if raw.strip():
                yield start + 1 + (len(raw) - len(raw.lstrip())), raw.strip()
            start = index + 1


def _parse_entry(entry: str) -> VolumeMount:
    match = _ENTRY.match(entry)
    if not match:
        raise ValueError("must be SOURCE(KIND):MOUNT_PATH, e.g. 'workspace(pvc):/mnt/'")
    source, kind, path = match["source"].strip(), match["kind"].strip().lower(), match["path"].strip()
    if kind not in KINDS:
        raise ValueError(f"unknown kind '{kind}'{did_you_mean(kind, KINDS)} (kinds: {', '.join(KINDS)})")
    if not source:
        raise ValueError(f"the {kind} source before '(' is empty")
    if not path.startswith("/"):
        raise ValueError(f"the mount path '{path}' must be absolute (start with '/')")
    if ".." in path.split("/"):
        raise ValueError(f"the mount path '{path}' must not contain '..'")
    if kind == "pvc":
        _check_name(source, "claim name", _DNS_SUBDOMAIN)
        return VolumeMount("pvc", source, path, per_user=path.endswith("/") and path != "/")
    if kind == "hostpath":
        host = source if source.startswith("/") else "/" + source
        if ".." in host.split("/"):
            raise ValueError(f"the host path '{source}' must not contain '..'")
        return VolumeMount("hostpath", host, path)
    if kind == "memory":
        try:
            parse_quantity(source)
        except ValueError as exc:
            raise ValueError(f"the memory size {exc}") from None
        return VolumeMount("memory", source, path)
    if kind == "nfs":
        server, sep, export = source.partition(":")
        if not sep or not server or not export.startswith("/"):
            raise ValueError(f"the NFS source '{source}' must be SERVER:/EXPORT")
        return VolumeMount("nfs", source, path)
    _check_name(source, f"{kind} name", _DNS_SUBDOMAIN)
    return VolumeMount(kind, source, path, read_only=True)


def _check_name(name: str, what: str, pattern: re.Pattern[str]) -> None:
    if len(name) > 253 or not pattern.match(name):
        raise ValueError(f"the {what} '{name}' must be lowercase letters, digits, '-' and '.'")


def check_unique_paths(mounts: Iterable[dict[str, Any]], field: str = "volume_mount") -> None:
    """Refuse two mounts at one path: Kubernetes would reject the pod much later, less clearly."""
    seen: dict[str, str] = {}
    errors = []
    for mount in mounts:
        path = mount["mountPath"].rstrip("/") or "/"
        if path in seen:
            errors.append(
                FieldError(
                    field,
                    f"mount path '{path}' is used by both volume '{seen[path]}' and volume '{mount['name']}'",
                )
            )
        else:
            seen[path] = mount["name"]
    if errors:
        raise ValidationError("invalid volume_mount", errors)


def volume_name(mount: VolumeMount) -> str:
    """A stable DNS label for the volume: the same source gives the same name, so a claim
    mounted twice (per-user workspace and shared data) is one volume."""
    base = re.sub(r"[^a-z0-9]+", "-", f"{mount.kind}-{mount.source}".lower()).strip("-")
    digest = hashlib.sha256(f"{mount.kind}:{mount.source}".encode()).hexdigest()[:8]
    if len(base) > 54 or base != f"{mount.kind}-{mount.source}".lower():
        base = base[:54].rstrip("-")
        return f"{base}-{digest}"
    return base


def to_volume(mount: VolumeMount) -> dict[str, Any]:
    """The V1Volume dict for one entry."""
    name = volume_name(mount)
    if mount.kind == "pvc":
        return {"name": name, "persistentVolumeClaim": {"claimName": mount.source}}
    if mount.kind == "hostpath":
        return {"name": name, "hostPath": {"path": mount.source, "type": "DirectoryOrCreate"}}
    if mount.kind == "memory":
        return {"name": name, "emptyDir": {"medium": "Memory", "sizeLimit": mount.source}}
    if mount.kind == "configmap":
        return {"name": name, "configMap": {"name": mount.source}}
    if mount.kind == "secret":
        return {"name": name, "secret": {"secretName": mount.source}}
    server, _, export = mount.source.partition(":")
    return {"name": name, "nfs": {"server": server, "path": export}}


_FOLDER = re.compile(r"^[a-z0-9_-][a-z0-9._-]{0,252}$")


def user_folder(user: str, field: str = "username") -> str:
    """`user` as a subPath: one folder name (no `/`, not `.` or `..`, no leading dot), or a
    ValidationError. Users share a claim only by subPath (trusted-lab mode, a group's
    `name(pvc):/mnt/`), so a name that could climb out of its folder is never mounted: the
    spawner passes KubeSpawner's slug (`[a-z0-9-]`), and this holds whatever else reaches it."""
    if not isinstance(user, str) or not _FOLDER.match(user):
        reason = (
            f"'{user}' cannot be a folder of a shared claim: one name of a-z, 0-9, '.', '_' "
            "and '-', not starting with '.'"
        )
        raise ValidationError("invalid subPath", [FieldError(field, reason)])
    return user


def to_mount(mount: VolumeMount, user: str) -> dict[str, Any]:
    """The V1VolumeMount dict for one entry; per-user claims get the user's subPath."""
    result: dict[str, Any] = {"name": volume_name(mount), "mountPath": mount.mount_path(user)}
    if mount.per_user:
        result["subPath"] = user_folder(user)
    elif mount.sub_path:
        result["subPath"] = mount.sub_path
    if mount.read_only:
        result["readOnly"] = True
    return result


def kubernetes_volumes(
    mounts: Iterable[VolumeMount], user: str, field: str = "volume_mount"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, volumeMounts) for a pod; one volume per distinct source, unique mount paths."""
    volumes: dict[str, dict[str, Any]] = {}
    result_mounts = []
    for mount in mounts:
        volume = to_volume(mount)
        volumes.setdefault(volume["name"], volume)
        result_mounts.append(to_mount(mount, user))
    check_unique_paths(result_mounts, field)
    return list(volumes.values()), result_mounts
