"""The local backend: experiments as detached runner processes on this machine.

`backend` is the `Backend` the experiments service calls; `runner` is the process that
runs one experiment's replicas; `gpus` is the machine-wide GPU ledger. Idle, pre-imported
runners wait in `kubelab.warm`'s pool, shared with the sweep drivers (which run on this machine
whatever the backend).
Kept free of imports: a warm helper and a trial's runner import only what they use.
"""
