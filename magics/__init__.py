"""kubelab adapter package."""
