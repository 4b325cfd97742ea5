#!/usr/bin/env bash
# B7 (the agent's resource watch): bench/resource_bench.py in the 6.12 guest (cgroup v2 with every
# controller; this host's hybrid cgroups have none to watch). As root, after building build/cordon:
#
#   bench/run_resources.sh [resource_bench.py options: --sandboxes N --rounds N --seconds S --storm S]
#
# Writes build/bench/vm-results/resources.json and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -ne 0 ]]; then
  echo "bench/run_resources.sh: needs root (BPF, cgroups, the VM)" >&2
  exit 1
fi
out="$(pwd)/build/bench/vm-results"
mkdir -p "$out"
rm -f "$out/resources.json"
CORDON_VM_MEM="${CORDON_VM_MEM:-2G}" CORDON_VM_TIMEOUT="${CORDON_VM_TIMEOUT:-1500}" tests/vm/run-in-vm.sh 6.12 --rw "$out" -- \
  /usr/bin/python3 bench/resource_bench.py --cordon "$(pwd)/build/cordon" --out "$out/resources.json" "$@"
cat "$out/resources.json"
