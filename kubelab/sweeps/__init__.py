"""Hyperparameter sweeps: search spaces, tuners, pruners and the sweep spec.

Kept free of imports on purpose: Optuna costs a quarter of a second to import, so only
`kubelab.sweeps.tuners` and `kubelab.sweeps.pruners` (when building) load it.
"""
