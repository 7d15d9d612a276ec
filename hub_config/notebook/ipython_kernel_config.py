# Every kernel in the kubelab notebook image loads the kubelab magics (%%train, %sweep, ...).
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # IPython provides get_config in the namespace it runs this file in
    from traitlets.config import Config

    def get_config() -> Config: ...


c = get_config()
c.InteractiveShellApp.extensions = ["kubelab"]
