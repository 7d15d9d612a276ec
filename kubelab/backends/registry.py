"""Which backends exist, by name, and the one factory every entry point builds them with.

The experiments service (and through it the CLI, the server, the magics, sweeps, pipelines and
schedules) and `kubelab render` ask `make_backend` for the backend `KUBELAB_BACKEND` names
(`local` by default). A name is found, in order:

- among the registered ones: `local` and `kubernetes` below (one line each), and whatever
  `register_backend` added in this process;
- as an entry point of the group `kubelab.backends` (how an installed package adds one:
  `[project.entry-points."kubelab.backends"] slurm = "kubelab_slurm:SlurmBackend"`), so the
  detached processes that also build backends (sweep and pipeline drivers, the scheduler) find
  it by the same name;
- as `package.module:attribute`, a factory on the Python path.

A factory is called with no arguments and returns a `Backend`. Factories are imported when
first used: the local backend never imports the Kubernetes client.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubelab.backends.base import Backend
from kubelab.errors import FieldError, ValidationError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

GROUP = "kubelab.backends"
VARIABLE = "KUBELAB_BACKEND"
DEFAULT = "local"
Factory = Callable[[], Backend]


@dataclass(frozen=True)
class Registration:
    create: Factory | str  # a factory, or "module:attribute" naming one (imported on first use)
    render: Factory | str | None = None  # builds manifests only, no connection; default: create


_registered: dict[str, Registration] = {}


def register_backend(name: str, factory: Factory | str, *, for_render: Factory | str | None = None) -> None:
    """Make `name` a backend of this process; `for_render` builds one for `kubelab render`
    (nothing to connect to) where `factory` would need more. Only this process sees it: the
    detached drivers find a backend by an entry point or a module path."""
    _registered[name] = Registration(factory, for_render)


register_backend("local", "kubelab.backends.local.backend:LocalBackend")
register_backend(
    "kubernetes",
    "kubelab.backends.kubernetes.backend:KubernetesBackend.from_environment",
    for_render="kubelab.backends.kubernetes.backend:KubernetesBackend.for_render",
)


def make_backend(name: str | None = None, *, for_render: bool = False, field: str = VARIABLE) -> Backend:
    """The backend called `name` (default: `$KUBELAB_BACKEND`, else local); with `for_render`,
    one that only builds manifests. An unknown name is refused naming `field` and the choices."""
    name = name or os.environ.get(VARIABLE) or DEFAULT
    factory = _factory(name, for_render, field)
    backend = factory()
    if not isinstance(backend, Backend):
        raise ValidationError(
            "unknown backend", [FieldError(field, f"{name!r} made a {type(backend).__name__}, not a Backend")]
        )
    return backend


def preload(name: str | None = None) -> None:
    """Import the backend's factory without calling it (a warm helper pays the imports ahead);
    an unknown name is left for the real call to refuse."""
    with contextlib.suppress(ValidationError):
        _factory(name or os.environ.get(VARIABLE) or DEFAULT, False, VARIABLE)


def backend_names() -> list[str]:
    """The registered names and the installed packages' entry points (not `module:attribute` ones)."""
    from importlib.metadata import entry_points

    return sorted({*_registered, *(point.name for point in entry_points(group=GROUP))})


def _factory(name: str, for_render: bool, field: str) -> Factory:
    registration = _registered.get(name)
    if registration is not None:
        chosen = (
            registration.render if for_render and registration.render is not None else registration.create
        )
        return _load(chosen, name, field)
    from importlib.metadata import entry_points  # only off the built-in names: ~15 ms of imports

    for point in entry_points(group=GROUP):
        if point.name == name:
            return _load(point, name, field)
    if ":" in name:
        return _load(name, name, field)
    reason = f"is not a backend: {name!r}; choose one of {', '.join(backend_names())}"
    raise ValidationError("unknown backend", [FieldError(field, reason)])


def _load(target: Factory | str | EntryPoint, name: str, field: str) -> Factory:
    if callable(target):
        return target
    value = target if isinstance(target, str) else target.value
    try:
        # "module:attribute" imported directly: importlib.metadata (~15-40 ms of imports, email
        # and socket among them) only where an entry point was looked up.
        loaded = _import(target) if isinstance(target, str) else target.load()
    except (ImportError, AttributeError, ValueError) as exc:
        reason = f"cannot load backend {name!r} from {value!r}: {exc}"
        raise ValidationError("unknown backend", [FieldError(field, reason)]) from exc
    if not callable(loaded):
        reason = f"backend {name!r}: {value!r} is not a factory (a class or function)"
        raise ValidationError("unknown backend", [FieldError(field, reason)])
    factory: Factory = loaded
    return factory


def _import(target: str) -> object:
    """The object `module:attribute.path` names (an entry point's value syntax)."""
    module, colon, attributes = (part.strip() for part in target.partition(":"))
    if not colon or not module or not attributes:
        raise ValueError(f"{target!r} is not of the form module:attribute")
    loaded: object = importlib.import_module(module)
    for attribute in attributes.split("."):
        loaded = getattr(loaded, attribute)
    return loaded
