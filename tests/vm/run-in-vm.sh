#!/usr/bin/env bash
# Runs a command as root inside a throwaway VM: a stock Debian kernel booted
# under qemu TCG with bpf in lsm=, chrooted into the host's root filesystem
# (shared read-only over 9p), in the same working directory. See README.md.
#
#   tests/vm/run-in-vm.sh KERNEL [options] -- CMD ARGS...
#     KERNEL          6.1 or 6.12 (prepared by tests/vm/setup.sh)
#     --no-bpf-lsm    boot without bpf in lsm= (negative control)
#     --rw DIR        make host directory DIR writable in the guest (repeatable)
#     -q, --quiet     do not stream the console; print the command's output at
#                     the end (the console is still shown if the VM fails)
#
# Exit status: the command's exit status in the guest, 125 if the VM failed
# (no exit status came back: boot failure, panic, hang, timeout), or 126 if
# the kernel logged a WARN, BUG or Oops during the run (the command's status
# is printed).
# Environment: CORDON_VM_TIMEOUT (whole run, default 300 s),
# CORDON_VM_BOOT_TIMEOUT (until the command starts, default 120 s),
# CORDON_VM_CACHE (default /var/cache/cordon-vm), CORDON_VM_APPEND (extra
# kernel command line, e.g. "loglevel=7" to see more of the boot).
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE="${CORDON_VM_CACHE:-/var/cache/cordon-vm}"
TIMEOUT="${CORDON_VM_TIMEOUT:-300}"
BOOT_TIMEOUT="${CORDON_VM_BOOT_TIMEOUT:-120}"
VM_FAILED=125
KERNEL_FAILED=126
# Kernel log lines that fail a run: WARN(), BUG(), Oops, panics, sanitizers.
# Stall and lockup watchdogs are shown but do not fail it: under TCG on a busy
# host they fire on a slow vCPU as well as on a real deadlock.
KERNEL_TROUBLE='WARNING: CPU: [0-9]+ PID|(^|[^A-Za-z_])BUG: |kernel BUG at|Oops|general protection fault|Kernel panic|UBSAN:|KASAN:|KFENCE:|Unable to handle kernel'
KERNEL_SLOW='soft lockup|detected stalls|blocked for more than'

usage() {
  sed -n '6,18p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit "$VM_FAILED"
}

[ $# -ge 1 ] || usage
KEY="$1"; shift
bpf_lsm=1; quiet=0; rw_dirs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-bpf-lsm) bpf_lsm=0 ;;
    --rw) [ $# -ge 2 ] || usage; rw_dirs+=("$2"); shift ;;
    -q|--quiet) quiet=1 ;;
    --) shift; break ;;
    *) usage ;;
  esac
  shift
done
[ $# -gt 0 ] || usage

say() { echo "[vm $KEY] $*" >&2; }
die() { say "error: $*"; exit "$VM_FAILED"; }

kdir="$(readlink -f "$CACHE/$KEY" 2>/dev/null)"
[ -n "$kdir" ] && [ -f "$kdir/READY" ] && [ -f "$kdir/vmlinux" ] && [ -f "$kdir/base.cpio" ] \
  || die "kernel '$KEY' is not prepared in $CACHE: run tests/vm/setup.sh (as root)"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing: run tests/vm/setup.sh"
[ "$(id -u)" -eq 0 ] || say "warning: not root; qemu can only share files this user can read"

lsm="lockdown,capability,landlock,yama"
[ "$bpf_lsm" -eq 1 ] && lsm="$lsm,bpf"
append="console=ttyS0 rdinit=/init lsm=$lsm panic=-1 mitigations=off 8250.nr_uarts=1 no_timer_check quiet"
[ -n "${CORDON_VM_APPEND:-}" ] && append="$append $CORDON_VM_APPEND"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { printf '%d.%d' $(($1 / 1000)) $((($1 % 1000) / 100)); }   # ms -> "s.d"
shq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }          # quote for sh
qopt() { printf '%s' "${1//,/,,}"; }                   # quote for a qemu option value

