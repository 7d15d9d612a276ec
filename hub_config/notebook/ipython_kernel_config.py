# Every kernel in the kubelab notebook image loads the kubelab magics (%%train, %sweep, ...).
c = get_config()  # noqa: F821 - provided by IPython
c.InteractiveShellApp.extensions = ["kubelab"]
