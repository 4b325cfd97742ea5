#!/usr/bin/env bash
# Self-test of the VM harness: boots each kernel with bpf in lsm= and without
# it (--no-bpf-lsm), runs this script inside the guest (--guest) and checks
# what the guest sees. Exits non-zero on any mismatch. Run as root after
# tests/vm/setup.sh.
#
#   tests/vm/selftest.sh [KERNEL...]     default: 6.1 6.12
#
# The guest part exits with GUEST_OK (42) when every check passed, so that a
# harness which loses the exit status (and reports 0) cannot pass.
set -uo pipefail

GUEST_OK=42

if [ "${1:-}" = "--guest" ]; then
  expect_bpf="$2" host_cwd="$3"
  failed=0
  ok()   { echo "  ok   $*"; }
  bad()  { echo "  FAIL $*"; failed=1; }
  skip() { echo "  skip $*"; }
  check() {   # check DESCRIPTION COMMAND...
    local what="$1"; shift
    if "$@" >/dev/null 2>&1; then ok "$what"; else bad "$what"; fi
  }
  mounted() {  # mounted MOUNTPOINT FSTYPE: per /proc/self/mountinfo
    awk -v m="$1" -v t="$2" '{ for (i = 7; $i != "-"; i++); if ($5 == m && $(i + 1) == t) f = 1 } END { exit !f }' \
      /proc/self/mountinfo
  }

  echo "selftest in guest: kernel $(uname -r), CORDON_VM_KERNEL=${CORDON_VM_KERNEL:-?}, expect bpf LSM: $expect_bpf"
  case "$(uname -r)" in
    "${CORDON_VM_KERNEL:-none}".*) ok "kernel release $(uname -r) matches ${CORDON_VM_KERNEL:-}";;
    *) bad "kernel release $(uname -r) does not match ${CORDON_VM_KERNEL:-}";;
  esac

  lsm="$(cat /sys/kernel/security/lsm 2>/dev/null)"
  echo "  /sys/kernel/security/lsm: $lsm"
  if tr , '\n' <<<"$lsm" | grep -qx bpf; then has_bpf=1; else has_bpf=0; fi
  if [ -z "$lsm" ]; then bad "cannot read /sys/kernel/security/lsm"
  elif [ "$has_bpf" = "$expect_bpf" ]; then ok "bpf in the active LSM list: $has_bpf"
  else bad "bpf in the active LSM list: $has_bpf, expected $expect_bpf"
  fi

  uid="$(id -u)"
  [ "$uid" = 0 ] && ok "id -u = 0" || bad "id -u = $uid"
  [ "$PWD" = "$host_cwd" ] && ok "working directory $PWD" || bad "working directory $PWD, expected $host_cwd"

  check "securityfs at /sys/kernel/security" mounted /sys/kernel/security securityfs
  check "bpffs at /sys/fs/bpf" mounted /sys/fs/bpf bpf
  check "ls /sys/fs/bpf" ls /sys/fs/bpf
  check "cgroup2 at /sys/fs/cgroup" mounted /sys/fs/cgroup cgroup2
  ctrl="$(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null)"
  [ -n "$ctrl" ] && ok "cgroup2 controllers: $ctrl" || bad "no cgroup2 controllers listed"
  cg="$(cat /proc/self/cgroup)"
  [ "$cg" = "0::/" ] && ok "/proc/self/cgroup = 0::/ (cgroup2 only)" || bad "/proc/self/cgroup = $cg"
  check "proc, sysfs, devtmpfs, tmpfs /tmp and /run" \
    sh -c 'grep -q " /proc proc " /proc/mounts && grep -q " /sys sysfs " /proc/mounts &&
           grep -q " /dev devtmpfs " /proc/mounts && grep -q " /tmp tmpfs " /proc/mounts &&
           grep -q " /run tmpfs " /proc/mounts'
  check "/sys/kernel/btf/vmlinux exists" test -s /sys/kernel/btf/vmlinux
  check "host root is read-only" sh -c '! touch /selftest-probe 2>/dev/null'
  check "results share writable at \$CORDON_VM_RESULTS" sh -c 'echo ok >"$CORDON_VM_RESULTS/selftest"'
  check "loopback up" sh -c '[ $(( $(cat /sys/class/net/lo/flags) & 1 )) = 1 ]'

  if command -v bpftool >/dev/null; then
    probe="$(bpftool feature probe kernel 2>/dev/null | grep -i 'program_type lsm')"
    echo "  bpftool: $probe"
    grep -q 'program_type lsm is available' <<<"$probe" && ok "bpftool: lsm program type available" \
      || bad "bpftool: lsm program type not available"
  else
    skip "bpftool not installed on the host: lsm program type not probed"
  fi
  if command -v ip >/dev/null; then
    check "module autoload (ip link add type dummy)" ip link add selftest0 type dummy
  else
    skip "ip not installed on the host: module autoload not tested"
  fi

  [ "$failed" = 0 ] && exit "$GUEST_OK"
  exit 1
fi

HERE="$(cd "$(dirname "$0")" && pwd)"
kernels=("$@")
[ "${#kernels[@]}" -gt 0 ] || kernels=(6.1 6.12)

results=()
failed=0
for k in "${kernels[@]}"; do
  for mode in bpf no-bpf; do
    flags=(); expect=1
    [ "$mode" = no-bpf ] && flags=(--no-bpf-lsm) && expect=0
    echo "=== selftest: kernel $k, ${mode} LSM"
    t0=$(date +%s%N)
    bash "$HERE/run-in-vm.sh" "$k" -q "${flags[@]}" -- bash "$HERE/selftest.sh" --guest "$expect" "$PWD"
    rc=$?
    secs=$(( ($(date +%s%N) - t0) / 1000000 ))
    secs="$((secs / 1000)).$(( (secs % 1000) / 100 ))"
    if [ "$rc" = "$GUEST_OK" ]; then verdict=PASS; else verdict="FAIL (exit $rc)"; failed=1; fi
    results+=("$(printf '%-5s %-7s %-16s %5ss' "$k" "$mode" "$verdict" "$secs")")
  done
done

echo "=== selftest summary (wall time per boot, including qemu start and poweroff)"
printf '  %s\n' "${results[@]}"
exit "$failed"
