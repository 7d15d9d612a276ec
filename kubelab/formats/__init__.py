"""The files people bring: kubelab specs, NNI configs (v2, v1) and Polyaxon v0/v1 files.

`detect` tells the formats apart and maps a file to a kubelab experiment or sweep mapping;
`specfile` reads YAML/JSON with errors that name the line; `nni_config`/`nni_v1` read NNI's
configs; `polyaxon_v0`, `polyaxon_group`, `polyaxon_matrix`, `polyaxon_v1`, `polyaxon_v1_run`
and `polyaxon_dag` read Polyaxon's. The package re-exports what the entry points call.
"""

from kubelab.formats.detect import (
    experiment_mapping,
    is_sweep,
    load_spec_file,
    polyaxon_version,
    sweep_mapping,
)

__all__ = ["experiment_mapping", "is_sweep", "load_spec_file", "polyaxon_version", "sweep_mapping"]
