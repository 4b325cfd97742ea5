#!/usr/bin/env bash
# The Debian package, installed the way a user installs it: makes
# cordon_<version>_<arch>.deb from an already-built build directory (cpack),
# bootstraps a fresh Debian root (mmdebstrap --variant=minbase, from the Debian
# mirrors this host's apt uses, nothing else), installs the package there with
# `apt-get install ./cordon_*.deb` (so its Depends are resolved for real), and
# runs the installed /usr/bin/cordon in that root:
#   - cordon --version is the package's version; dpkg knows every file;
#   - cordon agent --check (the unit's ExecStartPre) passes, also with the
#     shipped example configuration;
#   - cordon doctor --json: exit 0 exactly when it reports full enforcement, and
#     the same verdicts as the build tree's binary gives on this kernel;
#   - cordon run -- /bin/true exits 0 with no violations;
#   - negative control: a TCP connect to a listener on 127.0.0.1 succeeds from the
#     root unconfined and is refused (EPERM, a net.connect denial, the listener
#     never sees it) under `cordon run` of the installed binary;
#   - the installed man pages render (man --warnings), bash completion completes,
#     the unit passes systemd-analyze verify and names the installed binary;
#   - apt-get purge removes every file the package installed.
#
#   tests/package/install_test.sh BUILD_DIR      (root; ctest -L package)
#
# All of it happens in a private mount namespace (unshare --propagation
# private), the package made while the root is bootstrapped. The root is a
# tmpfs there, and proc, sysfs, the host's cgroup2 (found in /proc/self/mountinfo),
# a fresh bpffs, /dev and /run are mounted into it there. None of it is visible
# on the host, and all of it is gone when the namespace's last process exits,
# even if this script is killed; the script still unmounts what it mounted, and
# checks afterwards that the host's mount table holds nothing of it.
set -euo pipefail

say() { echo "package_install: $*"; }
fail() { echo "package_install: FAIL: $*" >&2; exit 1; }
since() { echo "$(( $(date +%s) - $1 )) s"; }

