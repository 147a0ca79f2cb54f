#!/usr/bin/env bash
# Prints the path of a headless-capable Chromium for the browser tests of the hub's page, installing
# Debian's chromium package when there is none (as root, or through sudo). GANTRY_CHROMIUM overrides.
set -euo pipefail

if [[ -n "${GANTRY_CHROMIUM:-}" ]]; then
  [[ -x "${GANTRY_CHROMIUM}" ]] || { echo "install-chromium: GANTRY_CHROMIUM=${GANTRY_CHROMIUM} is not executable" >&2; exit 1; }
  echo "${GANTRY_CHROMIUM}"
  exit 0
fi
for candidate in chromium chromium-browser; do
  if path=$(command -v "${candidate}"); then
    echo "${path}"
    exit 0
  fi
done

sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "install-chromium: no chromium, and neither root nor sudo to install Debian's package; install chromium or set GANTRY_CHROMIUM" >&2; exit 1; }
  sudo=(sudo -n)
fi
echo "install-chromium: installing Debian's chromium package" >&2
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y --no-install-recommends chromium >/dev/null 2>&1; then
  "${sudo[@]}" apt-get update >/dev/null
  "${sudo[@]}" apt-get install -y --no-install-recommends chromium >/dev/null
fi
command -v chromium
