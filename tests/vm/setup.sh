#!/usr/bin/env bash
# Prepares the throwaway-VM harness (see README.md): installs qemu and static
# busybox, then for each kernel flavour (6.1 and 6.12) downloads the current
# stock Debian kernel package (download + unpack only, never installed),
# extracts the uncompressed ELF vmlinux from its bzImage and builds the base
# initramfs (static busybox + the 9p modules). run-in-vm.sh appends the
# current tests/vm/init to it at boot, so editing init needs no new setup.
#
# Idempotent; run as root. Results are cached per package version in
# $CORDON_VM_CACHE (default /var/cache/cordon-vm); a second run only asks
# apt-cache which version is current and does nothing else.
#
#   tests/vm/setup.sh            prepare both kernels
#   tests/vm/setup.sh 6.12       prepare only the named kernel(s)
set -euo pipefail

CACHE="${CORDON_VM_CACHE:-/var/cache/cordon-vm}"
FORMAT=3   # bump when the layout of a prepared kernel dir changes

declare -A META=( [6.1]=linux-image-amd64 [6.12]=linux-image-6.12-amd64 )
# Modules the guest needs, with their dependencies resolved from depends=.
# virtio_pci is the transport for the 9p devices; built-in modules are skipped.
ROOT_MODULES=(virtio_pci 9pnet_virtio 9p)

PACKAGES=(qemu-system-x86 busybox-static xz-utils zstd file)

