#!/bin/sh
# Runs inside the test VM: checks that the build is visible there (the guest
# mounts a fresh tmpfs on /tmp, so a build under the host's /tmp is only
# visible below the working directory), then runs one GoogleTest binary with
# an XML report, and judges the run by that report too (verdict.py): no test
# run, or a skip not listed in tests/vm/expected-skips, fails the suite even
# when GoogleTest exits 0.
#   run-suite.sh EXPECT_LSM CORDON_BINARY TEST_BINARY [ARGS...]
expect="$1"; cordon="$2"; shift 2
here="$(dirname "$0")"
for f in "$cordon" "$1"; do
  if [ ! -x "$f" ]; then
    echo "run-suite: $f is not visible inside the VM: keep the build directory inside the source directory" >&2
    exit 1
  fi
done
report="${CORDON_VM_RESULTS:-/tmp/vm-results}/gtest-$$.xml"
rm -f "$report"
CORDON_EXPECT_LSM="$expect" "$@" --gtest_output="xml:$report"
status=$?
python3 "$here/verdict.py" "$report" "${CORDON_VM_KERNEL:-unknown}" "$expect"
verdict=$?
[ "$status" -ne 0 ] && exit "$status"
exit "$verdict"