# ---- inside the private mount namespace ------------------------------------------
if [ "${1:-}" = --in-namespace ]; then
  work=$2 build=$3
  root=$work/root
  listener_pid=
  cpack_pid=
  mounted=()
  cleanup_namespace() {
    if [ -n "$listener_pid" ]; then kill "$listener_pid" 2>/dev/null || true; fi
    if [ -n "$cpack_pid" ]; then kill "$cpack_pid" 2>/dev/null || true; wait "$cpack_pid" 2>/dev/null || true; fi
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -R "${mounted[i]}" 2>/dev/null || umount -lR "${mounted[i]}" || true; done
  }
  trap cleanup_namespace EXIT
  mnt() { local target=${*: -1}; mount "$@"; mounted+=("$target"); }

  # The package is made while the root is bootstrapped (each mostly waits for
  # its own work: compression, downloads and dpkg).
  t0=$(date +%s)
  (cd "$build" && exec cpack -G DEB -B "$work/out") >"$work/cpack.log" 2>&1 &
  cpack_pid=$!
  mnt -t tmpfs -o mode=0755,size=2g cordon-package-test "$root"

  # The Debian mirrors (and suites) this host's apt uses: a fresh Debian 12 with
  # its updates, from nowhere else.
  . /etc/os-release
  [ "${ID:-}" = debian ] && [ -n "${VERSION_CODENAME:-}" ] || fail "not a Debian host (/etc/os-release)"
  mapfile -t sources < <(apt-get indextargets --format '$(ORIGIN)|$(REPO_URI)|$(RELEASE)|$(COMPONENT)' \
                           'Identifier: Packages' | awk -F'|' '$1 == "Debian" {print "deb " $2 " " $3 " " $4}' | sort -u)
  [ "${#sources[@]}" -gt 0 ] || fail "no Debian mirror in this host's apt sources (apt-get update first)"
  say "bootstrapping Debian $VERSION_CODENAME (minbase) from: ${sources[*]}"
  # The package lists are kept: apt-get install ./cordon_*.deb then fetches
  # whatever its Depends need that minbase lacks, as on an installed system.
  mmdebstrap --quiet --variant=minbase --mode=root --format=directory --skip=cleanup/apt/lists \
    --aptopt='Acquire::Retries "3"' \
    "$VERSION_CODENAME" "$root" "${sources[@]}" >"$work/mmdebstrap.log" 2>&1 ||
    { cat "$work/mmdebstrap.log" >&2; fail "mmdebstrap failed"; }
  say "bootstrapped in $(since "$t0") ($(du -sm "$root" | cut -f1) MiB)"
  rc=0
  wait "$cpack_pid" || rc=$?
  cpack_pid=
  [ "$rc" -eq 0 ] || { cat "$work/cpack.log" >&2; fail "cpack -G DEB exited $rc"; }
  debs=("$work"/out/*.deb)
  [ "${#debs[@]}" -eq 1 ] && [ -f "${debs[0]}" ] || fail "cpack made ${debs[*]}"
  deb=${debs[0]}
  expected="cordon_$(dpkg-deb -f "$deb" Version)_$(dpkg-deb -f "$deb" Architecture).deb"
  [ "${deb##*/}" = "$expected" ] || fail "the package is ${deb##*/}, not $expected"
  say "built ${deb##*/} meanwhile ($(du -k "$deb" | cut -f1) KiB; Depends: $(dpkg-deb -f "$deb" Depends))"

  # What cordon needs, as on a booted Debian 12: cgroup2 at /sys/fs/cgroup (the
  # host's hierarchy, bound; wherever the host mounts it), a bpffs of its own (the
  # host's pins stay out of sight, and ours go with the namespace), /run a tmpfs.
  cgroup2=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
  [ -n "$cgroup2" ] || fail "no cgroup2 mount in /proc/self/mountinfo"
  cgroup2=$(printf '%b' "$cgroup2")  # mountinfo escapes spaces as \040
  mnt -t proc proc "$root/proc"
  mnt -t sysfs sysfs "$root/sys"
  mnt --bind "$cgroup2" "$root/sys/fs/cgroup"
  mnt -t bpf -o mode=0700 bpf "$root/sys/fs/bpf"
  if [ -r /sys/kernel/security/lsm ]; then mnt -t securityfs securityfs "$root/sys/kernel/security"; fi
  mnt --rbind /dev "$root/dev"
  mnt -t tmpfs -o mode=0755 run "$root/run"
  cp /etc/resolv.conf "$root/etc/resolv.conf"  # for apt, should a Depends need a download

  in_root() {
    chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
  }

  # ---- install ----
  t1=$(date +%s)
  cp "$deb" "$root/tmp/"
  in_root apt-get install -y --no-install-recommends "/tmp/${deb##*/}" >"$work/apt.log" 2>&1 ||
    { cat "$work/apt.log" >&2; fail "apt-get install ./${deb##*/} failed in the fresh root"; }
  rm "$root/tmp/${deb##*/}"
  status=$(in_root dpkg-query -W -f '${Status} ${Version}' cordon)
  version=$(dpkg-deb -f "$deb" Version)
  [ "$status" = "install ok installed $version" ] || fail "dpkg says: $status"
  say "installed with apt-get in $(since "$t1"): $(in_root dpkg-query -W -f '${Depends}' cordon) satisfied"
  mapfile -t files < <(in_root dpkg -L cordon)
  for f in /usr/bin/cordon /lib/systemd/system/cordon-agent.service /usr/share/man/man1/cordon.1.gz \
           /usr/share/man/man1/cordon-run.1.gz /usr/share/bash-completion/completions/cordon \
           /usr/share/zsh/vendor-completions/_cordon /usr/share/doc/cordon/copyright \
           /usr/share/doc/cordon/examples/agent.yaml; do
    # A here-string, not a pipe: with pipefail, grep -q leaving early fails the
    # writer with SIGPIPE when the list outgrows one write (it did in CI).
    grep -qx "$f" <<<"$(printf '%s\n' "${files[@]}")" || fail "dpkg -L cordon lacks $f"
    [ -e "$root$f" ] || fail "$f is not in the root"
  done
  [ ! -e "$root/etc/cordon" ] || fail "the package made /etc/cordon (no configuration is installed)"
  got=$(in_root cordon --version)
  case $got in *"$version"*) ;; *) fail "cordon --version says '$got', the package is $version" ;; esac
  say "ok: /usr/bin/cordon $version, $(printf '%s\n' "${files[@]}" | wc -l) paths"
  # The unit's ExecStartPre, without a configuration (the defaults) and with the
  # shipped example (every default written out).
  for config in "" /usr/share/doc/cordon/examples/agent.yaml; do
    out=$(in_root cordon agent --check ${config:+--config "$config"} 2>&1) ||
      fail "cordon agent --check ${config:+--config $config}: $out"
  done
  say "ok: cordon agent --check, with no configuration and with the example"

  # ---- cordon doctor ----
  doctor_rc=0
  in_root cordon doctor --json >"$work/doctor.json" 2>"$work/doctor.err" || doctor_rc=$?
  host_rc=0
  "$build/cordon" doctor --json >"$work/doctor-build.json" 2>/dev/null || host_rc=$?
  python3 - "$work/doctor.json" "$doctor_rc" "$work/doctor-build.json" "$host_rc" <<'EOF' ||
