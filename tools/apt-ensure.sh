#!/usr/bin/env bash
# Installs the given Debian packages that are missing (apt-get update only
# when something is). Shared by the project's set-up scripts; run as root.
#   tools/apt-ensure.sh CALLER PKG...
set -euo pipefail
caller="$1"; shift
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "$caller: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
