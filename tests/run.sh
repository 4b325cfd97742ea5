#!/usr/bin/env bash
# The test command: sets up (packages + build) and runs every suite.
#   unit         unprivileged: policy parser/compiler, event encoding
#   integration  root, host kernel: real processes in real cgroups
#   lsm          BPF LSM suites on the host (skip where the kernel refuses BPF LSM,
#                except the check that cordon says so)
#   vm           the lsm and integration suites inside VMs running stock Debian
#                6.1 and 6.12 kernels with BPF LSM, and 6.12 without it
#   fuzz         libFuzzer on the policy parser, ~30 s
# Exit status is non-zero if any suite fails. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

CORDON_WERROR=ON ./setup.sh  # warnings are errors here
tests/vm/setup.sh
cd build
ctest --output-on-failure --timeout 600 "$@"
