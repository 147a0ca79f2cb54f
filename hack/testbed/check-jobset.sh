#!/usr/bin/env bash
# Checks, on a running testbed (make dev-up), that each worker runs JobSets as a real cluster does.
# On every worker, in namespace jobset-check, hack/testbed/sample-jobset.yaml ("driver": one Job of one
# pod, "workers": one Job of two pods):
#   - is defaulted by JobSet's mutating webhook (success and startup policy, network, completionMode,
#     restartPolicy), and a variant that only the validating webhook can refuse is refused;
#   - runs its three pods on the worker's kwok nodes, where they succeed, and reaches Completed;
#   - once deleted, leaves none of its Jobs, pods or its headless Service behind.
# Then it prints the resident memory of each worker's JobSet controller.
#
# Usage: hack/testbed/check-jobset.sh [WORKER_NUMBER...]   (default: 1 2)
# Environment:
#   GANTRY_DEV_DIR        testbed directory, as for hack/dev-up.sh (default .dev)
#   GANTRY_CHECK_TIMEOUT  seconds to wait for each step (default 120)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEV=$(realpath -m "${GANTRY_DEV_DIR:-${ROOT}/.dev}")
TIMEOUT="${GANTRY_CHECK_TIMEOUT:-120}"
SAMPLE="${ROOT}/hack/testbed/sample-jobset.yaml"
NS=jobset-check
NAME=sample-jobset
SELECTOR="jobset.sigs.k8s.io/jobset-name=${NAME}"

log() { echo "check-jobset: $*" >&2; }
die() { echo "check-jobset: FAIL: $*" >&2; exit 1; }

