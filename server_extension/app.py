"""`KubeLabApp`: kubelab as a Jupyter Server extension.

It holds the user's `Experiments`, the event hub, and the credentials it gives its kernels
(`KUBELAB_API_URL`, `KUBELAB_API_TOKEN`) so `%%train` reaches this API unaided.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from jupyter_server.extension.application import ExtensionApp
from jupyter_server.utils import url_path_join
from traitlets import Float, Unicode

from kubelab.experiments import Experiments
from kubelab.server_extension import services as services_ext
from kubelab.server_extension import tensorboard as tensorboard_ext
from kubelab.server_extension.events import EventHub
from kubelab.server_extension.listen import adopt_inherited_socket
from kubelab.server_extension.routes import API_ROUTES
from kubelab.server_extension.streams import StreamSlots, limit_from_env

if TYPE_CHECKING:
    from jupyter_server.serverapp import ServerApp


class KubeLabApp(ExtensionApp):
    name = "kubelab"
    extension_url = "/lab"
    load_other_extensions = True

    home = Unicode("", config=True, help="Where runs are recorded (default: $KUBELAB_HOME or ~/.kubelab).")
    event_interval = Float(
        0.2, config=True, help="Seconds between looks at unfinished runs for the event stream."
    )
    # -- TensorBoard sessions (server_extension/tensorboard.py) --
    tensorboard_idle_timeout = Float(
        float(os.environ.get("KUBELAB_TENSORBOARD_IDLE_TIMEOUT") or 1800),
        config=True,
        help="Seconds without a proxied request before a TensorBoard session is stopped.",
    )

    def initialize_settings(self) -> None:
        assert self.serverapp is not None  # linked to its server before settings are made
        adopt_inherited_socket(self.serverapp)  # before the server binds: see listen.py
        self.lab = Experiments(Path(self.home) if self.home else None)
        self.root_dir = self.serverapp.root_dir
        self.kernel_token = secrets.token_urlsafe(32)
        self.events = EventHub(self.lab, interval=self.event_interval)
        log_limit = limit_from_env("KUBELAB_MAX_LOG_STREAMS", 16)
        self.log_streams = StreamSlots("log streams", log_limit, threads=True)
        self.event_streams = StreamSlots("event streams", limit_from_env("KUBELAB_MAX_EVENT_STREAMS", 32))
        self.settings["kubelab"] = self
        self.tensorboards = tensorboard_ext.install(self, self.tensorboard_idle_timeout)
        self.services = services_ext.install(self)  # detached: they outlive the server, as runs do

    def initialize_handlers(self) -> None:
        assert self.serverapp is not None
        services_ext.route_first(self.serverapp.web_app)  # it answers every prediction
        for pattern, handler in API_ROUTES:  # ExtensionApp prefixes the server's base_url
            self.handlers.append((url_path_join("kubelab", "api", pattern), handler))
        self.handlers.extend(tensorboard_ext.PROXY_ROUTES)

    async def _start_jupyter_server_extension(self, serverapp: ServerApp) -> None:
        """Jupyter's hook for once the loop runs and the server listens (after its bind)."""
        self._started()

    def _started(self) -> None:
        assert self.serverapp is not None
        api = url_path_join(self.serverapp.connection_url, "kubelab", "api")
        os.environ["KUBELAB_API_URL"] = api.replace("://localhost:", "://127.0.0.1:")
        os.environ["KUBELAB_API_TOKEN"] = self.kernel_token
        os.environ["KUBELAB_HOME"] = str(self.lab.home)
        self.events.start()
        self.lab.backend.start()
        tensorboard_ext.start_reaper(self)
        os.environ["KUBELAB_SERVER_ROOT"] = str(Path(self.root_dir).resolve())  # kubelab.rest_client's ?cwd=
        if os.environ.pop("KUBELAB_ANNOUNCE_URL", None):
            # Jupyter masks a token it did not generate ("?token=..."); `kubelab lab` chose it.
            token = getattr(self.serverapp.identity_provider, "token", "")
            url = url_path_join(self.serverapp.connection_url, "lab") + (f"?token={token}" if token else "")
            print(f"\nkubelab is ready: {url}\n", flush=True)
        self.log.info(
            "kubelab: recording runs in %s (backend: %s)",
            self.lab.runs_root,
            self.lab.backend.name,
        )

    async def stop_extension(self) -> None:
        tensorboard_ext.shutdown(self)  # no TensorBoard outlives the server
        await services_ext.shutdown(self)
        await self.events.stop()
        self.log_streams.close()
        self.lab.backend.close()
