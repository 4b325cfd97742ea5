#!/usr/bin/env bash
# Sets up a Debian 12 machine to build and test cordon, then builds it.
# Idempotent; run as root. Installs exactly the Debian packages listed here
# (apt-get update runs once, and only when something is missing). Nothing is
# downloaded at build time.
#
#   ./setup.sh            install packages, build into ./build
#   ./setup.sh --deps     install packages only
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(
  build-essential cmake pkg-config      # C++20 toolchain (g++ 12) and build
  clang llvm libclang-rt-14-dev         # clang -target bpf; libFuzzer runtime
  bpftool libbpf-dev libelf-dev zlib1g-dev  # skeletons, libbpf
  protobuf-compiler libprotobuf-dev     # policy and event schemas
  libyaml-dev                           # policy files, agent config
  libnl-3-dev                           # sock_diag (retroactive attach)
  libssl-dev                            # SHA-256 of the audit file's hash chain (libcrypto); the remote syslog sink's TLS (libssl)
  libidn2-dev libunistring-dev          # egress host names: U-labels to A-labels (IDNA2008; unistring for static builds)
  libldns-dev                           # cordon's DNS resolver: parses and builds DNS messages
  dnsmasq-base                          # the resolver's tests: a real upstream DNS server in a test namespace
  libgtest-dev                          # tests
  python3 util-linux iproute2 git       # tests and examples (python3, setpriv, ip, git)
  man-db groff-base                     # the generated man pages are rendered by the docs test
  python3-jwt python3-cryptography      # an independent verifier of the built-in issuer's tokens
  mmdebstrap                            # the package test's fresh Debian root (tests/package)
  python3-pip                           # cordon learn's test: pip installing from a local index
  chromium                              # cordon report's HTML page, rendered by a real browser (headless)
  rsyslog rsyslog-openssl               # the remote syslog sink's tests: a real collector (imtcp, TLS by ossl) on loopback
)

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (it installs Debian packages)" >&2
  exit 1
fi

tools/apt-ensure.sh setup.sh "${PACKAGES[@]}"

[ "${1:-}" = "--deps" ] && exit 0

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCORDON_WERROR="${CORDON_WERROR:-OFF}" >/dev/null
cmake --build build -j"$(nproc)"
echo "setup.sh: built build/cordon"