tmp="$(mktemp -d /tmp/cordon-vm.XXXXXX)" || die "mktemp failed"
qpid=""; tailpid=""
cleanup() {
  [ -n "$tailpid" ] && kill "$tailpid" 2>/dev/null
  if [ -n "$qpid" ]; then             # our timeout(1), which forwards to our qemu
    kill -TERM "$qpid" 2>/dev/null
    wait "$qpid" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Initramfs = the cached base (busybox + 9p modules) + the current init.
mkdir "$tmp/initstage"
install -m 0755 "$HERE/init" "$tmp/initstage/init"
cp "$kdir/base.cpio" "$tmp/initrd.cpio"
(cd "$tmp/initstage" && echo init | busybox cpio -o -H newc 2>/dev/null) >>"$tmp/initrd.cpio" \
  || die "cannot build the initramfs"

# shellcheck disable=SC2054  # commas are qemu's, not array separators
# One vCPU by default: live kernel text patching (attaching BPF trampolines)
# while another TCG vCPU executes the patched code crashed 6.12 guests
# (int3 at the patch site). CORDON_VM_SMP overrides; CORDON_VM_MEM the memory
# (512M; bench/run_resources.sh needs more for its three agents).
qemu=(qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m "${CORDON_VM_MEM:-512M}" -smp "${CORDON_VM_SMP:-1}"
  -nographic -no-reboot -nic none -fw_cfg name=etc/sercon-port,string=0
  -kernel "$kdir/vmlinux" -initrd "$tmp/initrd.cpio" -append "$append"
  -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
  -fsdev "local,id=results,path=$(qopt "$tmp/results"),security_model=none,multidevs=remap"
  -device virtio-9p-pci,fsdev=results,mount_tag=results)
rw_list=""
i=0
for d in "${rw_dirs[@]}"; do
  real="$(readlink -e "$d")" && [ -d "$real" ] || die "--rw $d: not a directory"
  case "$real" in *$'\n'*|*$'\t'*) die "--rw $d: unsupported characters in path";; esac
  qemu+=(-fsdev "local,id=rw$i,path=$(qopt "$real"),security_model=none,multidevs=remap"
         -device "virtio-9p-pci,fsdev=rw$i,mount_tag=rw$i")
  rw_list+="rw$i"$'\t'"$real"$'\n'
  i=$((i + 1))
done

write_share() {
  local r="$tmp/results" a
  rm -rf "$r"; mkdir "$r"
  {
    echo "VM_CWD=$(shq "$(pwd -P)")"
    echo "VM_MODULES=$(shq "$kdir/modules")"
    echo "VM_9P_CACHE=$(shq "${CORDON_VM_9P_CACHE:-loose}")"
  } >"$r/vm.conf"
  [ -n "$rw_list" ] && printf '%s' "$rw_list" >"$r/rw.list"
  {
    echo "# generated by tests/vm/run-in-vm.sh"
    echo "export CORDON_VM=1 CORDON_VM_KERNEL=$(shq "$KEY") CORDON_VM_BPF_LSM=$bpf_lsm CORDON_VM_RESULTS=/tmp/vm-results"
    echo "cd -- $(shq "$PWD") || { echo 'run-in-vm: cannot cd to '$(shq "$PWD") >&2; exit $VM_FAILED; }"
    printf 'exec'
    for a in "$@"; do printf ' %s' "$(shq "$a")"; done
    echo
  } >"$r/cmd.sh"
}

# proc_alive PID: true while PID runs (a zombie child does not count).
proc_alive() {
  local st
  { read -r _ _ st _ <"/proc/$1/stat"; } 2>/dev/null || return 1
  [ "$st" != Z ]
}

show_console_tail() {
  echo "---- last 60 lines of the $KEY console ----" >&2
  tail -n 60 "$tmp/console.log" | sed 's/\r$//' >&2
  echo "---- end of console ----" >&2
  qemu_errors
}
# qemu's own messages, without the expected warning about etc/sercon-port
# (that fw_cfg item silences SeaBIOS on the serial console).
qemu_errors() {
  grep -v 'sercon-port' "$tmp/qemu.err" | sed 's/^/qemu: /' >&2
}

