#!/usr/bin/env bash
# Tears down the local testbed made by hack/dev-up.sh: stops the processes it started
# (gantry-hub, the agents, the workers' JobSet controllers and KubeRay operators: every
# pid file in pids/), deletes the three kwok clusters and removes .dev/ (or
# GANTRY_DEV_DIR, the same directory hack/dev-up.sh used).
#
# Usage: hack/dev-down.sh   (make dev-down)
# Safe after a dev-up that failed halfway, and when nothing is up at all. Never
# builds anything: it uses the kwokctl that dev-up recorded, and otherwise stops
# the cluster components by the pid files kwokctl keeps.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEV=$(realpath -m "${GANTRY_DEV_DIR:-${ROOT}/.dev}")

log() { echo "dev-down: $*" >&2; }

if [[ ! -d "${DEV}" ]]; then
  log "nothing to do (${DEV} does not exist)"
  exit 0
fi
# dev-up writes .gitignore first; without it this is not a testbed and is left alone.
if [[ ! -f "${DEV}/.gitignore" ]]; then
  log "ERROR: ${DEV} is not a testbed directory (no .gitignore written by dev-up); not touching it"
  exit 1
fi

# Stops the process whose pid is in $1: TERM, up to 10s grace, then KILL. Only if
# its command line mentions the testbed directory, so a recycled pid never hits a stranger.
stop_pidfile() {
  local pidfile=$1 pid
  pid=$(cat "${pidfile}" 2>/dev/null) || return 0
  if [[ "${pid}" =~ ^[0-9]+$ ]] && kill -0 "${pid}" 2>/dev/null \
     && tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -qF "${DEV}/"; then
    kill "${pid}" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.2; done
    kill -9 "${pid}" 2>/dev/null || true
  fi
  rm -f "${pidfile}"
}

# 1. Processes first, so they do not log errors about vanishing clusters.
shopt -s nullglob
for pidfile in "${DEV}"/pids/*.pid; do
  log "stopping $(basename "${pidfile}" .pid)"
  stop_pidfile "${pidfile}"
done

# 2. Clusters: kwokctl delete stops their components and removes their workdirs.
export KWOK_WORKDIR="${DEV}/kwok"
KWOKCTL=""
if [[ -f "${DEV}/bin-dir" && -x "$(cat "${DEV}/bin-dir")/kwokctl" ]]; then
  KWOKCTL="$(cat "${DEV}/bin-dir")/kwokctl"
fi
for dir in "${KWOK_WORKDIR}"/clusters/*/; do
  name=$(basename "${dir}")
  log "deleting cluster ${name}"
  if [[ -n "${KWOKCTL}" ]]; then
    # --kubeconfig: only our scratch file, never the user's default kubeconfig.
    "${KWOKCTL}" delete cluster --name "${name}" --kubeconfig "${DEV}/kwokctl.kubeconfig" \
      >>"${DEV}/logs/kwokctl.log" 2>&1 || log "kwokctl delete cluster ${name} failed; stopping its processes directly"
  fi
  # Whatever kwokctl could not stop (or no kwokctl at all).
  for pidfile in "${dir}"pids/*.pid; do
    stop_pidfile "${pidfile}"
  done
done

rm -rf "${DEV}"
log "done"
