"""`kubelab hub` (JupyterHub on this machine) and `kubelab hub render` (what a spawn creates).

`render` builds every object KubeLabSpawner would create for a user and form options, with
KubeSpawner's own pod builder and no cluster, so an admin can check a configuration (GPU
catalog, groups, storage) before users meet it. A refusal prints the sentence the form shows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, KubelabError, ValidationError

from .offline import offline_spawner

HUB_CONFIG_DIR = Path(__file__).resolve().parent.parent / "hub_config"
_RENDER_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: render, cluster: {server: "https://render.invalid"}}]
users: [{name: render, user: {token: render}}]
contexts: [{name: render, context: {cluster: render, user: render}}]
current-context: render
"""


def default_config() -> Path:
    path = Path(os.environ.get("KUBELAB_HUB_CONFIG") or HUB_CONFIG_DIR / "jupyterhub_config.py")
    if not path.is_file():
        raise ValidationError(
            "no hub configuration",
            [FieldError("config", f"{path} does not exist; pass --config PATH or set KUBELAB_HUB_CONFIG")],
        )
    return path


def load_config(path: Path) -> Any:
    """The traitlets config a hub would load from `path` (in Kubernetes mode for rendering)."""
    from traitlets.config.loader import PyFileConfigLoader

    if not path.is_file():
        raise ValidationError("no hub configuration", [FieldError("config", f"{path} does not exist")])
    previous = os.environ.get("KUBELAB_HUB_MODE")
    os.environ["KUBELAB_HUB_MODE"] = "kubernetes"
    try:
        return PyFileConfigLoader(path.name, str(path.parent)).load_config()
    finally:
        if previous is None:
            os.environ.pop("KUBELAB_HUB_MODE", None)
        else:
            os.environ["KUBELAB_HUB_MODE"] = previous


async def _render(config: Any, user: str, groups: list[str], options: dict[str, Any]) -> list[dict[str, Any]]:
    spawner = await offline_spawner(config, user, groups)
    spawner.user_options = options
    try:
        return await spawner.render()
    except Exception as exc:
        message = getattr(exc, "jupyterhub_message", None)
        if message:
            raise _Refused(message) from None
        raise


class _Refused(KubelabError):
    error = "refused"
    status = 422


class _OfflineKube:
    """KubeSpawner loads the default kubeconfig, whose path kubernetes_asyncio reads from
    $KUBECONFIG once, at import: point that default at `path` (or at a render-only file that is
    never contacted) for the duration of a call. KubeSpawner loads it once per process (an
    lru_cache), so that cache is cleared on the way in and out: a render, then a reconcile, in
    one process each get their own cluster."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.tmp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> None:
        from kubernetes_asyncio.config import kube_config
        from kubespawner.clients import load_config

        load_config.cache_clear()

        self.previous = kube_config.KUBE_CONFIG_DEFAULT_LOCATION
        path = self.path
        if path is None:
            self.tmp = tempfile.TemporaryDirectory()
            path = str(Path(self.tmp.name) / "kubeconfig")
            Path(path).write_text(_RENDER_KUBECONFIG)
        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = path

    def __exit__(self, *exc: object) -> None:
        from kubernetes_asyncio.config import kube_config
        from kubespawner.clients import load_config

        load_config.cache_clear()

        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = self.previous
        if self.tmp is not None:
            self.tmp.cleanup()


def render(
    user: str,
    groups: list[str],
    options: dict[str, Any],
    config_path: Path | None = None,
) -> list[dict[str, Any]]:
    """Every object a spawn would create, in order; a refusal raises with the form's sentence."""
    import asyncio  # here, not at the top: every `kubelab` command imports this module (~40 ms)

    config = load_config(config_path or default_config())
    with _OfflineKube():
        return asyncio.run(_render(config, user, groups, options))


def hub_namespace_of(config: Any, given: str | None) -> str:
    """The hub's namespace: the flag, else `KubeLabSpawner.hub_namespace`, else z2jh's `jhub`."""
    return given or config.KubeLabSpawner.get("hub_namespace") or "jhub"


def render_all(
    config_path: Path | None = None, hub_namespace: str | None = None, role_file: Path | None = None
) -> list[dict[str, Any]]:
    """Every object an admin applies besides the chart (see kubelab.spawner.install)."""
    from kubelab.backends.kubernetes.priority_classes import priority_classes

    from . import admission_policy, builds, install, objects

    config = load_config(config_path or default_config())
    hub_ns = hub_namespace_of(config, hub_namespace)
    result = [*install.hub_rbac(hub_ns), install.notebook_role_configmap(hub_ns, role_file)]
    result += priority_classes()  # what `priority: low|normal|high` and notebooks run at
    if config.KubeLabSpawner.get("trusted_lab"):  # the shared namespace and its shared objects
        import asyncio

        with _OfflineKube():
            spawner = asyncio.run(offline_spawner(config, "-", []))
        result += [objects.namespace(spawner.namespace), *spawner.namespace_objects(spawner.plan()[1])]
    else:  # what bounds the user namespaces this hub labels
        result += admission_policy.admission_objects(hub_ns)
    names = builds.BuildTraits.class_trait_names()
    given = {name: config.KubeLabSpawner[name] for name in names if name in config.KubeLabSpawner}
    return result + builds.admin_objects(builds.BuildTraits(**given))  # the build namespace


