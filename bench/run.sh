#!/usr/bin/env bash
# The one command for the benchmarks (root): sets up, runs B1, and writes
# docs/performance.md and docs/b1_overhead.png. Extra arguments go to
# egress_bench (e.g. --rounds 300, or --quick for a smoke test).
#
# report.py runs under /usr/bin/python3: that is the interpreter Debian's
# python3-matplotlib is installed for (a python3 earlier in PATH, e.g. pyenv's,
# may not have it).
set -euo pipefail
cd "$(dirname "$0")/.."
bench/setup.sh
mkdir -p build/bench
build/bench/egress_bench --out build/bench/b1.json "$@"
/usr/bin/python3 bench/report.py build/bench/b1.json docs/performance.md
