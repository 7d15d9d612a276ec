"""A Kubernetes API server for tests, speaking enough of the REST API for the official clients.

See `server.KubeApiServer` (the entry point), `control.ClusterControls` (the test controls) and
`fixtures` (pytest fixtures, including running against a real cluster).
"""

from .errors import ApiError
from .server import KubeApiServer

__all__ = ["ApiError", "KubeApiServer"]
