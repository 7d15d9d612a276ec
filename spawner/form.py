"""The spawn form, shared by the cluster and the local spawner.

Its field names are the stable `user_options` keys, so what a user picks in the form and what
a script sends to JupyterHub's REST API are the same thing. The form shows free/total GPUs per
type as the availability watch sees them when the page is rendered, and what each type is: whole
GPUs, a MIG slice (its own resource) or a time-sliced share, counted in those units. A notebook
may ask for 1/n of a shareable GPU (`0.5`), as a run's `resources.gpus` does.
"""

from __future__ import annotations

from html import escape
from typing import Any

from . import interfaces
from .availability import Availability
from .groups import ProjectGroup
from .profiles import OPTION_KEYS, Catalog, GpuType


def options_from_form(formdata: dict[str, list[str]]) -> dict[str, Any]:
    """Form data (lists of strings) → user_options with the stable keys; blanks are dropped so
    the catalog's defaults apply. Unknown fields are kept, so validation can name them."""
    options: dict[str, Any] = {}
    for key, values in formdata.items():
        if key == "_xsrf":  # JupyterHub's form token, not an option
            continue
        value = values[0] if isinstance(values, list) and values else values
        if isinstance(value, str):
            value = value.strip()
        if value in ("", None):
            continue
        options[key] = value
    return options


def admin_error(exc: Any) -> str:
    """A group set up wrong is an admin's mistake: the form says which property, escaped."""
    lines = "<br>".join(escape(line.strip()) for line in exc.message().splitlines())
    return f'<div class="alert alert-danger kubelab-config-error">{lines}<br>Ask a hub admin to fix it.</div>'


def unit(gpu_type: GpuType) -> str:
    """What one unit of the type is, in the form's words."""
    if gpu_type.sharing == "mig":
        return f"MIG slice ({gpu_type.resource})"
    if gpu_type.sharing == "dra":
        return f"DRA device ({gpu_type.device_class})"
    if gpu_type.sharing == "time-slicing":
        return "time-sliced share (memory not isolated)"
    return "whole GPU"


def _type_choice(gpu_type: GpuType, availability: Availability | None) -> str:
    """`A100-1g.10gb: MIG slice (nvidia.com/mig-1g.10gb), 5 of 7 free`."""
    text = f"{gpu_type.name}: {unit(gpu_type)}"
    count = availability.types.get(gpu_type.name) if availability else None
    if count is not None and availability and gpu_type.name in availability.unknown:
        return f"{text}, {count.total} in its class, free count unknown"
    return text if count is None else f"{text}, {count.free} of {count.total} free"


def _select(name: str, label: str, choices: list[tuple[str, str]], selected: Any) -> str:
    items = "".join(
        f'<option value="{escape(value)}"{" selected" if str(selected) == value else ""}>'
        f"{escape(text)}</option>"
        for value, text in choices
    )
    return (
        f'<div class="form-group"><label for="kubelab-{name}">{escape(label)}</label>'
        f'<select class="form-control" id="kubelab-{name}" name="{name}">{items}</select></div>'
    )


def _text(name: str, label: str, value: Any, placeholder: str) -> str:
    shown = "" if value is None else escape(str(value))
    return (
        f'<div class="form-group"><label for="kubelab-{name}">{escape(label)}</label>'
        f'<input class="form-control" id="kubelab-{name}" name="{name}" value="{shown}" '
        f'placeholder="{escape(placeholder)}"></div>'
    )


def render_form(
    catalog: Catalog,
    groups: list[ProjectGroup],
    availability: Availability | None,
    previous: dict[str, Any] | None = None,
) -> str:
    """The form's HTML: group, profile, image, CPU, memory, GPUs, GPU type, shm, interface, and a table of
    free GPUs. `previous` (the last user_options) preselects the fields."""
    previous = {k: v for k, v in (previous or {}).items() if k in OPTION_KEYS}
    parts = ['<div class="kubelab-spawn-form">']
    if len(groups) > 1:
        parts.append(
            _select(
                "group",
                "Project group",
                [(g.name, g.name) for g in groups],
                previous.get("group", groups[0].name),
            )
        )
    if catalog.profiles:
        parts.append(
            _select(
                "profile",
                "Profile",
                [("", "(none)")] + [(p, p) for p in catalog.profiles],
                previous.get("profile", ""),
            )
        )
    if catalog.images:  # a group's `images` narrows this list; validation says so by name
        parts.append(
            _select(
                "image", "Image", [(i, i) for i in catalog.images], previous.get("image", catalog.images[0])
            )
        )
    parts.append(_text("cpu", "CPU", previous.get("cpu"), catalog.default_cpu))
    parts.append(_text("memory", "Memory", previous.get("memory"), catalog.default_memory))
    example = next((t.name for t in catalog.gpu_types if t.sharing != "exclusive"), "V100")
    label = f"GPUs (a count of the type's units, 0.5 or 0.25 to share one, or cube-studio's '1({example})')"
    parts.append(_text("gpus", label, previous.get("gpus"), "0"))
    if catalog.gpu_types:
        choices = [(t.name, _type_choice(t, availability)) for t in catalog.gpu_types]
        parts.append(_select("gpu_type", "GPU type", [("", "any")] + choices, previous.get("gpu_type", "")))
    parts.append(_text("shm", "Shared memory (/dev/shm)", previous.get("shm"), catalog.default_shm))
    choices = list(interfaces.INTERFACES.items())
    parts.append(_select("interface", "Open in", choices, previous.get("interface", interfaces.DEFAULT)))
    parts.append(availability_table(availability, catalog))
    parts.append("</div>")
    return "\n".join(parts)


def availability_table(availability: Availability | None, catalog: Catalog | None = None) -> str:
    if availability is None:
        return '<p class="kubelab-availability">GPU availability is not known right now.</p>'
    if not availability.types:
        return '<p class="kubelab-availability">No GPUs are configured.</p>'
    units = {t.name: unit(t) for t in catalog.gpu_types} if catalog else {}
    rows = "".join(
        f'<tr data-gpu-type="{escape(name)}"><td>{escape(name)}</td>'
        f'<td class="free">{"unknown" if name in availability.unknown else count.free}</td>'
        f'<td class="total">{count.total}</td>'
        f'<td class="unit">{escape(units.get(name, ""))}</td></tr>'
        for name, count in availability.types.items()
    )
    return (
        '<table class="table kubelab-availability"><thead><tr><th>GPU type</th><th>free</th>'
        f"<th>total</th><th>unit</th></tr></thead><tbody>{rows}</tbody></table>"
    )