say "booting $(cat "$kdir/package") (lsm=$lsm), timeout ${TIMEOUT}s"
t_start=$(now_ms)
for attempt in 1 2; do
  write_share "$@"
  : >"$tmp/console.log"; : >"$tmp/qemu.err"
  t0=$(now_ms)
  timeout -k 10 "$TIMEOUT" "${qemu[@]}" </dev/null >"$tmp/console.log" 2>"$tmp/qemu.err" &
  qpid=$!
  if [ "$quiet" -eq 0 ]; then
    tail -s 0.1 -n +1 -f --pid="$qpid" "$tmp/console.log" | sed -u 's/\r$//' &
    tailpid=$!
  fi
  why=""
  while proc_alive "$qpid"; do
    if [ ! -e "$tmp/results/started" ] \
       && [ $(($(now_ms) - t0)) -gt $((BOOT_TIMEOUT * 1000)) ]; then
      why="the command had not started after ${BOOT_TIMEOUT}s"
      kill -TERM "$qpid" 2>/dev/null
      break
    fi
    sleep 0.1
  done
  wait "$qpid"; qrc=$?
  qpid=""
  if [ -n "$tailpid" ]; then wait "$tailpid" 2>/dev/null; tailpid=""; fi
  t1=$(now_ms)

  [ -f "$tmp/results/status" ] && break
  if [ -z "$why" ]; then
    if [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then why="timed out after ${TIMEOUT}s"
    elif [ -f "$tmp/results/init-failed" ]; then why="init failed: $(cat "$tmp/results/init-failed")"
    elif [ -f "$tmp/results/started" ]; then why="the VM stopped before the command finished (panic?), qemu status $qrc"
    else why="the VM stopped before the command started (panic or boot failure), qemu status $qrc"
    fi
  fi
  if [ "$attempt" -eq 1 ] && [ ! -f "$tmp/results/started" ] && [ ! -f "$tmp/results/init-failed" ]; then
    say "attempt 1 failed: $why"
    show_console_tail
    say "RETRYING ONCE: the VM died before running the command"
    continue
  fi
  break
done

wall=$(secs $((t1 - t_start)))
if [ ! -f "$tmp/results/status" ]; then
  [ "$quiet" -eq 1 ] && [ -f "$tmp/results/output.log" ] && cat "$tmp/results/output.log"
  show_console_tail
  say "VM FAILED (attempt $attempt): $why; no exit status from the command (${wall}s)"
  exit "$VM_FAILED"
fi

status="$(cat "$tmp/results/status")"
case "$status" in ''|*[!0-9]*) die "unreadable exit status '$status'";; esac
[ "$quiet" -eq 1 ] && cat "$tmp/results/output.log"
qemu_errors
# A kernel WARN, BUG or Oops during the run fails it, whatever the command's
# status: a test that passes while the kernel complains has found something.
[ -f "$tmp/results/dmesg.log" ] || die "no kernel log came back from the VM"
if grep -nE "$KERNEL_SLOW" "$tmp/results/dmesg.log" >&2; then
  say "note: the guest kernel reported a stall or lockup (above); not counted as a failure"
fi
grep -nE "$KERNEL_TROUBLE" "$tmp/results/dmesg.log" | grep -vE "$KERNEL_SLOW" >"$tmp/trouble"
if [ -s "$tmp/trouble" ]; then
  say "KERNEL TROUBLE in the guest's log (lines matching: $KERNEL_TROUBLE):"
  while IFS=: read -r n _; do
    sed -n "$((n > 3 ? n - 3 : 1)),$((n + 25))p" "$tmp/results/dmesg.log" >&2
    echo "----" >&2
  done < <(head -n 3 "$tmp/trouble")
  say "FAILED: the kernel reported trouble (command exit status $status)"
  exit "$KERNEL_FAILED"
fi
boot="?"; run="?"
if [ -f "$tmp/results/times" ]; then
  read -r _ up0 < <(grep '^start ' "$tmp/results/times")
  read -r _ up1 < <(grep '^end ' "$tmp/results/times")
  boot="$up0"; run=$(awk -v a="$up0" -v b="$up1" 'BEGIN { printf "%.1f", b - a }')
fi
retried=""; [ "$attempt" -eq 2 ] && retried=", after a retry"
say "exit status $status (boot ${boot}s, command ${run}s, wall ${wall}s${retried})"
exit "$status"