log() { echo "vm-setup: $*"; }
die() { echo "vm-setup: error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (installs packages, writes $CACHE)"

keys=("$@")
[ "${#keys[@]}" -gt 0 ] || keys=(6.1 6.12)
for key in "${keys[@]}"; do
  [ -n "${META[$key]:-}" ] || die "unknown kernel '$key' (known: ${!META[*]})"
done

export DEBIAN_FRONTEND=noninteractive
apt_updated=0
apt_update_once() {
  if [ "$apt_updated" -eq 0 ]; then
    log "apt-get update"
    apt-get update -qq
    apt_updated=1
  fi
}

# ---- host packages -----------------------------------------------------------
missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  apt_update_once
  log "installing ${missing[*]}"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

BUSYBOX=/bin/busybox
file -L "$BUSYBOX" | grep -q 'statically linked' || die "$BUSYBOX is not the static busybox (busybox-static)"

# ---- helpers -----------------------------------------------------------------

# Which package and version each flavour resolves to depends only on apt's
# lists and configuration. apt-cache costs ~0.6 s per call here (no pkgcache),
# so the answer is remembered in $CACHE/resolved, keyed by this fingerprint.
apt_state() {
  { stat -c '%n %s %Y' /var/lib/apt/lists/*_Packages* /etc/apt/sources.list \
      /etc/apt/sources.list.d/* /etc/apt/preferences /etc/apt/preferences.d/* 2>/dev/null || true
  } | sha256sum | cut -c1-16
}

# resolve KEY...: sets PKG[KEY] and VER[KEY] to the generic amd64 kernel image
# that the flavour's metapackage currently depends on.
declare -A PKG=() VER=()
resolve() {
  local state key todo=() metas=() deps meta pkg
  state="$(apt_state)"
  if [ -f "$CACHE/resolved" ]; then
    while read -r s key pkg ver; do
      [ "$s" = "$state" ] && PKG[$key]="$pkg" VER[$key]="$ver"
    done <"$CACHE/resolved"
  fi
  for key in "$@"; do [ -n "${VER[$key]:-}" ] || todo+=("$key"); done
  [ "${#todo[@]}" -gt 0 ] || return 0

  for key in "${todo[@]}"; do metas+=("${META[$key]}"); done
  if ! deps="$(apt-cache depends "${metas[@]}" 2>/dev/null)"; then
    apt_update_once
    state="$(apt_state)"
    deps="$(apt-cache depends "${metas[@]}")" || die "apt-cache depends ${metas[*]} failed"
  fi
  for key in "${todo[@]}"; do
    meta="${META[$key]}"
    # this metapackage's block of the output: its name, then indented lines
    local block
    block="$(awk -v m="$meta" '/^[^ ]/ { on = ($0 == m) } on' <<<"$deps")"
    # The signed generic image (linux-image-6.1.0-57-amd64,
    # linux-image-6.12.117+deb12-amd64); the unsigned one only if that is the
    # dependency; never cloud-amd64, rt-amd64 or -dbg.
    pkg="$(sed -n 's/^ *|\?Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' <<<"$block" | head -n1)"
    [ -n "$pkg" ] || pkg="$(sed -n 's/^ *|\?Depends: \(linux-image-[0-9][^ ]*-amd64-unsigned\)$/\1/p' <<<"$block" | head -n1)"
    [ -n "$pkg" ] || die "no generic amd64 image among the dependencies of $meta:"$'\n'"$block"
    case "$pkg" in *cloud*|*-rt-*|*-dbg*) die "unexpected flavour $pkg for $meta";; esac
    PKG[$key]="$pkg"
  done
  local pkgs=() policy
  for key in "${todo[@]}"; do pkgs+=("${PKG[$key]}"); done
  policy="$(apt-cache policy "${pkgs[@]}")" || die "apt-cache policy failed"
  for key in "${todo[@]}"; do
    VER[$key]="$(awk -v p="${PKG[$key]}:" '/^[^ ]/ { on = ($0 == p) } on && $1 == "Candidate:" { print $2 }' <<<"$policy")"
    case "${VER[$key]}" in ""|"(none)") die "no installable version of ${PKG[$key]}";; esac
  done
  for key in "${!VER[@]}"; do echo "$state $key ${PKG[$key]} ${VER[$key]}"; done >"$CACHE/resolved.tmp"
  mv "$CACHE/resolved.tmp" "$CACHE/resolved"
}

# extract_vmlinux BZIMAGE OUT: finds the xz or zstd payload inside the bzImage
# (like the kernel's scripts/extract-vmlinux) and writes the ELF it contains.
extract_vmlinux() {
  local img="$1" out="$2" off
  local -a tries=(
    "xz     \xfd7zXZ\x00"
    "zstd   \x28\xb5\x2f\xfd"
  )
  local t tool magic
  for t in "${tries[@]}"; do
    read -r tool magic <<<"$t"
    for off in $(LC_ALL=C grep -obUaP "$magic" "$img" | cut -d: -f1); do
      case "$tool" in
        xz)   tail -c +"$((off + 1))" "$img" | xz -dc --single-stream >"$out" 2>/dev/null || true ;;
        zstd) tail -c +"$((off + 1))" "$img" | zstd -dcq >"$out" 2>/dev/null || true ;;
      esac
      if [ "$(head -c 4 "$out" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] \
         && file "$out" | grep -q 'ELF 64-bit LSB executable, x86-64'; then
        log "  vmlinux: $tool payload at offset $off of $(basename "$img")"
        return 0
      fi
    done
  done
  rm -f "$out"
  return 1
}

# modinfo_field KO FIELD: reads FIELD= from the module's .modinfo strings
# (kmod is not installed on the host, so no modinfo).
modinfo_field() {
  tr '\0' '\n' <"$1" | sed -n "s/^$2=//p" | head -n1
}

# prepare KEY: makes $CACHE/KEY point at a ready kernel dir for the current
# package version, building it if needed.
prepare() {
  local key="$1" pkg="${PKG[$1]}" ver="${VER[$1]}" dir
  dir="$CACHE/kernels/${pkg}_${ver//:/%3a}"
  if [ -f "$dir/READY" ] && [ "$(cat "$dir/READY")" = "$FORMAT" ]; then
    ln -sfn "kernels/$(basename "$dir")" "$CACHE/$key"
    log "$key: $pkg $ver already prepared ($dir)"
    return 0
  fi

  log "$key: preparing $pkg $ver"
  local t0=$SECONDS work
  rm -rf "$dir"
  mkdir -p "$dir"
  work="$(mktemp -d "$CACHE/work.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT

  (cd "$work" && apt-get download -qq -o APT::Sandbox::User=root "$pkg=$ver") \
    || die "apt-get download $pkg=$ver failed"
  local deb
  deb="$(ls "$work"/*.deb)"
  log "  downloaded $(basename "$deb") ($(du -m "$deb" | cut -f1) MB)"
  dpkg-deb -x "$deb" "$work/root"
  rm -f "$deb"

  local vmlinuz kver moddir
  vmlinuz="$(ls "$work"/root/boot/vmlinuz-* | head -n1)"
  [ -f "$vmlinuz" ] || die "no /boot/vmlinuz-* in $pkg"
  kver="${vmlinuz##*/vmlinuz-}"
  for moddir in "$work/root/lib/modules/$kver" "$work/root/usr/lib/modules/$kver"; do
    [ -d "$moddir" ] && break
  done
  [ -d "$moddir" ] || die "no modules dir for $kver in $pkg"

  extract_vmlinux "$vmlinuz" "$dir/vmlinux" || die "could not extract an ELF vmlinux from $vmlinuz"

  # ---- initramfs ----
  local stage="$work/initramfs"
  mkdir -p "$stage"/{bin,dev,proc,sys,tmp,run,host,results,lib/cordon-vm}
  cp "$BUSYBOX" "$stage/bin/busybox"
  ln -s busybox "$stage/bin/sh"
  mknod -m 0600 "$stage/dev/console" c 5 1
  mknod -m 0666 "$stage/dev/null" c 1 3

  # index name -> file; module names use '_' where file names may use '-'
  local -A kofile=() builtin=()
  local f n
  while IFS= read -r f; do
    n="${f##*/}"; n="${n%%.ko*}"; n="${n//-/_}"
    kofile[$n]="$f"
  done < <(find "$moddir" -name '*.ko' -o -name '*.ko.xz' -o -name '*.ko.zst')
  if [ -f "$moddir/modules.builtin" ]; then
    while IFS= read -r f; do
      n="${f##*/}"; n="${n%.ko}"; builtin[${n//-/_}]=1
    done <"$moddir/modules.builtin"
  fi

  # depth-first: dependencies before the module itself
  local -a order=()
  local -A seen=()
  visit() {
    local m="$1" src ko dep deps
    [ -n "${seen[$m]:-}" ] && return 0
    seen[$m]=1
    if [ -z "${kofile[$m]:-}" ]; then
      [ -n "${builtin[$m]:-}" ] || die "module $m is neither shipped nor built in ($kver)"
      log "  module $m: built in"
      return 0
    fi
    src="${kofile[$m]}"
    ko="$stage/lib/cordon-vm/$m.ko"
    case "$src" in
      *.ko.xz)  xz -dc "$src" >"$ko" ;;
      *.ko.zst) zstd -dcq "$src" >"$ko" ;;
      *)        cp "$src" "$ko" ;;
    esac
    deps="$(modinfo_field "$ko" depends)"
    for dep in ${deps//,/ }; do visit "${dep//-/_}"; done
    order+=("$m")
  }
  for f in "${ROOT_MODULES[@]}"; do visit "$f"; done
  printf '%s\n' "${order[@]}" >"$stage/lib/cordon-vm/modules.load"
  log "  modules (load order): ${order[*]:-(none, all built in)}"

  (cd "$stage" && find . | sort | busybox cpio -o -H newc 2>/dev/null) >"$dir/base.cpio"
  # Keep the whole module tree (with a busybox-made modules.dep) so that the
  # guest can autoload modules (veth, nf_tables, inet_diag, ...). Decompressed:
  # busybox modprobe first offers a compressed file to finit_module, which
  # logs "Invalid ELF header magic" for every module before it falls back.
  find "$moddir" -name '*.ko.xz' -print0 | xargs -0 -r -n 200 -P "$(nproc)" xz -d
  find "$moddir" -name '*.ko.zst' -print0 | xargs -0 -r -n 200 -P "$(nproc)" zstd -dq --rm
  busybox depmod -b "$(dirname "$(dirname "$(dirname "$moddir")")")" "$kver" \
    || die "depmod failed for $kver"
  mkdir -p "$dir/modules"
  mv "$moddir" "$dir/modules/$kver"
  echo "$kver" >"$dir/kernel-release"
  echo "$pkg $ver" >"$dir/package"
  printf '%s\n' "${order[@]}" >"$dir/modules.load"
  cp "$work/root/boot/config-$kver" "$dir/config" 2>/dev/null || true

  rm -rf "$work"
  trap - EXIT
  echo "$FORMAT" >"$dir/READY"
  ln -sfn "kernels/$(basename "$dir")" "$CACHE/$key"
  log "  $key ready in $((SECONDS - t0)) s: $dir (vmlinux $(($(stat -c %s "$dir/vmlinux") >> 20)) MB, base initramfs $(($(stat -c %s "$dir/base.cpio") >> 10)) KB, modules $(du -sm "$dir/modules" | cut -f1) MB)"
}

mkdir -p "$CACHE/kernels"
exec 9>"$CACHE/.lock"
flock 9   # concurrent setups wait for each other
resolve "${keys[@]}"
for key in "${keys[@]}"; do
  prepare "$key"
done

# Drop kernel dirs no flavour points at any more (older package versions).
for d in "$CACHE"/kernels/*/; do
  [ -d "$d" ] || continue
  b="$(basename "$d")"
  used=0
  for key in "${!META[@]}"; do
    [ "$(readlink "$CACHE/$key" 2>/dev/null)" = "kernels/$b" ] && used=1
  done
  if [ "$used" -eq 0 ]; then
    log "removing stale $d"
    rm -rf "$d"
  fi
done
