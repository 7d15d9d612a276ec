# Fallback for IPython sessions that skip the kernel config (e.g. `ipython` in a terminal):
# load the kubelab magics unless they are loaded already.
# IPython runs this file in the user's namespace, so it imports nothing (each name would stay
# there) and leaves get_ipython, which IPython defines there, undeclared for mypy too.
try:
    ip = get_ipython()  # type: ignore[name-defined]  # noqa: F821 - defined inside IPython
    if "kubelab" not in ip.extension_manager.loaded:
        ip.extension_manager.load_extension("kubelab")
except Exception as exc:  # never break a user's shell over the magics
    print(f"kubelab magics not loaded: {exc}")
