#!/usr/bin/env bash
# The one command for the benchmarks (root): sets up, runs them, and writes
# docs/performance.md and its charts. See bench/README.md.
#
#   bench/run.sh [options] [-- EGRESS_BENCH_ARGS...]
#     --only LIST       comma-separated subset of b1,b2,b3,b4,b5,b6,b8 (default: all)
#     --quick           smoke test of every selected benchmark (minutes, not figures)
#     --build-dir DIR   use (and build) DIR instead of ./setup.sh's build/ (e.g. build-bench)
#     --no-build        do not set up or build; use the binaries in the build dir as they are
#   Arguments after "--" (and, for compatibility, unknown arguments) go to
#   egress_bench (B1), e.g. --rounds 300.
#
# B1, B8 and the host parts of B3 and B6 run on this machine; B2 and the VM parts
# of B3 and B6 need BPF LSM and run in the 6.12 guest of tests/vm (qemu TCG). Each benchmark
# writes JSON into <build dir>/bench/; the report is rendered from every JSON
# file found there, so a subset run keeps the other sections from earlier runs
# (each section states its date). A benchmark that fails is reported at the end
# (exit status 1); its section then keeps no stale figures.
#
# report.py runs under /usr/bin/python3: that is the interpreter Debian's
# python3-matplotlib is installed for (a python3 earlier in PATH, e.g. pyenv's,
# may not have it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

only="b1,b2,b3,b4,b5,b6,b8"
quick=0
build=build
custom_build=0
do_build=1
b1_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --only) [ $# -ge 2 ] || { echo "bench/run.sh: --only needs a list" >&2; exit 2; }; only="$2"; shift ;;
    --only=*) only="${1#--only=}" ;;
    --quick) quick=1 ;;
    --build-dir) [ $# -ge 2 ] || { echo "bench/run.sh: --build-dir needs a directory" >&2; exit 2; }
                 build="$2"; custom_build=1; shift ;;
    --no-build) do_build=0 ;;
    --) shift; b1_args+=("$@"); break ;;
    *) b1_args+=("$1") ;;
  esac
  shift
done
want() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
for b in ${only//,/ }; do
  case "$b" in b1|b2|b3|b4|b5|b6|b8) ;; *) echo "bench/run.sh: unknown benchmark '$b' (known: b1,b2,b3,b4,b5,b6,b8)" >&2; exit 2 ;; esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench/run.sh: run as root" >&2; exit 1; }

