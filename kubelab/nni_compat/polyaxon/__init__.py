"""Polyaxon's Python client, as far as trial code needs it, provided by kubelab (see `_kubelab`)."""

__version__ = "1.14-kubelab"
