"""Jupyter Server side of kubelab: the REST API, the event stream and the kernels' credentials.

Enabled by `etc/jupyter/jupyter_server_config.d/kubelab.json` (shipped in the wheel) or
`--ServerApp.jpserver_extensions='{"kubelab.server_extension": true}'`.
"""


def _jupyter_server_extension_points() -> list[dict[str, object]]:
    from kubelab.server_extension.app import KubeLabApp

    return [{"module": "kubelab.server_extension", "app": KubeLabApp}]