vm=0
{ want b2 || want b3 || want b6; } && vm=1
case "$build" in /*) ;; *) build="$ROOT/$build" ;; esac
out="$build/bench"
vmout="$out/vm-results"   # the guest writes here (a --rw share)

say() { echo "bench/run.sh: $*" >&2; }
t_all=$SECONDS

# ---- setup and build --------------------------------------------------------
if [ "$do_build" -eq 1 ]; then
  if [ "$custom_build" -eq 1 ]; then
    bench/setup.sh --deps
    cmake -S . -B "$build" -DCORDON_BUILD_FUZZERS=OFF -DCORDON_VM_TESTS=OFF >/dev/null
    cmake --build "$build" -j2 --target cordon egress_bench file_bench policy_bench dns_bench
  else
    bench/setup.sh
  fi
  [ "$vm" -eq 1 ] && tests/vm/setup.sh 6.12
fi
mkdir -p "$out" "$vmout"
case "$out" in
  "$ROOT"/*) ;;
  *) [ "$vm" -eq 1 ] && { say "the build dir must lie inside $ROOT for the VM benchmarks (the guest sees only the host root)"; exit 1; } ;;
esac

host_kernel="$(uname -r)"
host_cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
failed=()

# run_vm NAME TIMEOUT CMD...: one benchmark in the 6.12 guest (with BPF LSM).
run_vm() {
  local name="$1" timeout="$2"; shift 2
  local t0=$SECONDS rc=0
  say "$name: in the 6.12 VM (qemu TCG): $*"
  CORDON_VM_TIMEOUT="$timeout" tests/vm/run-in-vm.sh 6.12 --rw "$vmout" -- \
    env CORDON_BENCH_HOST_KERNEL="$host_kernel" CORDON_BENCH_HOST_CPU="$host_cpu" "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then
    say "$name FAILED (exit $rc$([ "$rc" -eq 125 ] && echo ': the VM failed'))"
    failed+=("$name")
  fi
  say "$name: $((SECONDS - t0)) s"
}

q=()
[ "$quick" -eq 1 ] && q=(--quick)

# ---- B1: egress decision (host) ---------------------------------------------
if want b1; then
  t0=$SECONDS
  rm -f "$out/b1.json"
  "$build/bench/egress_bench" --out "$out/b1.json" "${q[@]}" "${b1_args[@]}" || { say "B1 FAILED"; failed+=(B1); }
  say "B1: $((SECONDS - t0)) s"
fi

# ---- B3: policy compile, load and swap (host, then the VM) ------------------
if want b3; then
  t0=$SECONDS
  rm -f "$out/b3-host.json" "$vmout/b3-vm.json"
  "$build/bench/policy_bench" --out "$out/b3-host.json" "${q[@]}" || { say "B3 (host) FAILED"; failed+=("B3 host"); }
  say "B3 (host): $((SECONDS - t0)) s"
  # Under TCG a 100k-rule parse takes ~10 s: parse once, attach/replace 3 rounds.
  vq=(--rounds 3 --parse-rounds 1)
  [ "$quick" -eq 1 ] && vq=(--quick --rounds 1)
  run_vm "B3 (VM)" 1200 "$build/bench/policy_bench" "${vq[@]}" --out "$vmout/b3-vm.json"
fi

# ---- B2: file decision (VM) --------------------------------------------------
if want b2; then
  rm -f "$vmout/b2.json"
  run_vm B2 1200 "$build/bench/file_bench" "${q[@]}" --out "$vmout/b2.json"
fi

# ---- B6: a real workload under cordon run (host, then the VM) ----------------
if want b6; then
  t0=$SECONDS
  rm -f "$out/b6-host.json" "$vmout/b6.json"
  # Natively one pass of the job takes under a second: four per command.
  /usr/bin/python3 bench/b6/b6_bench.py --cordon "$build/cordon" --repeat 4 "${q[@]}" --out "$out/b6-host.json" \
    || { say "B6 (host) FAILED"; failed+=("B6 host"); }
  say "B6 (host): $((SECONDS - t0)) s"
  run_vm "B6 (VM)" 1800 /usr/bin/python3 bench/b6/b6_bench.py --cordon "$build/cordon" --strict "${q[@]}" \
    --out "$vmout/b6.json"
fi

# ---- B4, B5: the agent's event pipeline and footprint (host) --------------------
if want b4 || want b5; then
  t0=$SECONDS
  agent_only=()
  want b4 && ! want b5 && agent_only=(--only b4)
  want b5 && ! want b4 && agent_only=(--only b5)
  bench/run_agent.sh --cordon "$build/cordon" "${agent_only[@]}" || { say "B4/B5 FAILED"; failed+=("B4/B5"); }
  say "B4/B5: $((SECONDS - t0)) s"
fi

# ---- B8: the DNS resolver (host) -----------------------------------------------
if want b8; then
  t0=$SECONDS
  rm -f "$out/b8_dns.json"
  "$build/bench/dns_bench" --out "$out/b8_dns.json" "${q[@]}" || { say "B8 FAILED"; failed+=(B8); }
  say "B8: $((SECONDS - t0)) s"
fi

# ---- report -------------------------------------------------------------------
args=()
for f in b1:"$out/b1.json" b2:"$vmout/b2.json" b3-host:"$out/b3-host.json" b3-vm:"$vmout/b3-vm.json" \
         b6-host:"$out/b6-host.json" b6:"$vmout/b6.json" b8:"$out/b8_dns.json"; do
  [ -f "${f#*:}" ] && args+=("--${f%%:*}" "${f#*:}")
done
/usr/bin/python3 bench/report.py "${args[@]}" --agent-md docs/performance-agent.md --out docs/performance.md
say "done in $((SECONDS - t_all)) s"
if [ "${#failed[@]}" -gt 0 ]; then
  say "FAILED: ${failed[*]}"
  exit 1
fi
