"""The Kubernetes backend: experiments as Jobs in the user's namespace.

`builders` turns a spec into plain manifests, `backend` sends them with the notebook's
service account, `watcher` keeps one watch per kind and writes states into run directories.
"""
