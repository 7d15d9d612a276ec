"""Pipelines: steps (experiments and sweeps) that pass results along, restartable."""
