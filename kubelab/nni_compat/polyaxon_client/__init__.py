"""Polyaxon v0's client (`polyaxon_client.tracking.Experiment`), provided by kubelab."""
