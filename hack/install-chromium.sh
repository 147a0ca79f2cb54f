#!/usr/bin/env bash
# Prints the path of a headless-capable Chromium for the browser tests of the hub's page, installing
# Debian's chromium package when there is none (hack/install-debian.sh). GANTRY_CHROMIUM overrides.
set -euo pipefail

if [[ -n "${GANTRY_CHROMIUM:-}" ]]; then
  [[ -x "${GANTRY_CHROMIUM}" ]] || { echo "install-chromium: GANTRY_CHROMIUM=${GANTRY_CHROMIUM} is not executable" >&2; exit 1; }
  echo "${GANTRY_CHROMIUM}"
  exit 0
fi
if path=$(command -v chromium-browser); then
  echo "${path}"
  exit 0
fi
exec "$(dirname "$0")/install-debian.sh" chromium
