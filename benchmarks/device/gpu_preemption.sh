#!/usr/bin/env bash
# Device check (issue: elastic and preemptible training): on a machine with an NVIDIA GPU, a CUDA
# training run at `--priority low` that checkpoints every 20 steps is preempted by a `high` run
# asking for the same GPU; the GPU's memory is freed in between (nvidia-smi), the high run
# finishes, and the low run resumes from its latest checkpoint (not from step 0) and finishes.
# Needs torch with CUDA where it runs; kubelab from this checkout. Well under five minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
export KUBELAB_HOME=${KUBELAB_HOME:-$(mktemp -d)}
export KUBELAB_MACHINE_DIR=$KUBELAB_HOME/machine
unset KUBELAB_FAKE_GPUS
python=${PYTHON:-python3}
gpu_memory() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0; }
gpu_apps() { nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c . || true; }
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
only_gpu=$(nvidia-smi --query-gpu=index --format=csv,noheader | head -1)
export CUDA_VISIBLE_DEVICES=$only_gpu  # one GPU, so the two runs must share it by preemption

cat > "$KUBELAB_HOME/train.py" <<'PY'
import sys, time, torch, kubelab
steps = int(sys.argv[1])
model = torch.nn.Linear(4096, 4096).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
ballast = torch.empty(4 * 2**30, dtype=torch.uint8, device="cuda")  # 4 GiB held while training
found = kubelab.latest_checkpoint()
start = 0
if found:
    step, folder = found
    state = torch.load(folder / "state.pt")
    model.load_state_dict(state["model"])
    start = step + 1
    print(f"resumed from step {step}", flush=True)
for step in range(start, steps):
    x = torch.randn(512, 4096, device="cuda")
    loss = model(x).pow(2).mean()
    optimizer.zero_grad(); loss.backward(); optimizer.step()
    kubelab.report(loss=float(loss), step=step)
    if step % 20 == 19:
        kubelab.save_checkpoint(step, lambda f: torch.save({"model": model.state_dict()}, f / "state.pt"))
    if kubelab.preempted():
        print(f"preempted at step {step}", flush=True)
        sys.exit(0)
    time.sleep(0.05)
print("done", flush=True)
PY

before=$(gpu_memory)
echo "==> a low-priority run of 400 steps (checkpoints every 20)"
low=$("$python" -m kubelab.cli run --name low --gpus 1 --priority low -o json -- python "$KUBELAB_HOME/train.py" 400 \
  | "$python" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for _ in $(seq 120); do
  [ "$("$python" -m kubelab.cli show "$low" -o json | "$python" -c 'import json,sys; r=json.load(sys.stdin); print(r["status"])')" = Running ] && break
  sleep 0.5
done
for _ in $(seq 240); do  # until its first checkpoints are written (torch's import takes a while)
  [ "$(ls "$KUBELAB_HOME/runs/$low/checkpoints" 2>/dev/null | wc -l)" -ge 2 ] && break
  sleep 0.5
done
ls "$KUBELAB_HOME/runs/$low/checkpoints"
echo "GPU memory with the low run: $(gpu_memory) MiB (before: $before MiB)"

echo "==> a high-priority run asks for the same GPU"
high=$("$python" -m kubelab.cli run --name high --gpus 1 --priority high -o json -- python "$KUBELAB_HOME/train.py" 60 \
  | "$python" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
seen_preempted=""; most_apps=0
for _ in $(seq 600); do  # until the high run ends: never two processes on the GPU at once
  apps=$(gpu_apps); [ "$apps" -gt "$most_apps" ] && most_apps=$apps
  state=$("$python" -m kubelab.cli show "$low" -o json | "$python" -c 'import json,sys; print(json.load(sys.stdin)["status"])')
  high_state=$("$python" -m kubelab.cli show "$high" -o json | "$python" -c 'import json,sys; print(json.load(sys.stdin)["status"])')
  if [ "$state" = Preempted ] && [ -z "$seen_preempted" ]; then
    seen_preempted=1; echo "low run Preempted; GPU memory $(gpu_memory) MiB, processes on the GPU: $apps"
  fi
  case "$high_state" in Succeeded|Failed|Stopped) break ;; esac
  sleep 0.25
done
echo "most processes on the GPU at once while the high run ran: $most_apps"
[ -n "$seen_preempted" ] || { echo "FAIL: the low run was never Preempted"; exit 1; }
[ "$most_apps" -le 1 ] || { echo "FAIL: the low run's process still held the GPU"; exit 1; }
"$python" - "$low" "$high" <<'PY'
import sys, time
from kubelab.experiments import Experiments
lab = Experiments()
low, high = sys.argv[1], sys.argv[2]
deadline = time.monotonic() + 240
while time.monotonic() < deadline:
    states = [lab.get(low)["status"], lab.get(high)["status"]]
    if all(s in ("Succeeded", "Failed", "Stopped") for s in states):
        break
    time.sleep(1)
low_record, high_record = lab.get(low), lab.get(high)
history = [h["state"] for h in low_record["history"]]
log = "".join(lab.logs(low))
print("low:", low_record["status"], history)
print("high:", high_record["status"])
steps = [p["step"] for p in lab.metrics(low) if "step" in p]
print("low run's steps:", len(steps), "first", steps[:1], "last", steps[-1:])
assert high_record["status"] == "Succeeded", high_record["reason"]
assert low_record["status"] == "Succeeded", low_record["reason"]
assert "Preempted" in history, history
assert "resumed from step" in log, log[-2000:]
assert len(steps) == len(set(steps)) == 400, "each step once, none redone twice in the record"
print("OK: preempted, GPU freed, resumed from its checkpoint")
PY
