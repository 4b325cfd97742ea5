#!/usr/bin/env bash
# B4 (event pipeline) and B5 (agent footprint and scale): one command, as root, about 3 to 5
# minutes on a 2-CPU machine. Writes docs/performance-agent.md (and build/bench/agent.json).
#
#   bench/run_agent.sh [--cordon PATH] [--baseline PATH] [agent_bench.py options...]
#
# --cordon: the binary to measure (default build/cordon, brought up to date first; ./setup.sh
#   if there is no build/ yet).
# --baseline: another cordon binary measured with the same method, for a before/after table;
#   e.g. built from an earlier commit without touching the work tree:
#     git archive COMMIT | tar -x -C /tmp/base && cmake -S /tmp/base -B /tmp/base/build \
#       -DCORDON_BUILD_FUZZERS=OFF -DCORDON_VM_TESTS=OFF -DCORDON_BUILD_BENCH=OFF && \
#       cmake --build /tmp/base/build --target cordon -j2
# Other options go to bench/agent_bench.py (--runs, --seconds, --sizes, --probes, --only b4|b5,
# --seed, --baseline-label TEXT).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [[ $(id -u) -ne 0 ]]; then
  echo "bench/run_agent.sh: needs root (BPF, cgroups)" >&2
  exit 1
fi

cordon="$root/build/cordon"
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cordon) cordon=$(realpath "$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done

if [[ "$cordon" == "$root/build/cordon" ]]; then
  if [[ -d build ]]; then
    cmake --build build --target cordon -j"$(nproc)" >/dev/null  # up to date with the tree
  else
    ./setup.sh
  fi
fi
if [[ ! -x "$cordon" ]]; then
  echo "bench/run_agent.sh: no cordon binary at $cordon" >&2
  exit 1
fi

out_dir="$root/build/bench"
mkdir -p "$out_dir"
helper_dir=$(mktemp -d /tmp/cordon-agentbench-helper-XXXXXX)
trap 'rm -rf "$helper_dir"' EXIT
gcc -O2 -Wall -Wextra -o "$helper_dir/agent_bench_helper" bench/agent_bench_helper.c

/usr/bin/python3 bench/agent_bench.py --cordon "$cordon" --helper "$helper_dir/agent_bench_helper" \
  --out "$out_dir/agent.json" "${args[@]}"
/usr/bin/python3 bench/report_agent.py "$out_dir/agent.json" docs/performance-agent.md
echo "bench/run_agent.sh: wrote docs/performance-agent.md (data: $out_dir/agent.json)" >&2
