"""The local backend: experiments as detached runner processes on this machine.

`backend` is the `Backend` the experiments service calls; `runner` is the process that
runs one experiment's replicas; `gpus` is the machine-wide GPU ledger; `warm` keeps idle,
pre-imported helpers (runners, and the sweep drivers that also run on this machine).
Kept free of imports: a warm helper and a trial's runner import only what they use.
"""
