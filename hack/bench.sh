#!/usr/bin/env bash
# Dispatch benchmark on the kwok testbed: throughput and latency of a burst of one-pod Jobs, latency of
# single Jobs on the idle testbed, and mutating API requests per job on the hub and each worker
# (test/e2e/bench). Prints a table next to the targets, and the headline figures against the last
# recorded run (test/e2e/bench/recorded.json), flagging those that moved the bad way beyond run-to-run
# noise; the exit status does not depend on that comparison.
#
# Usage: hack/bench.sh [bench flags]   (make bench; `go run ./test/e2e/bench -h` lists the flags)
# By default it brings up a testbed of its own in .dev-bench/ (a developer's .dev/ testbed is left
# alone), runs the benchmark and tears that testbed down, also when the benchmark fails.
#
# Environment:
#   BENCH_JOBS     jobs in the burst (default 300)
#   BENCH_POD_RUNTIME  how long each burst pod runs (default 30s; 1s adds the pods' completion to the burst)
#   BENCH_TESTBED  directory of an already running testbed to use instead (e.g. .dev after make dev-up);
#                  it is left running, and the benchmark removes only its own Jobs and namespaces
#   BENCH_DIR      directory of the benchmark's own testbed (default .dev-bench)
#   BENCH_PORT     first of sixteen loopback ports for its Gantry processes and JobSet controllers
#                  (default: free ports from 18280)
#   BENCH_KEEP     when set, the benchmark's own testbed is left running
#   BENCH_RECORD   file to write this run's headline figures to as JSON, with the commit (git rev-parse
#                  --short HEAD) and today's date; BENCH_RECORD=test/e2e/bench/recorded.json make bench,
#                  then committing that file, makes this run the one later runs compare with
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Resolved before the cd below, so that a relative path is relative to where the script was started.
RECORD=""
if [[ -n "${BENCH_RECORD:-}" ]]; then RECORD=$(realpath -m "${BENCH_RECORD}"); fi
cd "${ROOT}"

log() { echo "bench: $*" >&2; }
die() { echo "bench: ERROR: $*" >&2; exit 1; }

# Checked before the testbed comes up, not after a run of minutes.
if [[ -n "${RECORD}" && ! -d "$(dirname "${RECORD}")" ]]; then
  die "BENCH_RECORD=${BENCH_RECORD}: no directory $(dirname "${RECORD}")"
fi

# First port from $1 on, in steps of ten, with the sixteen consecutive free loopback ports that
# hack/dev-up.sh takes (bounded search).
free_port_base() {
  local base p busy
  for ((base = $1; base < $1 + 500; base += 10)); do
    busy=0
    for ((p = base; p < base + 16; p++)); do
      if (exec 3<>"/dev/tcp/127.0.0.1/${p}") 2>/dev/null; then busy=1; break; fi
    done
    ((busy)) || { echo "${base}"; return 0; }
  done
  return 1
}

# Copies the Gantry processes' logs out of the testbed directory, which teardown removes.
save_logs() {
  local dst
  dst=$(mktemp -d "${TMPDIR:-/tmp}/gantry-bench-logs-XXXXXX") || return 0
  cp "${DIR}"/logs/*.log "${dst}/" 2>/dev/null || true
  log "testbed logs saved in ${dst}"
}

if [[ -n "${BENCH_TESTBED:-}" ]]; then
  DIR=$(realpath -m "${BENCH_TESTBED}")
  [[ -f "${DIR}/hub.kubeconfig" ]] || die "no running testbed in ${DIR} (hack/dev-up.sh starts one)"
  log "using the running testbed in ${DIR}"
else
  DIR=$(realpath -m "${BENCH_DIR:-${ROOT}/.dev-bench}")
  PORT="${BENCH_PORT:-$(free_port_base 18280)}" || die "no sixteen free consecutive loopback ports from 18280"
  # shellcheck disable=SC2317  # called by the EXIT trap
  down() {
    if [[ -n "${BENCH_KEEP:-}" ]]; then
      log "BENCH_KEEP is set; the testbed keeps running in ${DIR} (GANTRY_DEV_DIR=${DIR} hack/dev-down.sh removes it)"
      return
    fi
    log "tearing down the testbed in ${DIR}"
    GANTRY_DEV_DIR="${DIR}" "${ROOT}/hack/dev-down.sh" >/dev/null 2>&1 || log "teardown failed; run GANTRY_DEV_DIR=${DIR} hack/dev-down.sh"
  }
  # Leftovers of an earlier run that could not tear down.
  GANTRY_DEV_DIR="${DIR}" "${ROOT}/hack/dev-down.sh" >/dev/null 2>&1 || die "cannot remove the earlier testbed in ${DIR}"
  trap down EXIT
  trap 'exit 130' INT TERM
  log "bringing up a testbed in ${DIR} (Gantry ports from ${PORT})"
  if ! GANTRY_DEV_DIR="${DIR}" GANTRY_DEV_PORT="${PORT}" "${ROOT}/hack/dev-up.sh" >/dev/null; then
    save_logs
    die "hack/dev-up.sh failed"
  fi
fi

args=(-dir "${DIR}" -commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)")
if [[ -n "${RECORD}" ]]; then args+=(-record "${RECORD}"); fi
rc=0
go run ./test/e2e/bench "${args[@]}" "$@" || rc=$?
if ((rc != 0)) && [[ -z "${BENCH_TESTBED:-}" ]]; then
  save_logs
fi
exit "${rc}"
