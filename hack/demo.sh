#!/usr/bin/env bash
# Demo: brings the testbed up (hack/dev-up.sh), submits the sample GPU Jobs in
# hack/testbed/sample-jobs.yaml to the hub, waits for them to finish and shows
# which worker each one ran on.
#
# Usage: hack/demo.sh   (make demo)
#   GANTRY_DEMO_TIMEOUT  seconds to wait for all jobs to finish (default 300)
#   GANTRY_DEV_DIR       testbed directory, as for hack/dev-up.sh (default .dev)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEV=$(realpath -m "${GANTRY_DEV_DIR:-${ROOT}/.dev}")
JOBS_FILE="${ROOT}/hack/testbed/sample-jobs.yaml"
TIMEOUT="${GANTRY_DEMO_TIMEOUT:-300}"

log() { echo "demo: $*" >&2; }
die() { echo "demo: ERROR: $*" >&2; exit 1; }

"${ROOT}/hack/dev-up.sh"

BIN=$(cat "${DEV}/bin-dir")
export KUBECACHEDIR="${DEV}/kube-cache"
khub() { "${BIN}/kubectl" --kubeconfig "${DEV}/hub.kubeconfig" "$@"; }

# A fresh run each time: remove the jobs of an earlier demo first.
khub delete -f "${JOBS_FILE}" --ignore-not-found --wait=true --timeout=60s >/dev/null \
  || die "could not delete the previous demo's jobs"
khub create -f "${JOBS_FILE}" >/dev/null
mapfile -t JOBS < <(khub get -f "${JOBS_FILE}" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
log "submitted ${#JOBS[@]} jobs: ${JOBS[*]}"

# condition JOB TYPE -> "True", "False" or ""
condition() {
  khub get job "$1" -n default -o jsonpath="{.status.conditions[?(@.type==\"$2\")].status}" 2>/dev/null || true
}

deadline=$((SECONDS + TIMEOUT))
declare -A RESULT=()
while ((${#RESULT[@]} < ${#JOBS[@]})); do
  for job in "${JOBS[@]}"; do
    [[ -n "${RESULT[${job}]:-}" ]] && continue
    if [[ "$(condition "${job}" Complete)" == True ]]; then
      RESULT[${job}]=Complete
      log "${job} completed"
    elif [[ "$(condition "${job}" Failed)" == True ]]; then
      RESULT[${job}]=Failed
      log "${job} failed"
    fi
  done
  ((${#RESULT[@]} < ${#JOBS[@]})) || break
  if ((SECONDS >= deadline)); then
    log "timed out after ${TIMEOUT}s; hub workloads:"
    khub get workloads.gantry.dev -n default -o wide >&2 || true
    break
  fi
  sleep 2
done

echo
printf '%-20s %-10s %-24s %-10s %-10s %s\n' JOB WORKER GPU RESULT SUCCEEDED DURATION
failed=0
for job in "${JOBS[@]}"; do
  worker="" gpu=""
  IFS='|' read -r worker gpu < <(khub get workloads.gantry.dev -n default -l "gantry.dev/job-name=${job}" \
    -o jsonpath='{.items[0].status.clusterName}|{.items[0].status.admission.podSets[0].gpuProduct}{"\n"}' \
    2>/dev/null) || true
  succeeded="" completions="" start="" end=""
  IFS='|' read -r succeeded completions start end < <(khub get job "${job}" -n default \
    -o jsonpath='{.status.succeeded}|{.spec.completions}|{.status.startTime}|{.status.completionTime}{"\n"}' \
    2>/dev/null) || true
  duration="-"
  if [[ -n "${start}" && -n "${end}" ]]; then
    duration="$(($(date -d "${end}" +%s) - $(date -d "${start}" +%s)))s"
  fi
  result=${RESULT[${job}]:-Unfinished}
  [[ "${result}" == Complete ]] || failed=1
  printf '%-20s %-10s %-24s %-10s %-10s %s\n' "${job}" "${worker:--}" "${gpu:--}" "${result}" \
    "${succeeded:-0}/${completions:-?}" "${duration}"
done
((failed == 0)) || die "not every demo job completed"