def _print(objects: list[dict[str, Any]], output: str) -> None:
    if output == "json":
        print(json.dumps(objects, indent=2))
    else:
        import yaml

        class Dumper(yaml.SafeDumper):
            pass

        def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
            style = "|" if "\n" in value else None  # a ConfigMap's file reads as the file
            return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

        Dumper.add_representer(str, text)
        print(yaml.dump_all(objects, Dumper=Dumper, sort_keys=False).rstrip())


def cmd_render(args: argparse.Namespace) -> int:
    config = Path(args.config) if args.config else None
    if args.all:
        if args.user or args.group or args.options:
            raise ValidationError(
                "invalid arguments",
                [
                    FieldError(
                        "all",
                        "prints the admin's objects, for no user: leave out --user, --group and --options",
                    )
                ],
            )
        role_file = Path(args.role_file) if args.role_file else None
        objects = render_all(config, args.hub_namespace, role_file)
        if args.kueue:  # a cluster with Kueue orders queued runs by these (its CRD must exist)
            from kubelab.backends.kubernetes.priority_classes import workload_priority_classes

            objects += workload_priority_classes()
        _print(objects, args.output)
        return 0
    if not args.user:
        raise ValidationError("invalid arguments", [FieldError("user", "is required (or pass --all)")])
    try:
        options = json.loads(args.options) if args.options else {}
    except json.JSONDecodeError as exc:
        raise ValidationError(
            "invalid --options", [FieldError("options", f"is not JSON: {exc.msg}")]
        ) from None
    if not isinstance(options, dict):
        raise ValidationError("invalid --options", [FieldError("options", "must be a JSON object")])
    if args.group:
        options.setdefault("group", args.group)
    groups = [args.group] if args.group and args.group != "public" else []
    try:
        objects = render(args.user, groups, options, config)
    except _Refused as exc:
        print(exc.detail, file=sys.stderr)
        return 2
    _print(objects, args.output)
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    """Bring every user namespace (or those of --user) up to date with the configuration."""
    import asyncio

    from aiohttp import ClientError
    from kubernetes_asyncio.client.rest import ApiException
    from kubernetes_asyncio.config import ConfigException

    from .reconcile import reconcile_all

    if args.kubeconfig and not Path(args.kubeconfig).is_file():
        raise ValidationError(
            "no cluster credentials", [FieldError("kubeconfig", f"{args.kubeconfig} does not exist")]
        )
    config = load_config(Path(args.config) if args.config else default_config())
    try:
        with _OfflineKube(args.kubeconfig) if args.kubeconfig else contextlib.nullcontext():
            reports = asyncio.run(reconcile_all(config, args.user or None))
    except ConfigException as exc:
        raise ValidationError("no cluster credentials", [FieldError("kubeconfig", str(exc))]) from None
    except (ClientError, OSError, asyncio.TimeoutError) as exc:
        raise KubelabError(f"cannot reach the cluster: {exc}") from None
    except ApiException as exc:
        raise KubelabError(
            f"the cluster refused to list user namespaces: {exc.status} {exc.reason}"
        ) from None
    for report in reports:
        print(json.dumps(report, sort_keys=True), flush=True)
    return 1 if any("error" in r for r in reports) else 0