[[ -f "${DEV}/bin-dir" ]] || die "no testbed in ${DEV} (make dev-up starts one)"
BIN=$(cat "${DEV}/bin-dir")
[[ -x "${BIN}/kubectl" ]] || die "no kubectl in ${BIN}"
export KUBECACHEDIR="${DEV}/kube-cache"
WORKERS=("$@")
((${#WORKERS[@]} > 0)) || WORKERS=(1 2)
for n in "${WORKERS[@]}"; do
  [[ -f "${DEV}/worker-${n}.kubeconfig" ]] || die "no worker-${n} in ${DEV}"
done
kworker() { local n=$1; shift; "${BIN}/kubectl" --kubeconfig "${DEV}/worker-${n}.kubeconfig" "$@"; }

# until_empty N WHAT KUBECTL_ARGS...: waits (bounded) until `kubectl get ARGS -o name` lists nothing.
until_empty() {
  local n=$1 what=$2 deadline=$((SECONDS + TIMEOUT)) left
  shift 2
  while :; do
    left=$(kworker "${n}" get "$@" -o name 2>&1) || die "worker-${n}: kubectl get $*: ${left}"
    [[ -z "${left}" ]] && return 0
    ((SECONDS < deadline)) || die "worker-${n}: ${what} still there after ${TIMEOUT}s: $(echo "${left}" | tr '\n' ' ')"
    sleep 1
  done
}

# expect N WHAT WANT GOT
expect() {
  [[ "$4" == "$3" ]] || die "worker-$1: $2: want '$3', got '$4'"
}

for n in "${WORKERS[@]}"; do
  kworker "${n}" create namespace "${NS}" --dry-run=client -o yaml | kworker "${n}" apply -f - >/dev/null
  # A JobSet left by an interrupted run.
  kworker "${n}" delete jobset "${NAME}" -n "${NS}" --ignore-not-found --wait=true --timeout="${TIMEOUT}s" >/dev/null
  until_empty "${n}" "an earlier run's Jobs and pods" jobs,pods -n "${NS}" -l "${SELECTOR}"

  # Validation: the success policy names a replicatedJob that does not exist, which the CRD's schema
  # allows and JobSet's validating webhook does not.
  out=$(sed 's/^spec:$/spec:\n  successPolicy:\n    operator: All\n    targetReplicatedJobs: [no-such-job]/' "${SAMPLE}" \
    | kworker "${n}" create -n "${NS}" --dry-run=server -f - -o name 2>&1) \
    && die "worker-${n}: a JobSet whose success policy names no-such-job was accepted (${out})"
  [[ "${out}" == *'admission webhook "vjobset.kb.io" denied the request'*"no-such-job"* ]] \
    || die "worker-${n}: the invalid JobSet was refused, but not by JobSet's validating webhook: ${out}"
  log "worker-${n}: the validating webhook refuses an invalid JobSet"

  kworker "${n}" create -n "${NS}" -f "${SAMPLE}" >/dev/null
done

for n in "${WORKERS[@]}"; do
  # Defaults, as JobSet's mutating webhook sets them on a real cluster.
  got=$(kworker "${n}" get jobset "${NAME}" -n "${NS}" -o jsonpath='{.spec.successPolicy.operator} {.spec.startupPolicy.startupPolicyOrder} {.spec.network.enableDNSHostnames} {.spec.replicatedJobs[*].template.spec.completionMode} {.spec.replicatedJobs[*].template.spec.template.spec.restartPolicy}')
  expect "${n}" "defaults (successPolicy startupPolicy enableDNSHostnames completionMode x2 restartPolicy x2)" \
    "All AnyOrder true Indexed Indexed OnFailure OnFailure" "${got}"
  log "worker-${n}: the JobSet was defaulted by the mutating webhook: ${got}"

  if ! kworker "${n}" wait jobset "${NAME}" -n "${NS}" --for=condition=Completed --timeout="${TIMEOUT}s" >/dev/null; then
    kworker "${n}" get jobset,jobs,pods -n "${NS}" -o wide >&2 || true
    tail -n 20 "${DEV}/logs/jobset-controller-${n}.log" >&2 || true
    die "worker-${n}: JobSet ${NAME} is not Completed after ${TIMEOUT}s"
  fi
  IFS='|' read -r created completed < <(kworker "${n}" get jobset "${NAME}" -n "${NS}" \
    -o jsonpath='{.metadata.creationTimestamp}|{.status.conditions[?(@.type=="Completed")].lastTransitionTime}{"\n"}')
  log "worker-${n}: JobSet ${NAME} Completed $(($(date -d "${completed}" +%s) - $(date -d "${created}" +%s)))s after its creation"

  got=$(kworker "${n}" get jobs -n "${NS}" -l "${SELECTOR}" --sort-by=.metadata.name \
    -o jsonpath='{range .items[*]}{.metadata.name}={.status.succeeded} {end}')
  expect "${n}" "Jobs and their succeeded pods" "${NAME}-driver-0=1 ${NAME}-workers-0=2 " "${got}"

  kwok_nodes=" $(kworker "${n}" get nodes -l type=kwok -o jsonpath='{.items[*].metadata.name}') "
  pods=$(kworker "${n}" get pods -n "${NS}" -l "${SELECTOR}" --sort-by=.metadata.name \
    -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase}{"\n"}{end}')
  count=0
  while read -r pod node phase; do
    [[ -n "${pod}" ]] || continue
    count=$((count + 1))
    [[ "${kwok_nodes}" == *" ${node} "* ]] || die "worker-${n}: pod ${pod} ran on '${node}', not on a kwok node"
    expect "${n}" "phase of pod ${pod}" Succeeded "${phase}"
    log "worker-${n}: pod ${pod} Succeeded on kwok node ${node}"
  done <<<"${pods}"
  expect "${n}" "number of pods" 3 "${count}"
  kworker "${n}" get service "${NAME}" -n "${NS}" -o name >/dev/null \
    || die "worker-${n}: JobSet ${NAME} has no headless Service ${NAME}"
done

for n in "${WORKERS[@]}"; do
  kworker "${n}" delete jobset "${NAME}" -n "${NS}" --wait=true --timeout="${TIMEOUT}s" >/dev/null
done
for n in "${WORKERS[@]}"; do
  # The garbage collector removes the Jobs and the Service; the Jobs take their pods with them.
  until_empty "${n}" "Jobs and pods of the deleted JobSet" jobs,pods -n "${NS}" -l "${SELECTOR}"
  until_empty "${n}" "the deleted JobSet's Service" services -n "${NS}" --field-selector "metadata.name=${NAME}"
  log "worker-${n}: deleting the JobSet removed its Jobs, pods and Service"
done

for n in "${WORKERS[@]}"; do
  pid=$(cat "${DEV}/pids/jobset-controller-${n}.pid" 2>/dev/null) || die "no pid file for jobset-controller-${n}"
  rss=$(awk '$1 == "VmRSS:" { printf "%d MiB", $2 / 1024 }' "/proc/${pid}/status" 2>/dev/null) \
    || die "jobset-controller-${n} (pid ${pid}) is not running"
  log "worker-${n}: jobset-controller-${n} resident memory ${rss}"
done
echo "check-jobset: OK (workers: ${WORKERS[*]})"
