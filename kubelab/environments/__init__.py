"""What a run needs made for it before its command: a virtualenv built from its spec's
`environment`, and its `init` steps (a git clone, another run's outputs, inline files)."""
