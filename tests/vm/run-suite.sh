#!/bin/sh
# Runs inside the test VM: checks that the build is visible there (the guest
# mounts a fresh tmpfs on /tmp, so a build under the host's /tmp is only
# visible below the working directory), then runs one test binary.
#   run-suite.sh EXPECT_LSM CORDON_BINARY TEST_BINARY [ARGS...]
expect="$1"; cordon="$2"; shift 2
for f in "$cordon" "$1"; do
  if [ ! -x "$f" ]; then
    echo "run-suite: $f is not visible inside the VM: keep the build directory inside the source directory" >&2
    exit 1
  fi
done
CORDON_EXPECT_LSM="$expect" exec "$@"
