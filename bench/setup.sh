#!/usr/bin/env bash
# Sets up this machine to run the cordon benchmarks (bench/), then builds the
# project with them. Idempotent; run as root. Installs only what the
# benchmarks need on top of the project's own ./setup.sh (apt-get update runs
# once, and only when something is missing).
#
#   bench/setup.sh         install packages, build (build/bench/egress_bench, ...)
#   bench/setup.sh --deps  install packages only
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  nftables             # the nftables baseline (socket cgroupv2 + interval set)
  python3-matplotlib   # bench/report.py draws docs/b1_overhead.png
  dnsmasq-base         # B8's upstream DNS server (also in ./setup.sh, for the tests)
)

if [ "$(id -u)" -ne 0 ]; then
  echo "bench/setup.sh: run as root (it installs Debian packages)" >&2
  exit 1
fi

tools/apt-ensure.sh bench/setup.sh "${PACKAGES[@]}"

[ "${1:-}" = "--deps" ] && exit 0

# The project's setup installs the build dependencies and builds into build/;
# CORDON_BUILD_BENCH (default ON) adds build/bench/egress_bench, file_bench,
# policy_bench and dns_bench.
./setup.sh
