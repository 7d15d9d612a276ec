"""The label that marks every object kubelab's spawner creates, so reconcile and prune find
its own objects and never an admin's."""

MANAGED_BY = {"app.kubernetes.io/managed-by": "kubelab"}
