#!/usr/bin/env bash
# Peer check: JupyterHub KubeSpawner's own test suite with KubeLabSpawner in its place, against
# the loopback control plane (tests/controlplane). KubeSpawner's code is not kept here; give a
# checkout of its source tag (its tests/ are not in its PyPI files):
#
#   benchmarks/kubespawner_peer.sh /path/to/kubespawner-7.1.0 [pytest args...]
#
# - Makes a venv of its own ($KUBELAB_PEER_VENV, default /tmp/kubelab-kubespawner-peer-venv)
#   with the checkout and its test requirements (jupyterhub<6, pytest<8, pytest-asyncio<0.23,
#   and kubernetes<37: 37's sanitize_for_serialization no longer camel-cases kubernetes_asyncio
#   models, which fails 86 of its object tests whichever spawner is used)
#   and puts this checkout's kubelab on its path (KubeLabSpawner needs only what KubeSpawner
#   brings; the code under test is the working tree, not an installed copy).
# - Starts the control plane with kubelab's venv ($KUBELAB_VENV, default .venv) and points
#   KubeSpawner's conftest at it through KUBECONFIG (it creates its namespaces itself).
# - A pytest plugin rebinds `kubespawner.KubeSpawner` to KubeLabSpawner before the tests are
#   imported, so every `KubeSpawner(...)` in its fixtures and tests builds a KubeLabSpawner.
#   KUBELAB_PEER_SPAWNER=KubeSpawner runs the same suite unchanged, for comparison.
# - Nothing else is adapted: KubeSpawner's tests, fixtures and test doubles run as they are.
#   They configure no `gpu_catalog`, so KubeLabSpawner behaves as KubeSpawner (its
#   `profile_list`, `options_from_form` and one-namespace default), as a drop-in must.
# - Prints the counts last: `peer: N passed, N failed, N errors, N skipped`.
#
# KWOK plays the kubelet, so pods reach Running with IP 127.0.0.1 but run nothing: tests that
# exec into a container (KubeSpawner's `exec_python`) cannot pass here.
set -uo pipefail
checkout=$(cd "${1:?usage: $0 KUBESPAWNER_CHECKOUT [pytest args...]}" && pwd)
shift
repo=$(cd "$(dirname "$0")/.." && pwd)
kubelab_venv=${KUBELAB_VENV:-$repo/.venv}
peer_venv=${KUBELAB_PEER_VENV:-/tmp/kubelab-kubespawner-peer-venv}
[ -f "$checkout/tests/conftest.py" ] && [ -f "$checkout/kubespawner/spawner.py" ] || {
  echo "$checkout is not a kubespawner source checkout (no tests/conftest.py)" >&2; exit 2; }

if [ ! -x "$peer_venv/bin/pytest" ]; then
  echo "# making $peer_venv" >&2
  python3 -m venv "$peer_venv"
  "$peer_venv/bin/pip" install -q -e "$checkout[test]" "jupyterhub>=5,<6" "pytest<8" \
    "pytest-asyncio>=0.17,<0.23" "kubernetes-asyncio>=36,<37" "kubernetes<37" pyyaml || exit 2
fi
work=$(mktemp -d /tmp/kubelab-peer-XXXXXX)
# kubelab from this checkout, laid out as its wheel is (kubelab.spawner is the spawner/ folder)
mkdir -p "$work/site" "$work/kubelab-parts"
ln -s "$repo/kubelab" "$work/site/kubelab"
ln -s "$repo/spawner" "$work/kubelab-parts/spawner"
plane=
cleanup() {
  if [ -n "$plane" ]; then kill -TERM "$plane" 2>/dev/null; wait "$plane" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cat > "$work/kubelab_peer.py" <<'EOF'
"""Rebind kubespawner.KubeSpawner to KubeLabSpawner before KubeSpawner's tests import it."""
import os

import kubelab
import kubespawner

kubelab.__path__.append(os.environ["KUBELAB_PEER_PARTS"])
from kubelab.spawner.kube import KubeLabSpawner  # noqa: E402

if os.environ.get("KUBELAB_PEER_SPAWNER", "KubeLabSpawner") == "KubeLabSpawner":
    kubespawner.KubeSpawner = KubeLabSpawner
EXPECTED = kubespawner.KubeSpawner


def pytest_report_header(config):
    return f"kubelab peer check: kubespawner.KubeSpawner is {kubespawner.KubeSpawner!r}"


def pytest_collection_finish(session):
    modules = {item.module for item in session.items if hasattr(item, "module")}
    for module in modules:
        bound = getattr(module, "KubeSpawner", EXPECTED)
        assert bound is EXPECTED, f"{module.__name__} uses {bound!r}"
EOF

echo "# starting the control plane" >&2
PYTHONPATH="$repo/tests" "$kubelab_venv/bin/python" -m controlplane \
  --kubeconfig "$work/kubeconfig" > "$work/plane.out" 2>&1 &
plane=$!
for _ in $(seq 600); do
  grep -q "control plane ready" "$work/plane.out" && break
  kill -0 "$plane" 2>/dev/null || { cat "$work/plane.out" >&2; exit 2; }
  sleep 0.5
done
grep -q "control plane ready" "$work/plane.out" || { echo "control plane not ready" >&2; exit 2; }

cat "$work/plane.out" >&2
cd "$checkout" || exit 2
KUBECONFIG="$work/kubeconfig" PYTHONPATH="$work:$work/site" KUBELAB_PEER_PARTS="$work/kubelab-parts" \
  "$peer_venv/bin/python" -m pytest \
  -p kubelab_peer -p no:cacheprovider -o addopts="" -rfEs --color=no "$@" tests \
  | tee "$work/pytest.out"
status=${PIPESTATUS[0]}
summary=$(grep -E "^(=+ )?[0-9]+ (passed|failed|errors?|skipped).* in [0-9.]+s" "$work/pytest.out" | tail -1)
count() { grep -oE "[0-9]+ $1" <<<"$summary" | grep -oE "^[0-9]+" || echo 0; }
echo "peer: $(count passed) passed, $(count failed) failed, $(count 'errors?') errors," \
  "$(count skipped) skipped"
exit "$status"
