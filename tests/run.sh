#!/usr/bin/env bash
# The test command: sets up (packages + build) and runs every suite.
#   unit         unprivileged: policy parser/compiler, event encoding
#   integration  root, host kernel: real processes in real cgroups
#   fuzz         libFuzzer on the policy parser, ~30 s
# Exit status is non-zero if any suite fails. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

./setup.sh
cd build
ctest --output-on-failure --timeout 600 "$@"