def cmd_hub(args: argparse.Namespace) -> int:
    """JupyterHub in the foreground with the local spawner (or Kubernetes with --mode)."""
    config = Path(args.config) if args.config else default_config()
    root = Path(args.root or os.environ.get("KUBELAB_HUB_ROOT") or Path.home() / "kubelab-hub").resolve()
    root.mkdir(parents=True, exist_ok=True)
    auth = os.environ.get("KUBELAB_HUB_AUTH") or ("pam" if args.mode == "local" else "oauth")
    password = os.environ.get("KUBELAB_HUB_PASSWORD") or secrets.token_urlsafe(12)
    env = {
        **os.environ,
        "KUBELAB_HUB_MODE": args.mode,
        "KUBELAB_HUB_ROOT": str(root),
        "KUBELAB_HUB_AUTH": auth,
        "KUBELAB_HUB_PASSWORD": password,
        # where the GPU culler reaches users' servers to warn them (through the hub's proxy)
        "KUBELAB_HUB_PUBLIC_URL": f"http://{args.ip if args.ip not in ('', '0.0.0.0') else '127.0.0.1'}"
        f":{args.port}",
    }
    if args.mode == "local":
        from .preflight import check_runnable_by_users, single_user_notice

        if os.geteuid() != 0:
            import getpass

            print(single_user_notice(getpass.getuser()), file=sys.stderr, flush=True)
        elif os.environ.get("KUBELAB_HUB_RUN_AS_USERS") != "0":
            check_runnable_by_users()
    if not shutil.which("configurable-http-proxy"):
        raise ValidationError(
            "JupyterHub needs its proxy",
            [
                FieldError(
                    "configurable-http-proxy",
                    "is not installed; install it with `npm install -g configurable-http-proxy`",
                )
            ],
        )
    command = [
        sys.executable,
        "-m",
        "jupyterhub",
        "-f",
        str(config),
        f"--ip={args.ip}",
        f"--port={args.port}",
        f"--JupyterHub.db_url=sqlite:///{root / 'jupyterhub.sqlite'}",
        f"--JupyterHub.cookie_secret_file={root / 'jupyterhub_cookie_secret'}",
        f"--ConfigurableHTTPProxy.pid_file={root / 'jupyterhub-proxy.pid'}",
    ]
    host = "localhost" if args.ip in ("", "0.0.0.0", "127.0.0.1") else args.ip
    if auth == "shared-password":  # the opt-in demo
        print(f"kubelab hub: http://{host}:{args.port}/  (any user name; password: {password})", flush=True)
        if not os.environ.get("KUBELAB_HUB_PASSWORD"):
            print("set KUBELAB_HUB_PASSWORD to choose the password", file=sys.stderr, flush=True)
    else:
        print(f"kubelab hub: http://{host}:{args.port}/  (log in with {auth})", flush=True)
    os.chdir(root)
    os.execve(sys.executable, command, env)  # JupyterHub takes over this process (and its signals)
    return 0  # pragma: no cover - exec does not return


def register(subparsers: Any) -> None:
    hub = subparsers.add_parser(
        "hub", help="run JupyterHub with kubelab's spawners on this machine", description=cmd_hub.__doc__
    )
    hub.add_argument("--ip", default="127.0.0.1")
    hub.add_argument("--port", type=int, default=8000)
    hub.add_argument("--mode", choices=("local", "kubernetes"), default="local")
    hub.add_argument("--root", help="where workspaces, archives and the hub database live")
    hub.add_argument("--config", help="a jupyterhub_config.py (default: hub_config/jupyterhub_config.py)")
    hub.set_defaults(handler=cmd_hub)
    sub = hub.add_subparsers(dest="hub_command")
    render_parser = sub.add_parser(
        "render", help="print every object a spawn would create (or, with --all, an admin applies)"
    )
    render_parser.add_argument("--user")
    render_parser.add_argument(
        "--all",
        action="store_true",
        help="the objects an admin applies besides the chart: hub ClusterRole and binding, the "
        "notebook Role's ConfigMap, kubelab's PriorityClasses, the admission policies bounding user "
        "namespaces and their bindings (or the shared namespace's objects in trusted-lab mode)",
    )
    render_parser.add_argument(
        "--kueue", action="store_true", help="with --all: also Kueue's WorkloadPriorityClasses"
    )
    render_parser.add_argument("--hub-namespace", help="with --all: the hub's namespace (default jhub)")
    render_parser.add_argument(
        "--role-file",
        help="with --all: the notebook Role manifest (default hub_config/rbac/notebook-role.yaml)",
    )
    render_parser.add_argument("--group", help="the project group (declared in JupyterHub.load_groups)")
    render_parser.add_argument("--options", help='the form\'s options as JSON, e.g. \'{"gpus": "1(V100)"}\'')
    render_parser.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    render_parser.add_argument(
        "--config", help="a jupyterhub_config.py (default: hub_config/jupyterhub_config.py)"
    )
    render_parser.set_defaults(handler=cmd_render)
    reconcile_parser = sub.add_parser(
        "reconcile",
        help="bring every user namespace up to date with the configuration (server-side apply; "
        "never deletes a claim)",
        description=cmd_reconcile.__doc__,
    )
    reconcile_parser.add_argument("--user", action="append", help="only this user's namespace (repeatable)")
    reconcile_parser.add_argument(
        "--kubeconfig", help="default: in the hub's pod its account, else $KUBECONFIG"
    )
    reconcile_parser.add_argument(
        "--config", help="a jupyterhub_config.py (default: hub_config/jupyterhub_config.py)"
    )
    reconcile_parser.set_defaults(handler=cmd_reconcile)