import json, sys
def verdicts(d):
    return {"fullEnforcement": d["fullEnforcement"],
            "probes": {k: v["ok"] for k, v in d["probes"].items()},
            "controls": {c["name"]: (c["status"], c["run"], c["attach"]) for c in d["controls"]}}
got, rc = json.load(open(sys.argv[1])), int(sys.argv[2])
ref, ref_rc = json.load(open(sys.argv[3])), int(sys.argv[4])
problems = []
if rc != (0 if got["fullEnforcement"] else 1):
    problems.append(f"exit {rc} with fullEnforcement {got['fullEnforcement']}")
for probe in ("cgroup2", "btf", "bpffs", "ringbuf", "cgroup_hooks"):
    if not got["probes"][probe]["ok"]:
        problems.append(f"probe {probe}: {got['probes'][probe]['detail']}")
egress = [c for c in got["controls"] if c["name"] == "network.egress"]
if not egress or egress[0]["status"] != "enforced":
    problems.append(f"network.egress: {egress}")
a, b = verdicts(got), verdicts(ref)
for key in ("fullEnforcement", "probes", "controls"):
    if a[key] != b[key]:
        problems.append(f"{key} differs from the build tree's binary: installed {a[key]}, build {b[key]}")
if rc != ref_rc:
    problems.append(f"exit {rc}, the build tree's binary {ref_rc}")
