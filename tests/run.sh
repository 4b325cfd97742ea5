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
#                at a time (each is one TCG vCPU)
#   fuzz         libFuzzer on the policy parser, ~30 s
#   package      the Debian package (cpack) installed into a fresh Debian root
#                (mmdebstrap) and run there, ~1 min; with the host suites
# Exit status is non-zero if any suite fails. Run as root.
# Extra arguments go to every ctest call (e.g. -R Lifecycle).
#
# Order: the plain build, then the VM suites start in the background (they
# are CPU-bound, guests under TCG, and the longest part) while the host
# suites, the sanitized build and the sanitized suites run in the
# foreground, sharing the CPU with them (the host suites mostly wait on
# their processes). The VM suites' output is shown when they end, after the
# rest; each phase's end is stamped with the seconds since the start.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$(date +%s)
phase() { echo "tests/run.sh: $* ($(($(date +%s) - start)) s since start)"; }

CORDON_WERROR=ON ./setup.sh  # warnings are errors here
tests/vm/setup.sh
phase "plain build and VM kernels ready"
jobs=$(nproc)
status=0

# Started first; sharing the CPU, a suite takes longer than alone: a
# generous limit each (CORDON_VM_TEST_TIMEOUT in tests/CMakeLists.txt).
cmake -S . -B build -DCORDON_VM_TEST_TIMEOUT=3000 >/dev/null
# The test lists (gtest_discover_tests, PRE_TEST mode) are written by the
# first ctest that reads the build tree. Write them here, once: two ctest
# runs starting together (the VM suites and the host suites below) would
# both write them, and one read the other's half-written file (CI failed so:
# "policy_unit_tests[1]_tests.cmake: Parse error").
(cd build && ctest -N >/dev/null)
vm_log=$(mktemp /tmp/cordon-vm-suites.XXXXXX)
vm_pid=
stop_vms() {
  # Only on an early exit: the VM suites' own process group (setsid below).
  if [ -n "$vm_pid" ]; then kill -TERM -- "-$vm_pid" 2>/dev/null || true; fi
  rm -f "$vm_log"
}
trap stop_vms EXIT
(cd build && CORDON_VM_BOOT_TIMEOUT=600 exec setsid ctest --output-on-failure -L vm -j2 "$@") >"$vm_log" 2>&1 &
vm_pid=$!
phase "VM suites started"

# Host suites one test at a time (they share the host's cgroups and bpffs).
(cd build && ctest --output-on-failure --timeout 600 -LE vm "$@") || status=1
phase "host suites done (status $status)"

# -O1 and line tables only (-g1): the sanitizers' usual build, about half the
# compile time of RelWithDebInfo, with file:line in every report. Only what
# the sanitized suites run (not lsm_tests, fuzzers, benchmarks).
cmake -S . -B build-san -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" -DCORDON_WERROR=ON \
  -DCORDON_SANITIZE=address,undefined -DCORDON_BUILD_FUZZERS=OFF -DCORDON_BUILD_BENCH=OFF \
  -DCORDON_VM_TESTS=OFF >/dev/null
cmake --build build-san -j"$jobs" --target cordon policy_unit_tests core_unit_tests integration_tests
phase "sanitized build done"

# The sanitized build: LeakSanitizer on, UBSan aborts, reports name the test.
# Not there: the two tests that bound the agent's resident memory (ASan holds
# freed memory in its quarantine; the plain build above checks those bounds).
(cd build-san &&
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure --timeout 600 -L 'unit|integration' \
    -E 'AgentHostileClients[.](PartialThirtyTwoMibFramesStayWithinTheMemoryBudget|PipelinedRequestsWhoseRepliesAreNeverReadAreBounded)' \
    "$@") || status=1
phase "sanitized suites done (status $status)"

vm_status=0
wait "$vm_pid" || vm_status=$?
vm_pid=
echo "---- VM suites (exit status $vm_status) ----"
cat "$vm_log"
[ "$vm_status" -eq 0 ] || status=1
phase "VM suites done (status $status)"
exit "$status"
