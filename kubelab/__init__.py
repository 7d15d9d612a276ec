"""kubelab: a deep-learning training platform inside Jupyter."""