for p in problems:
    print("doctor:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
    { cat "$work/doctor.err" >&2; fail "cordon doctor in the fresh root"; }
  say "ok: cordon doctor exits $doctor_rc (fullEnforcement $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fullEnforcement"])' "$work/doctor.json")), the build tree's verdicts"

  # ---- cordon run ----
  rc=0
  in_root cordon run -- /bin/true >"$work/run.out" 2>"$work/run.err" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$work/run.err" >&2; fail "cordon run -- /bin/true exited $rc"; }
  grep -q '^cordon: no violations' "$work/run.err" || { cat "$work/run.err" >&2; fail "cordon run -- /bin/true: no 'no violations' summary"; }
  say "ok: cordon run -- /bin/true exits 0, no violations"

  # Negative control: the same connect, unconfined and confined, to a listener
  # that prints the line each connection sends (this namespace shares the host's
  # network). Connections are accepted in order, so the line after the confined
  # attempt must be the next unconfined one's: had the confined connect got
  # through, its line would come first.
  exec {listener}< <(exec python3 -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); print(c.makefile().readline().strip() or "(nothing)", flush=True); c.close()')
  listener_pid=$!
  read -r -t 60 -u "$listener" port || fail "the listener did not start"
  connect() { echo "exec 3<>/dev/tcp/127.0.0.1/$port && echo $1 >&3 && echo connected"; }
  unconfined() {
    local out line
    out=$(in_root /bin/bash -c "$(connect "$1")" 2>&1) || fail "unconfined connect to 127.0.0.1:$port from the root: $out"
    read -r -t 60 -u "$listener" line || fail "the listener said nothing after the unconfined connect $1"
    [ "$line" = "$1" ] || fail "the listener got '$line' where the unconfined connect sent '$1'"
  }
  unconfined unconfined-1
  rc=0
  in_root cordon run -- /bin/bash -c "$(connect confined)" >"$work/deny.out" 2>"$work/deny.err" || rc=$?
  denied() { cat "$work/deny.out" "$work/deny.err" >&2; fail "cordon run of a connect to 127.0.0.1:$port: $*"; }
  [ "$rc" -eq 1 ] || denied "exit $rc, not bash's 1"
  ! grep -q connected "$work/deny.out" || denied "it connected"
  grep -q 'connect: Operation not permitted' "$work/deny.err" || denied "no EPERM"
  grep -q '1 denied.*net\.connect' "$work/deny.err" || denied "no net.connect denial in the summary"
  unconfined unconfined-2
  say "ok: a connect to 127.0.0.1:$port: unconfined connected, under cordon run refused (EPERM, net.connect)"
  kill "$listener_pid"; listener_pid=
  exec {listener}<&-

  status=$(in_root cordon status --json)
  case $status in *'"sandboxes":[]'*) ;; *) fail "sandboxes left attached after the runs: $status" ;; esac

  # ---- man pages, completion, unit ----
  for page in "$root"/usr/share/man/man1/cordon*.1.gz; do
    warnings=$(MANWIDTH=100 man --warnings -l "$page" 2>&1 >/dev/null || true)
    [ -z "$warnings" ] || fail "${page#"$root"}: man warns: $warnings"
  done
  grep -q '^NAME' <<<"$(MANWIDTH=100 man -l "$root/usr/share/man/man1/cordon-run.1.gz" 2>/dev/null)" ||
    fail "cordon-run(1) does not render"
  pages=$(find "$root/usr/share/man/man1" -name 'cordon*.1.gz' | wc -l)
  [ "$pages" -eq "$(find "$build/docs/man1" -name '*.1' | wc -l)" ] || fail "$pages man pages installed, $build/docs/man1 has others"
  completion=$(in_root /bin/bash -c '. /usr/share/bash-completion/completions/cordon
    COMP_WORDS=(cordon ru); COMP_CWORD=1; _cordon; echo "${COMPREPLY[*]}"')
  [ "$completion" = run ] || fail "bash completion of 'cordon ru' gave '$completion'"
  unit=$root/lib/systemd/system/cordon-agent.service
  grep -qx 'ExecStart=/usr/bin/cordon agent' "$unit" || fail "the unit's ExecStart is not /usr/bin/cordon: $(grep ExecStart "$unit")"
  if command -v systemd-analyze >/dev/null; then
    # Against the root (its /usr/bin/cordon and /bin/sh); minbase has no systemd,
    # hence no sysinit.target there, the one thing allowed to be missing.
    verify=$(systemd-analyze verify --man=no --root="$root" /lib/systemd/system/cordon-agent.service 2>&1 |
             grep -v 'Unit sysinit.target not found' || true)
    [ -z "$verify" ] || fail "systemd-analyze verify cordon-agent.service: $verify"
    say "ok: $pages man pages render, bash completion, the unit verifies (systemd-analyze)"
  else
    say "ok: $pages man pages render, bash completion (no systemd-analyze here)"
  fi

  # ---- purge ----
  in_root apt-get purge -y cordon >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; fail "apt-get purge cordon"; }
  for f in "${files[@]}"; do
    [ -d "$root$f" ] || [ ! -e "$root$f" ] || fail "$f is left after apt-get purge cordon"
  done
  say "ok: apt-get purge cordon removed every file"
  say "namespace part took $(since "$t0")"
  exit 0
fi

# ---- on the host -------------------------------------------------------------------
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
[ "$(id -u)" -eq 0 ] || fail "run as root (it bootstraps and chroots)"
for tool in cpack mmdebstrap dpkg-deb unshare chroot python3 man; do
  command -v "$tool" >/dev/null || fail "$tool is missing (./setup.sh --deps installs it)"
done
[ -x "$build/cordon" ] && [ -f "$build/CPackConfig.cmake" ] || fail "$build has no cordon or CPackConfig.cmake: build it first"
start=$(date +%s)
work=$(mktemp -d /tmp/cordon-package-test.XXXXXX)
mkdir "$work/root" "$work/out"
cleanup() {
  # The namespace's mounts die with it; the host never had any. Say so if not.
  if grep -q " $work/" /proc/self/mountinfo; then
    echo "package_install: FAIL: mounts left under $work:" >&2
    grep " $work/" /proc/self/mountinfo >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

unshare --mount --propagation private -- "$(readlink -f "$0")" --in-namespace "$work" "$build"
say "passed in $(since "$start")"
