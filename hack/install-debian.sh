#!/usr/bin/env bash
# Prints the path of PROGRAM, installing Debian's PACKAGE (default: PROGRAM) when it is not on PATH,
# as root or through sudo. Used for what the tests run that only Debian packages: chromium, runc.
#
# Usage: hack/install-debian.sh PROGRAM [PACKAGE]
set -euo pipefail

program=${1:?usage: hack/install-debian.sh PROGRAM [PACKAGE]}
package=${2:-${program}}
if path=$(command -v "${program}"); then
  echo "${path}"
  exit 0
fi

sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "install-debian: no ${program}, and neither root nor sudo to install Debian's ${package}; install it" >&2; exit 1; }
  sudo=(sudo -n)
fi
echo "install-debian: installing Debian's ${package} package" >&2
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y --no-install-recommends "${package}" >/dev/null 2>&1; then
  "${sudo[@]}" apt-get update >/dev/null
  "${sudo[@]}" apt-get install -y --no-install-recommends "${package}" >/dev/null
fi
command -v "${program}"
