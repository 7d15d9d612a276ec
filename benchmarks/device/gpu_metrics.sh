#!/usr/bin/env bash
# Device check (issue: GPUs you can see): on a machine with an NVIDIA GPU, a CUDA matrix loop
# run by `kubelab run --gpus 1` records GPU utilisation above 50%, power and energy, shown by
# `kubelab show`; two runs with `--gpus 0.5` share the GPU and both finish. Needs torch with CUDA and nvidia-ml-py where it runs; kubelab from this
# checkout (PYTHONPATH or an install). Finishes in well under five minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
export KUBELAB_HOME=${KUBELAB_HOME:-$(mktemp -d)}
export KUBELAB_MACHINE_DIR=$KUBELAB_HOME/machine
export KUBELAB_SYSTEM_METRICS_INTERVAL=${KUBELAB_SYSTEM_METRICS_INTERVAL:-1}
unset KUBELAB_FAKE_GPUS
python=${PYTHON:-python3}
record_dir=${KUBELAB_RECORD_DIR:-$KUBELAB_HOME}  # where the recorded NVML answers are written
nvidia-smi --query-gpu=name,utilization.gpu,memory.used,power.draw --format=csv

cat > "$KUBELAB_HOME/matmul.py" <<'PY'
import os, time, torch
print("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"), "KUBELAB_GPU_FRACTION", os.environ.get("KUBELAB_GPU_FRACTION"), flush=True)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
end = time.monotonic() + 20
while time.monotonic() < end:
    b = a @ a
torch.cuda.synchronize()
print("done", float(b[0, 0]))
PY

echo "==> one run, 20 s of fp16 matmuls on GPU 0"
out=$("$python" -m kubelab.cli run --name gpu-metrics --gpus 1 --wait -o json -- python "$KUBELAB_HOME/matmul.py")
id=$(printf '%s' "$out" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
"$python" -m kubelab.cli show "$id"
"$python" - "$KUBELAB_HOME/runs/$id/system.jsonl" <<'PY'
import sys
from pathlib import Path
from kubelab.system_digest import digest_path, summarize_file
from kubelab.system_metrics import read_lines, summarize
path = Path(sys.argv[1])
s = summarize_file(path)  # a fresh process: the runner's digest, and the lines after it
print("summary:", s.as_json())
assert digest_path(path).exists(), "the runner saves the samples' digest when the run ends"
assert s == summarize(read_lines(path)), "the digest's sums should be every line's"
assert s.gpu_util is not None and s.gpu_util > 50, "GPU utilisation should be above 50%"
assert s.energy_wh is not None and s.energy_wh > 0, "energy should be measured"
print("OK: utilisation", round(s.gpu_util), "% energy", round(s.energy_wh, 3), "Wh")
PY

echo "==> two runs with --gpus 0.5 share GPU 0 and both finish"
a=$("$python" -m kubelab.cli run --name share-a --gpus 0.5 -o json -- python "$KUBELAB_HOME/matmul.py" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
b=$("$python" -m kubelab.cli run --name share-b --gpus 0.5 -o json -- python "$KUBELAB_HOME/matmul.py" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
sleep 5
nvidia-smi --query-compute-apps=pid,used_memory --format=csv
echo "==> recorded NVML answers while the two runs compute: $record_dir/nvml_shared_runs.json"
"$python" benchmarks/device/record_nvml.py --processes --samples 4 --every 1 > "$record_dir/nvml_shared_runs.json"
"$python" - "$a" "$b" <<'PY'
import sys, time
from kubelab.experiments import Experiments
lab = Experiments()
deadline = time.monotonic() + 180
while time.monotonic() < deadline:
    records = [lab.get(run) for run in sys.argv[1:]]
    if all(r["status"] in ("Succeeded", "Failed", "Stopped") for r in records):
        break
    time.sleep(1)
for r in records:
    print(r["name"], r["status"], "started", r.get("started_at"), "finished", r.get("finished_at"))
    print("  ", "".join(lab.logs(r["id"])).splitlines()[0])
assert all(r["status"] == "Succeeded" for r in records), [r["reason"] for r in records]
assert max(r["started_at"] for r in records) < min(r["finished_at"] for r in records), "not at once"
print("OK: both shared the GPU and finished")
PY

echo "==> recorded NVML answers of the idle GPU: $record_dir/nvml_idle.json"
"$python" benchmarks/device/record_nvml.py --processes --samples 3 --every 0.5 > "$record_dir/nvml_idle.json"
cat "$record_dir/nvml_idle.json"
