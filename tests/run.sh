#!/usr/bin/env bash
# The test command: sets up (packages + build) and runs every suite.
#   unit         unprivileged: policy parser/compiler, event encoding, layer rules
#   integration  root, host kernel: real processes in real cgroups
#   lsm          BPF LSM suites on the host (skip where the kernel refuses BPF LSM,
#                except the check that cordon says so)
#   sanitized    the product built with ASan+UBSan (build-san/: cordon and the
#                unit-test binaries): the unit suites there, and the plain
#                build's integration suites where input reaches cordon's own
#                code, against the sanitized cordon (CORDON_TEST_CORDON); a
#                sanitizer report fails the test
#   vm           the lsm suite inside VMs running stock Debian 6.1 and 6.12
#                kernels with BPF LSM, and 6.12 without it; the integration
#                suite's kernel-dependent part in 6.12 with BPF LSM, 6.1 with
#                and 6.1 without it (tests/vm/README.md says what runs where
#                and why); two VMs at a time (each is one TCG vCPU)
#   fuzz         libFuzzer on the policy parser, ~30 s
#   package      the Debian package (cpack) installed into a fresh Debian root
#                (mmdebstrap) and run there, ~2 min; with the host suites
# Exit status is non-zero if any suite fails. Run as root.
# Extra arguments go to every ctest call (e.g. -R Lifecycle).
#
# Order: the plain build, then two background jobs start: the VM suites
# (CPU-bound guests under TCG, the longest part) and the sanitized build.
# Meanwhile the host suites run in the foreground, two at a time where they
# may (the root suites take the host_kernel lock: one at a time, beside the
# unit tests, fuzzers and docs checks), then the sanitized suites. The
# VMs run at nice 10: the sanitized build (the sanitized suites wait for it)
# and the host suites (they mostly wait on their processes, and must not
# wait for the CPU too) come first; the VMs take what CPU they leave, and all
# of it once the build is done. The VM suites' output is shown when they end, after the rest;
# each phase's end is stamped with the seconds since the start.
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
san_log=$(mktemp /tmp/cordon-sanitized-build.XXXXXX)
san_unit_log=$(mktemp /tmp/cordon-sanitized-unit.XXXXXX)
vm_pid=
san_pid=
san_unit_pid=
stop_background() {
  # Only on an early exit: the background jobs' own process groups (setsid).
  local pid
  for pid in "$vm_pid" "$san_pid" "$san_unit_pid"; do
    if [ -n "$pid" ]; then kill -TERM -- "-$pid" 2>/dev/null || true; fi
  done
  rm -f "$vm_log" "$san_log" "$san_unit_log"
}
trap stop_background EXIT
# Waits for a background job and shows its output; its failure fails the run.
show_background() {  # NAME PID LOG
  local rc=0
  wait "$2" || rc=$?
  echo "---- $1 (exit status $rc) ----"
  cat "$3"
  [ "$rc" -eq 0 ] || status=1
}
(cd build && CORDON_VM_BOOT_TIMEOUT=600 exec setsid nice -n 10 ctest --output-on-failure -L vm -j2 "$@") >"$vm_log" 2>&1 &
vm_pid=$!
phase "VM suites started"

# The sanitized build: the product (cordon) and the unit-test binaries, -O1
# and line tables only (-g1): the sanitizers' usual build, about half the
# compile time of RelWithDebInfo, with file:line in every report. The
# integration suite's own binary is not sanitized: it is the test, not the
# product; the plain build's runs against the sanitized cordon below.
setsid bash -c '
  cmake -S . -B build-san -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" -DCORDON_WERROR=ON \
    -DCORDON_SANITIZE=address,undefined -DCORDON_BUILD_FUZZERS=OFF -DCORDON_BUILD_BENCH=OFF \
    -DCORDON_VM_TESTS=OFF >/dev/null &&
    exec cmake --build build-san -j"$1" --target cordon policy_unit_tests core_unit_tests' - "$jobs" >"$san_log" 2>&1 &
san_pid=$!

# Host suites: the root ones one at a time (RESOURCE_LOCK host_kernel: they
# share the host's cgroups and bpffs), the others beside them.
(cd build && ctest --output-on-failure --timeout 600 -LE vm -j2 "$@") || status=1
phase "host suites done (status $status)"

san_status=0
wait "$san_pid" || san_status=$?
san_pid=
tail -n 3 "$san_log"
if [ "$san_status" -ne 0 ]; then
  cat "$san_log"
  exit 1
fi
phase "sanitized build done"

# LeakSanitizer on; UBSan stops at the first finding (-fno-sanitize-recover);
# a report goes to stderr and the process exits 1. The unit tests are
# sanitized themselves; in the integration suite the harness fails any test
# whose cordon printed a report (tests/integration/harness.cc, Run()), even
# one expecting cordon to fail.
san_cordon=$PWD/build-san/cordon
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-san && exec setsid ctest --output-on-failure --timeout 600 -L unit "$@") >"$san_unit_log" 2>&1 &
san_unit_pid=$!
# The integration suites where input reaches cordon's own code (CLI, policy
# files, the agent's socket, tail, run, learn, contain, credentials, status),
# not those whose subject is the kernel's enforcement of a compiled policy
# (network, inbound, retroactive attach, unix hooks, detect mode, Landlock,
# resources, AtomicSwap's storms): their cordon code is the attach and run
# every other suite drives, and the policy compiler's part is the sanitized
# unit suites' and the fuzzers'. A new suite is in unless listed here. Nor the
# three tests that bound the agent's resident memory (ASan holds freed memory
# in its quarantine; the plain build checks those bounds), nor the floods of
# a million denials each (cordon run's and the agent's: minutes of the
# kernel refusing; the reading of repeats they drive is the sanitized unit
# suites' EventDecoder tests, and the rest of the agent suite runs here).
kernel_suites='NetEnforcement|Inbound|RetroAttach|UnixHooksTest|DetectMode|ConfineLandlock|Resources(V2|Hybrid)|ResourceUse|WallTime|AtomicSwap'
(cd build &&
  CORDON_TEST_CORDON="$san_cordon" \
  ctest --output-on-failure --timeout 600 -L integration \
    -E "^($kernel_suites)[.]|AgentHostileClients[.](PartialThirtyTwoMibFramesStayWithinTheMemoryBudget|PipelinedRequestsWhoseRepliesAreNeverReadAreBounded|QueuedAttachesOfClientsThatHangUpStayWithinTheMemoryBudget)|(RunCommand|Agent)[.]ADistinctViolationSurvivesAFloodOfIdenticalDenials" \
    "$@") || status=1
show_background "sanitized unit suites" "$san_unit_pid" "$san_unit_log"
san_unit_pid=
phase "sanitized suites done (status $status)"

show_background "VM suites" "$vm_pid" "$vm_log"
vm_pid=
phase "VM suites done (status $status)"
exit "$status"
