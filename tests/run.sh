#!/usr/bin/env bash
# The test command: sets up (packages + build) and runs every suite.
#   unit         unprivileged: policy parser/compiler, event encoding, layer rules
#   integration  root, host kernel: real processes in real cgroups
#   lsm          BPF LSM suites on the host (skip where the kernel refuses BPF LSM,
#                except the check that cordon says so)
#   sanitized    the unit and integration suites again, built with ASan+UBSan
#                (build-san/; a sanitizer report fails the test)
#   vm           the lsm and integration suites inside VMs running stock Debian
#                6.1 and 6.12 kernels with BPF LSM, and 6.12 without it; two VMs
#                at a time (each is one TCG vCPU), after the host suites
#   fuzz         libFuzzer on the policy parser, ~30 s
# Exit status is non-zero if any suite fails. Run as root.
# Extra arguments go to every ctest call (e.g. -R Lifecycle).
set -euo pipefail
cd "$(dirname "$0")/.."

CORDON_WERROR=ON ./setup.sh  # warnings are errors here
tests/vm/setup.sh
jobs=$(nproc)
# -O1 and line tables only (-g1): the sanitizers' usual build, about half the
# compile time of RelWithDebInfo, with file:line in every report.
cmake -S . -B build-san -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" -DCORDON_WERROR=ON \
  -DCORDON_SANITIZE=address,undefined -DCORDON_BUILD_FUZZERS=OFF -DCORDON_BUILD_BENCH=OFF \
  -DCORDON_VM_TESTS=OFF >/dev/null
cmake --build build-san -j"$jobs"

status=0
# Host suites one test at a time (they share the host's cgroups and bpffs).
(cd build && ctest --output-on-failure --timeout 600 -LE vm "$@") || status=1
# The sanitized build: LeakSanitizer on, UBSan aborts, reports name the test.
# Not there: the two tests that bound the agent's resident memory (ASan holds
# freed memory in its quarantine; the plain build above checks those bounds).
(cd build-san &&
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure --timeout 600 -L 'unit|integration' \
    -E 'AgentHostileClients[.](PartialThirtyTwoMibFramesStayWithinTheMemoryBudget|PipelinedRequestsWhoseRepliesAreNeverReadAreBounded)' \
    "$@") || status=1
# The VM suites, two at a time: each guest is a single TCG vCPU.
(cd build && ctest --output-on-failure --timeout 1200 -L vm -j2 "$@") || status=1
exit "$status"
