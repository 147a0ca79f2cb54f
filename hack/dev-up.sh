#!/usr/bin/env bash
# Local Gantry testbed without Docker: a hub and two worker clusters, each a real
# etcd + kube-apiserver + controller-manager (+ scheduler + kwok on workers) run by
# `kwokctl --runtime binary`, with fake GPU nodes, CRDs, a least-privilege hub
# identity on each worker, and gantry-hub / gantry-agent running as local processes.
# Each worker also runs the JobSet controller (sigs.k8s.io/jobset) with its admission
# webhooks (section 4), the KubeRay operator (github.com/ray-project/kuberay/ray-operator)
# without webhooks (section 5) and the Kubeflow trainer (github.com/kubeflow/trainer/v2) with its
# webhooks (section 6); the hub has their CRDs only (and the trainer's runtime).
#
# Usage: hack/dev-up.sh [--no-gantry]   (make dev-up)
#        hack/dev-down.sh                 (make dev-down) tears it all down.
#   --no-gantry  clusters, nodes, CRDs (if generated), JobSet, KubeRay, the trainer and hub access only: builds
#                and starts no Gantry process and creates no hub objects (for tests
#                that run the hub and agents themselves).
# Everything lives under .dev/ in the repo root (or GANTRY_DEV_DIR); the user's
# ~/.kube/config is never touched. Re-running keeps the clusters and rebuilds/restarts
# the Gantry processes. Testbeds in different directories run side by side: the
# clusters take free loopback ports, and GANTRY_DEV_PORT separates the Gantry processes.
#
# Environment:
#   GANTRY_CACHE        tool cache (see hack/install-tools.sh)
#   GANTRY_DEV_DIR      directory of this testbed (default .dev in the repo root)
#   GANTRY_DEV_PORT     first of 26 loopback ports (default 18080): metrics and health of the hub
#                       and agents on +0 to +5, the hub's endpoint (kubectl gantry logs, the page) on +9,
#                       the JobSet controllers' webhook, metrics and health on +10 to +12 (worker-1)
#                       and +13 to +15 (worker-2), the KubeRay operators' metrics and health on +16
#                       and +17 (worker-1) and +18 and +19 (worker-2), the trainers' webhook, metrics
#                       and health on +20 to +22 (worker-1) and +23 to +25 (worker-2)
#   GANTRY_PPROF        set: the hub and agents serve /debug/pprof on GANTRY_DEV_PORT+6, +7, +8
#   GANTRY_DEV_TIMEOUT  seconds to wait for each readiness step (default 120)
#   GANTRY_AGENT_FLAGS  extra flags for both gantry-agents, e.g. "--placement-timeout=30s"
#   GANTRY_HUB_FLAGS    extra flags for gantry-hub, e.g. "--leader-elect-lease-duration=8s"
#   GANTRY_AUDIT        set: each API server writes an audit log of writes to Gantry's kinds
#                       (hack/testbed/audit-policy.yaml) to kwok/clusters/NAME/logs/audit.log
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
DEV=$(realpath -m "${GANTRY_DEV_DIR:-${ROOT}/.dev}")
TESTBED="${ROOT}/hack/testbed"
PORT_BASE="${GANTRY_DEV_PORT:-18080}"
TIMEOUT="${GANTRY_DEV_TIMEOUT:-120}"
WORKERS=(1 2)
declare -A GPU_PRODUCT=([1]=NVIDIA-A100-SXM4-80GB [2]=NVIDIA-H100-80GB-HBM3)
declare -A NODE_PREFIX=([1]=w1-a100 [2]=w2-h100)
NODES_PER_WORKER=4
# worker-2 serves the Workload API's PodGroups (beta in 1.37, off by default) and its scheduler binds a
# gang all or none, in one topology domain when asked (alpha); worker-1 binds pods one by one.
declare -A WORKER_GATES=([1]="" [2]="GenericWorkload=true,TopologyAwareWorkloadScheduling=true")
declare -A WORKER_RUNTIME_CONFIG=([1]="" [2]="scheduling.k8s.io/v1beta1=true")

log() { echo "dev-up: $*" >&2; }
die() { echo "dev-up: ERROR: $*" >&2; exit 1; }

GANTRY=1
case "${1:-}" in
  "") ;;
  --no-gantry) GANTRY=0 ;;
  *) die "unknown argument: $1 (usage: hack/dev-up.sh [--no-gantry])" ;;
esac

command -v curl >/dev/null || die "curl is required (apt-get install curl)"
trap 'rc=$?; ((rc == 0)) || echo "dev-up: failed; hack/dev-down.sh removes whatever was started" >&2' EXIT

# --- 1. tools and Gantry binaries --------------------------------------------
log "ensuring testbed tools (a cold first run builds them: 11-19 min on 2 cores)"
BIN=$("${ROOT}/hack/install-tools.sh" | tail -n1)
[[ -x "${BIN}/kwokctl" ]] || die "hack/install-tools.sh did not produce ${BIN}/kwokctl"
[[ -x "${BIN}/jobset-controller-manager" && -d "${BIN}/jobset" ]] \
  || die "hack/install-tools.sh did not produce ${BIN}/jobset-controller-manager and ${BIN}/jobset/"
[[ -x "${BIN}/kuberay-operator" && -d "${BIN}/kuberay/crd" ]] \
  || die "hack/install-tools.sh did not produce ${BIN}/kuberay-operator and ${BIN}/kuberay/crd/"
[[ -x "${BIN}/trainer-controller-manager" && -d "${BIN}/trainer/crd" && -d "${BIN}/trainer/webhook" ]] \
  || die "hack/install-tools.sh did not produce ${BIN}/trainer-controller-manager and ${BIN}/trainer/"

mkdir -p "${DEV}/logs" "${DEV}/pids" "${DEV}/kwok" "${DEV}/jobset" "${DEV}/trainer"
printf '*\n' > "${DEV}/.gitignore"   # keep .dev/ out of git even without a root entry
echo "${BIN}" > "${DEV}/bin-dir"     # lets dev-down find kwokctl without building

if ((GANTRY)); then
  for cmd in gantry-hub gantry-agent; do
    [[ -d "${ROOT}/cmd/${cmd}" ]] || die "cmd/${cmd} does not exist yet; cannot build Gantry"
  done
  log "building bin/gantry-hub and bin/gantry-agent"
  go build -o "${ROOT}/bin/" ./cmd/gantry-hub ./cmd/gantry-agent || die "go build of Gantry failed"
fi

export KWOK_WORKDIR="${DEV}/kwok"
# kubectl's caches (ours and the one kwokctl runs) stay under .dev too.
export KUBECACHEDIR="${DEV}/kube-cache"
KUBECTL="${BIN}/kubectl"
# Always an explicit kubeconfig, never the user's default one.
kc() { local cfg=$1; shift; "${KUBECTL}" --kubeconfig "${cfg}" "$@"; }
khub() { kc "${DEV}/hub.kubeconfig" "$@"; }
kworker() { local n=$1; shift; kc "${DEV}/worker-${n}.kubeconfig" "$@"; }

# Stops the process in a pid file: TERM, up to 10s grace, then KILL. Only if its
# command line mentions the testbed directory, so a recycled pid never hits a stranger.
stop_process() {
  local pidfile=$1 pid
  [[ -f "${pidfile}" ]] || return 0
  pid=$(cat "${pidfile}")
  if [[ "${pid}" =~ ^[0-9]+$ ]] && kill -0 "${pid}" 2>/dev/null \
     && tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -qF "${DEV}/"; then
    kill "${pid}" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.2; done
    kill -9 "${pid}" 2>/dev/null || true
  fi
  rm -f "${pidfile}"
}

# launch NAME HEALTH_PORT CMD...: runs CMD in the background, logging to logs/NAME.log, with its pid in
# pids/NAME.pid and the port of its /healthz and /readyz (which CMD's own flags set) for wait_healthy.
launch() {
  local name=$1 hport=$2
  shift 2
  stop_process "${DEV}/pids/${name}.pid"
  echo "=== $(date -u +%FT%TZ) $*" >>"${DEV}/logs/${name}.log"
  # setsid: detached from the calling terminal, so a Ctrl-C there does not reach it.
  setsid "$@" >>"${DEV}/logs/${name}.log" 2>&1 </dev/null &
  echo $! > "${DEV}/pids/${name}.pid"
  echo "${hport}" > "${DEV}/pids/${name}.health-port"
}

# start_process NAME METRICS_PORT HEALTH_PORT CMD...   (CMD takes --metrics-bind-address and
# --health-probe-bind-address, as Gantry's programs and the JobSet controller do)
start_process() {
  local name=$1 mport=$2 hport=$3
  shift 3
  launch "${name}" "${hport}" "$@" \
    --metrics-bind-address "127.0.0.1:${mport}" \
    --health-probe-bind-address "127.0.0.1:${hport}"
}

# Waits (bounded) until NAME answers /healthz and /readyz.
wait_healthy() {
  local name=$1 port pid deadline=$((SECONDS + TIMEOUT))
  port=$(cat "${DEV}/pids/${name}.health-port")
  pid=$(cat "${DEV}/pids/${name}.pid")
  until curl -fsS "http://127.0.0.1:${port}/healthz" >/dev/null 2>&1 \
     && curl -fsS "http://127.0.0.1:${port}/readyz" >/dev/null 2>&1; do
    if ! kill -0 "${pid}" 2>/dev/null; then
      tail -n 30 "${DEV}/logs/${name}.log" >&2 || true
      die "${name} exited; see ${DEV}/logs/${name}.log"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 30 "${DEV}/logs/${name}.log" >&2 || true
      die "${name} not healthy on 127.0.0.1:${port} after ${TIMEOUT}s; see ${DEV}/logs/${name}.log"
    fi
    sleep 1
  done
}

# The summary goes to stdout; progress goes to stderr.
print_summary() {
  cat <<EOF

Gantry testbed is up.
  hub:       ${DEV}/hub.kubeconfig
  worker-1:  ${DEV}/worker-1.kubeconfig  (etcd $(cat "${DEV}/worker-1.etcd"), ${NODES_PER_WORKER} nodes x 8 ${GPU_PRODUCT[1]})
  worker-2:  ${DEV}/worker-2.kubeconfig  (etcd $(cat "${DEV}/worker-2.etcd"), ${NODES_PER_WORKER} nodes x 8 ${GPU_PRODUCT[2]};
             serves PodGroups: its scheduler binds a gang all or none)
  logs:      ${DEV}/logs/
  JobSet:    the controller and its webhooks on each worker (logs/jobset-controller-N.log); the hub has the CRD only
  KubeRay:   the operator on each worker, no webhooks (logs/kuberay-operator-N.log); the hub has the CRDs only
  trainer:   the controller and its webhooks on each worker (logs/trainer-controller-N.log); the hub has the
             CRDs; hub and workers have the runtime torch-distributed (hack/testbed/trainer-runtime.yaml)
  endpoint:  http://127.0.0.1:$((PORT_BASE + 9))  (the live page: log in with a token; kubectl gantry logs JOB, pods' logs from ${DEV}/job-logs.log)
  kubectl:   ${KUBECTL}

  export KUBECONFIG=${DEV}/hub.kubeconfig PATH=${BIN}:\$PATH

Submit a job to the hub: a batch/v1 Job in namespace default labelled
gantry.dev/queue-name: default (examples: hack/testbed/sample-jobs.yaml), e.g.
  kubectl apply -f hack/testbed/sample-jobs.yaml
  kubectl get workloads.gantry.dev -L gantry.dev/job-name
A RayJob goes the same way (KubeRay runs it on the worker; kwok's pods run no Ray, so it stays Running):
  kubectl apply -f hack/testbed/sample-rayjob.yaml
and so does a TrainJob (the trainer makes it a JobSet on the worker, which completes):
  kubectl apply -f hack/testbed/sample-trainjob.yaml
Tear down with: hack/dev-down.sh
EOF
}

# --- 2. clusters -------------------------------------------------------------
# kwokctl reads binaries, ports and stages from one config. bindAddress keeps
# etcd, the API server and the other components on loopback; the e2e tests read
# each worker's etcd under the pinned prefix.
KWOK_CONFIG="${DEV}/kwokctl-config.yaml"
{
  cat <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  runtime: binary
  bindAddress: 127.0.0.1
  etcdPrefix: /registry
  securePort: true
  kubeAuthorization: true
  kubeAdmission: true
  kubeApiserverBinary: ${BIN}/kube-apiserver
  kubeControllerManagerBinary: ${BIN}/kube-controller-manager
  kubeSchedulerBinary: ${BIN}/kube-scheduler
  kubectlBinary: ${BIN}/kubectl
  kwokControllerBinary: ${BIN}/kwok
  etcdBinary: ${BIN}/etcd
EOF
  if [[ -n "${GANTRY_AUDIT:-}" ]]; then
    echo "  kubeAuditPolicy: ${TESTBED}/audit-policy.yaml"
  fi
  echo "---"
  cat "${TESTBED}/stages.yaml"
} > "${KWOK_CONFIG}"
# The workers' kwok serves every container's log from one file (hack/testbed/cluster-logs.yaml); a test
# may append lines to the copy to see them followed.
LOGS_FILE="${DEV}/job-logs.log"
cp "${TESTBED}/job-logs.log" "${LOGS_FILE}"
KWOK_WORKER_CONFIG="${DEV}/kwokctl-worker-config.yaml"
{
  cat "${KWOK_CONFIG}"
  echo "---"
  sed -e "s|\${LOGS_FILE}|${LOGS_FILE}|g" "${TESTBED}/cluster-logs.yaml"
} > "${KWOK_WORKER_CONFIG}"

# create_cluster NAME KWOKCTL_CONFIG
create_cluster() {
  local name=$1 config=$2 start=${SECONDS}
  shift 2
  log "creating cluster ${name}"
  "${BIN}/kwokctl" create cluster --name "${name}" --runtime binary \
    --config "${config}" \
    --kubeconfig "${DEV}/kwokctl.kubeconfig" \
    --timeout "${TIMEOUT}s" --wait "${TIMEOUT}s" \
    "$@" >>"${DEV}/logs/kwokctl.log" 2>&1 \
    || die "kwokctl create cluster ${name} failed; see ${DEV}/logs/kwokctl.log"
  # kwokctl only logs a failed --wait; check readiness ourselves (bounded).
  local deadline=$((SECONDS + TIMEOUT))
  until "${KUBECTL}" --kubeconfig "${KWOK_WORKDIR}/clusters/${name}/kubeconfig.yaml" \
      get --raw /readyz >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "cluster ${name}'s API server is not ready; see ${KWOK_WORKDIR}/clusters/${name}/logs/"
    sleep 1
  done
  log "cluster ${name} up in $((SECONDS - start))s"
}

# Copies a cluster's admin kubeconfig with certificates embedded, so the copy
# has no file references into the kwok workdir.
export_kubeconfig() {
  local name=$1 out=$2
  "${KUBECTL}" --kubeconfig "${KWOK_WORKDIR}/clusters/${name}/kubeconfig.yaml" \
    config view --raw --flatten --minify > "${out}.tmp"
  mv "${out}.tmp" "${out}"
}

# The hub has no nodes: a Job submitted there has nowhere to run. Its scheduler and kwok controller are
# there for the e2e test that installs the chart, which adds a node for the pods of gantry-hub.
# The e2e tests watch each cluster's etcd directly: its client URL goes to DEV/NAME.etcd.
record_etcd_url() {
  local cluster=$1 out=$2 etcd_url
  etcd_url=$(grep -o -- '--listen-client-urls=[^" ]*' "${KWOK_WORKDIR}/clusters/${cluster}/kwok.yaml" \
    | head -n1 | cut -d= -f2) || true
  [[ "${etcd_url}" == http://127.0.0.1:* ]] || die "cannot find ${cluster}'s etcd client URL in its kwok.yaml"
  echo "${etcd_url}" > "${out}"
}

create_cluster gantry-hub "${KWOK_CONFIG}"
export_kubeconfig gantry-hub "${DEV}/hub.kubeconfig"
record_etcd_url gantry-hub "${DEV}/hub.etcd"
for n in "${WORKERS[@]}"; do
  create_cluster "gantry-worker-${n}" "${KWOK_WORKER_CONFIG}" \
    ${WORKER_GATES[$n]:+--kube-feature-gates "${WORKER_GATES[$n]}"} \
    ${WORKER_RUNTIME_CONFIG[$n]:+--kube-runtime-config "${WORKER_RUNTIME_CONFIG[$n]}"}
  export_kubeconfig "gantry-worker-${n}" "${DEV}/worker-${n}.kubeconfig"
  record_etcd_url "gantry-worker-${n}" "${DEV}/worker-${n}.etcd"
done

# --- 3. fake GPU nodes -------------------------------------------------------
for n in "${WORKERS[@]}"; do
  for ((i = 0; i < NODES_PER_WORKER; i++)); do
    sed -e "s/\${NODE_NAME}/${NODE_PREFIX[$n]}-${i}/g" -e "s/\${GPU_PRODUCT}/${GPU_PRODUCT[$n]}/g" \
      "${TESTBED}/gpu-node.yaml"
    echo "---"
  done > "${DEV}/worker-${n}-nodes.yaml"
  kworker "${n}" apply -f "${DEV}/worker-${n}-nodes.yaml" >/dev/null
done
for n in "${WORKERS[@]}"; do
  kworker "${n}" wait --for=condition=Ready node -l type=kwok --timeout="${TIMEOUT}s" >/dev/null \
    || die "worker-${n}'s kwok nodes did not become Ready"
done
log "fake GPU nodes ready"

# install_crd FILE KUBECTL_FUNCTION [N]: applies the CRD in FILE and waits (bounded) until it is
# Established (kubectl wait fails on a CRD that has no status yet). Server-side: these CRDs are too
# large for the last-applied annotation of a client-side apply.
install_crd() {
  local file=$1 crd deadline=$((SECONDS + TIMEOUT))
  shift
  crd=$("$@" apply --server-side --force-conflicts -f "${file}" -o name) || return 1
  # Before the CRD has conditions, kubectl's filter fails (noisily): that only means "not yet".
  until [[ "$("$@" get "${crd}" \
      -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" == True ]]; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# --- 4. JobSet -----------------------------------------------------------------
# The JobSet CRD of the sigs.k8s.io/jobset module goes on the hub and on every worker, before the hub's
# admission policies (section 7), which match JobSets. Only the workers run the JobSet controller:
# JobSets submitted to the hub are Gantry's to dispatch (spec.managedBy), and neither JobSet's controller
# nor its webhooks run there.
# On a worker the controller serves its admission webhooks (defaulting and validation of JobSets, and of
# their pods) on loopback. These API servers have no kube-proxy and no Service routing, so the webhook
# configurations, JobSet's own rendered from the module (hack/testbed/jobset-webhooks.awk), call
# https://127.0.0.1:PORT instead of a Service and trust a CA the testbed makes. The controller's own
# certificate management (a certificate for the Service's DNS name, kept in a Secret and in a fixed /tmp
# directory) is off; it serves the testbed's certificate instead.
JOBSET_CERTS="${DEV}/jobset/certs"
# jobset_port N I: worker N's webhook (I=0), metrics (1) and health (2) ports.
jobset_port() { echo $((PORT_BASE + 7 + 3 * $1 + $2)); }

# Makes, once per testbed, a CA and a serving certificate for 127.0.0.1 signed by it (ECDSA P-256).
jobset_certs() {
  [[ -s "${JOBSET_CERTS}/ca.crt" && -s "${JOBSET_CERTS}/tls.crt" && -s "${JOBSET_CERTS}/tls.key" ]] && return 0
  (cd "${ROOT}" && go run ./hack/testbed/webhookcerts -dir "${JOBSET_CERTS}") >>"${DEV}/logs/jobset-certs.log" 2>&1 \
    || die "making the JobSet webhook certificates failed; see ${DEV}/logs/jobset-certs.log"
}

# A minimal JobSet for server-side dry runs; with "invalid", one that only JobSet's validating webhook
# refuses (its success policy names a replicatedJob that does not exist).
jobset_probe() {
  local policy=""
  [[ "${1:-}" == invalid ]] && policy=$'  successPolicy:\n    operator: All\n    targetReplicatedJobs: [no-such-job]\n'
  cat <<EOF
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: testbed-webhook-probe
  namespace: default
spec:
${policy}  replicatedJobs:
  - name: probe
    template:
      spec:
        template:
          spec:
            containers:
            - name: probe
              image: registry.example/probe:1
EOF
}

# Waits (bounded) until worker N's API server calls both JobSet webhooks: a dry-run JobSet comes back
# defaulted, and the invalid one is refused by the validating webhook. An API server picks up new
# webhook configurations asynchronously.
wait_jobset_webhooks() {
  local n=$1 out="" deadline=$((SECONDS + TIMEOUT)) err="${DEV}/jobset/probe-${1}.err"
  while :; do
    if out=$(jobset_probe | kworker "${n}" create --dry-run=server -f - \
        -o jsonpath='{.spec.successPolicy.operator}' 2>"${err}"); then
      [[ "${out}" == All ]] || out="a dry-run JobSet came back without the webhook's defaults"
    else
      out=$(cat "${err}")
    fi
    if [[ "${out}" == All ]]; then
      out=$(jobset_probe invalid | kworker "${n}" create --dry-run=server -f - -o name 2>&1) \
        && out="accepted: ${out}"
      [[ "${out}" == *'admission webhook "vjobset.kb.io" denied the request'* ]] && return 0
    fi
    if ((SECONDS >= deadline)); then
      tail -n 30 "${DEV}/logs/jobset-controller-${n}.log" >&2 || true
      die "worker-${n}'s API server does not call the JobSet webhooks after ${TIMEOUT}s (last answer: ${out}); see ${DEV}/logs/jobset-controller-${n}.log"
    fi
    sleep 0.5
  done
}

# install_webhooks N KUSTOMIZE_DIR PORT OUT [PREFIX]: renders a controller's own webhook configurations
# (kubectl kustomize KUSTOMIZE_DIR) pointed at its server on 127.0.0.1:PORT (webhook-urls.awk, the
# configurations' names prefixed with PREFIX) into OUT, checks that every webhook lost its Service and
# got a URL, and applies them on worker N.
install_webhooks() {
  local n=$1 dir=$2 port=$3 out=$4 prefix=${5:-} urls
  "${KUBECTL}" kustomize "${dir}" \
    | awk -v base="https://127.0.0.1:${port}" -v ca="${CA_BUNDLE}" -v prefix="${prefix}" \
        -f "${TESTBED}/webhook-urls.awk" > "${out}"
  urls=$(grep -c '^    url: https://127\.0\.0\.1:' "${out}") || true
  if ((urls == 0)) || [[ "${urls}" != "$(grep -c '^  clientConfig:$' "${out}")" ]] || grep -q 'service:' "${out}"; then
    die "rendering the webhook configurations of ${dir} went wrong; see ${out}"
  fi
  kworker "${n}" apply --server-side --force-conflicts -f "${out}" >/dev/null
}

jobset_start=${SECONDS}
JOBSET_CRD="${BIN}/jobset/crd/jobset.x-k8s.io_jobsets.yaml"
install_jobset_crd() { install_crd "${JOBSET_CRD}" "$@"; }
# One cluster after the other: the CRD is large (over 800 kB), and the API servers compete for the
# CPUs while they take it in, so installing it in parallel is no faster. The hub's comes last, while
# the workers' controllers start.
for n in "${WORKERS[@]}"; do
  install_jobset_crd kworker "${n}" \
    || die "the JobSet CRD was not installed or did not become Established on worker-${n}"
done
jobset_certs
CA_BUNDLE=$(base64 -w0 <"${JOBSET_CERTS}/ca.crt")
for n in "${WORKERS[@]}"; do
  cat > "${DEV}/jobset/worker-${n}.config.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: $(jobset_port "${n}" 0)
  certDir: ${JOBSET_CERTS}
metrics:
  certDir: ${JOBSET_CERTS}
EOF
  start_process "jobset-controller-${n}" "$(jobset_port "${n}" 1)" "$(jobset_port "${n}" 2)" \
    "${BIN}/jobset-controller-manager" --kubeconfig "${DEV}/worker-${n}.kubeconfig" \
    --config "${DEV}/jobset/worker-${n}.config.yaml" --zap-log-level=info
done
install_jobset_crd khub || die "the JobSet CRD was not installed or did not become Established on the hub"
for n in "${WORKERS[@]}"; do
  wait_healthy "jobset-controller-${n}"
  # The module's webhook configurations, pointed at this worker's controller; every webhook must have
  # lost its Service and got a URL.
  install_webhooks "${n}" "${BIN}/jobset/webhook" "$(jobset_port "${n}" 0)" "${DEV}/jobset/worker-${n}.webhooks.yaml" jobset-
done
for n in "${WORKERS[@]}"; do
  wait_jobset_webhooks "${n}"
done
log "JobSet CRD on the hub and the workers; JobSet controllers and webhooks serving on the workers ($((SECONDS - jobset_start))s)"

# --- 5. KubeRay ----------------------------------------------------------------
# The CRDs of the KubeRay module (RayCluster, RayJob, RayService) go on the hub and on every worker, before
# the hub's admission policies (section 7), which match RayJobs. Only the workers run the KubeRay operator:
# a RayJob submitted to the hub is Gantry's to dispatch, held there by spec.suspend, and no operator
# runs there. The operator on a worker runs with
#   - ENABLE_WEBHOOKS=false: its one webhook (validation of RayClusters) would need a certificate and a
#     webhook configuration; the CRDs' schemas still validate, and the operator validates each RayJob
#     itself (a bad one ends ValidationFailed);
#   - --enable-leader-election=false: one operator per worker, and outside a pod it has no namespace to
#     keep its lease in;
#   - no --watch-namespace: it watches every namespace, as Gantry creates RayJobs in the hub's namespaces.
# Nothing else is turned off for kwok: the operator makes pods, Services and Jobs, which the API server
# and kwok handle. What it cannot do here is reach a Ray dashboard (the head Service's cluster DNS name
# does not resolve on this host, and kwok's pods run no containers), so a RayJob gets to Running (its
# job status stays empty) and stays there while its submitter pod runs; once that pod has ended, KubeRay
# fails the RayJob (reason JobDeploymentStatusTransitionGracePeriodExceeded) at least 30 s later, as it
# never read the Ray job's end (about 1.5 min here: its retries of the dashboard back off).
# kuberay_port N I: worker N's metrics (I=0) and health (1) ports.
kuberay_port() { echo $((PORT_BASE + 14 + 2 * $1 + $2)); }
kuberay_start=${SECONDS}
# install_crds DIR KUBECTL_FUNCTION [N]: every CRD in DIR, one after the other (KubeRay's and the
# trainer's are large, up to 900 kB each).
install_crds() {
  local dir=$1 crd
  shift
  for crd in "${dir}"/*.yaml; do
    install_crd "${crd}" "$@" || return 1
  done
}
install_kuberay_crds() { install_crds "${BIN}/kuberay/crd" "$@"; }
for n in "${WORKERS[@]}"; do
  install_kuberay_crds kworker "${n}" \
    || die "the KubeRay CRDs were not installed or did not become Established on worker-${n}"
done
for n in "${WORKERS[@]}"; do
  launch "kuberay-operator-${n}" "$(kuberay_port "${n}" 1)" \
    env ENABLE_WEBHOOKS=false "${BIN}/kuberay-operator" --kubeconfig "${DEV}/worker-${n}.kubeconfig" \
    --enable-leader-election=false \
    --metrics-addr "127.0.0.1:$(kuberay_port "${n}" 0)" \
    --health-probe-bind-address "127.0.0.1:$(kuberay_port "${n}" 1)" \
    --log-stdout-encoder console
done
install_kuberay_crds khub || die "the KubeRay CRDs were not installed or did not become Established on the hub"
for n in "${WORKERS[@]}"; do
  wait_healthy "kuberay-operator-${n}"
done
log "KubeRay CRDs on the hub and the workers; KubeRay operators serving on the workers ($((SECONDS - kuberay_start))s)"

# --- 6. Kubeflow trainer -------------------------------------------------------
# The trainer's CRDs (TrainJob, TrainingRuntime, ClusterTrainingRuntime) go on the hub and on every worker,
# before the hub's admission policies (section 7), which match TrainJobs; so does the runtime the samples
# name (hack/testbed/trainer-runtime.yaml): the hub reads it to count a TrainJob's pods, a worker's
# trainer to build the JobSet. Only the workers run the trainer's controller manager: a TrainJob on the
# hub is Gantry's to dispatch, held there by spec.suspend. On a worker it runs
#   - with its validating webhooks (of TrainJobs and runtimes), on loopback like JobSet's and with the
#     same testbed certificate: its own certificate management is off, and its webhook server reads the
#     certificate from a fixed directory under TMPDIR, which the testbed points at one of its own;
#   - without leader election, and without the PodGroup CRDs of gang schedulers (the runtime asks for
#     none; the JobSet's pods go to the worker's scheduler).
# A TrainJob becomes a JobSet there, whose pods kwok completes; the trainer then marks it Complete.
# trainer_port N I: worker N's webhook (I=0), metrics (1) and health (2) ports.
trainer_port() { echo $((PORT_BASE + 17 + 3 * $1 + $2)); }
# A ClusterTrainingRuntime only the trainer's validating webhook refuses: its trainer step has two replicas.
trainer_probe() {
  cat <<EOF
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: testbed-webhook-probe
spec:
  template:
    spec:
      replicatedJobs:
      - name: node
        replicas: 2
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: trainer
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: registry.example/probe:1
EOF
}

# Waits (bounded) until worker N's API server calls the trainer's webhook: it refuses the probe.
wait_trainer_webhook() {
  local n=$1 out="" deadline=$((SECONDS + TIMEOUT))
  while :; do
    out=$(trainer_probe | kworker "${n}" create --dry-run=server -f - -o name 2>&1) && out="accepted: ${out}"
    [[ "${out}" == *'admission webhook "validator.clustertrainingruntime.trainer.kubeflow.org" denied the request'* ]] \
      && return 0
    if ((SECONDS >= deadline)); then
      tail -n 30 "${DEV}/logs/trainer-controller-${n}.log" >&2 || true
      die "worker-${n}'s API server does not call the trainer's webhook after ${TIMEOUT}s (last answer: ${out}); see ${DEV}/logs/trainer-controller-${n}.log"
    fi
    sleep 0.5
  done
}

trainer_start=${SECONDS}
install_trainer_crds() { install_crds "${BIN}/trainer/crd" "$@"; }
for n in "${WORKERS[@]}"; do
  install_trainer_crds kworker "${n}" \
    || die "the trainer's CRDs were not installed or did not become Established on worker-${n}"
done
for n in "${WORKERS[@]}"; do
  tmp="${DEV}/trainer/worker-${n}.tmp"
  mkdir -p "${tmp}/k8s-webhook-server"
  ln -sfn "${JOBSET_CERTS}" "${tmp}/k8s-webhook-server/serving-certs"
  cat > "${DEV}/trainer/worker-${n}.config.yaml" <<EOF
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:$(trainer_port "${n}" 2)
metrics:
  bindAddress: 127.0.0.1:$(trainer_port "${n}" 1)
  secureServing: false
webhook:
  host: 127.0.0.1
  port: $(trainer_port "${n}" 0)
leaderElection:
  leaderElect: false
certManagement:
  enable: false
EOF
  launch "trainer-controller-${n}" "$(trainer_port "${n}" 2)" \
    env TMPDIR="${tmp}" "${BIN}/trainer-controller-manager" --kubeconfig "${DEV}/worker-${n}.kubeconfig" \
    --config "${DEV}/trainer/worker-${n}.config.yaml" --zap-log-level=info
done
install_trainer_crds khub || die "the trainer's CRDs were not installed or did not become Established on the hub"
for n in "${WORKERS[@]}"; do
  wait_healthy "trainer-controller-${n}"
  install_webhooks "${n}" "${BIN}/trainer/webhook" "$(trainer_port "${n}" 0)" "${DEV}/trainer/worker-${n}.webhooks.yaml"
done
# The runtime goes to a worker once its API server calls the trainer's webhook, which validates runtimes
# (an API server picks up new webhook configurations asynchronously; until then the apply goes through
# unvalidated, so the check is a dry run the webhook must refuse).
for n in "${WORKERS[@]}"; do
  wait_trainer_webhook "${n}"
  kworker "${n}" apply --server-side --force-conflicts -f "${TESTBED}/trainer-runtime.yaml" >/dev/null
done
khub apply --server-side --force-conflicts -f "${TESTBED}/trainer-runtime.yaml" >/dev/null
log "trainer CRDs and runtime on the hub and the workers; trainers and webhooks serving on the workers ($((SECONDS - trainer_start))s)"

# --- 7. CRDs and hub manifests -----------------------------------------------
if compgen -G "${ROOT}/deploy/crd/*.yaml" >/dev/null; then
  for k in khub "kworker 1" "kworker 2"; do
    ${k} apply --server-side --force-conflicts -k "${ROOT}/deploy/crd/" >/dev/null
    ${k} wait --for=condition=Established crd --all --timeout=60s >/dev/null \
      || die "CRDs did not become Established (${k})"
  done
  log "CRDs installed"
elif ((GANTRY)); then
  die "no CRDs in deploy/crd/ (generate them first)"
else
  log "no CRDs in deploy/crd/ yet; skipping"
fi
# The testbed runs Gantry's programs on the host: the clusters get the namespace, the RBAC and the
# policies of deploy/, not the Deployments.
for k in khub "kworker 1" "kworker 2"; do
  ${k} apply --server-side --force-conflicts -f "${ROOT}/deploy/namespace/namespace.yaml" >/dev/null
done
for n in "${WORKERS[@]}"; do
  kworker "${n}" apply --server-side --force-conflicts -f "${ROOT}/deploy/agent/pod-group-policy.yaml" >/dev/null
done
khub apply --server-side --force-conflicts -f "${ROOT}/deploy/hub/rbac.yaml" -f "${ROOT}/deploy/hub/user-roles.yaml" \
  -f "${ROOT}/deploy/hub/job-admission-policy.yaml" >/dev/null

# --- 8. least-privilege hub identity on each worker ----------------------------
for n in "${WORKERS[@]}"; do
  kworker "${n}" apply --server-side --force-conflicts -f "${ROOT}/deploy/worker/hub-access.yaml" >/dev/null
  server=$(kworker "${n}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
  ca=$(kworker "${n}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
  [[ -n "${ca}" ]] || die "worker-${n}'s kubeconfig has no embedded CA data"
  token=$(kworker "${n}" create token gantry-hub-remote -n gantry-system --duration=8760h)
  # Token only: no client certificate, no exec plugin, no file references.
  (
    umask 077
    cat > "${DEV}/worker-${n}.hub-access.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: worker-${n}
  cluster:
    server: ${server}
    certificate-authority-data: ${ca}
users:
- name: gantry-hub-remote
  user:
    token: ${token}
contexts:
- name: worker-${n}
  context:
    cluster: worker-${n}
    user: gantry-hub-remote
current-context: worker-${n}
EOF
  )
  khub -n gantry-system create secret generic "worker-${n}-kubeconfig" \
    --from-file=kubeconfig="${DEV}/worker-${n}.hub-access.kubeconfig" --dry-run=client -o yaml \
    | khub apply -f - >/dev/null
done
log "hub access to workers configured"

# --- 9. Gantry processes -----------------------------------------------------
# Their metrics are served over plain HTTP on loopback (--metrics-secure=false), for the tests and
# benchmarks that read them; installed from the chart they are served over HTTPS to authorized callers.
if ((!GANTRY)); then
  print_summary
  echo "(--no-gantry: gantry-hub and gantry-agent are not running)"
  exit 0
fi

# GANTRY_PPROF=1 serves Go profiles: the hub on PORT_BASE+6, agent N on PORT_BASE+6+N.
pprof() { if [[ -n "${GANTRY_PPROF:-}" ]]; then echo --pprof-bind-address "127.0.0.1:$((PORT_BASE + 6 + $1))"; fi; }
# The hub's endpoint (kubectl gantry logs) serves plain HTTP, which it allows on loopback only.
ENDPOINT_ADDR="127.0.0.1:$((PORT_BASE + 9))"
# shellcheck disable=SC2046,SC2086 # pprof and GANTRY_HUB_FLAGS split into words
start_process gantry-hub "${PORT_BASE}" "$((PORT_BASE + 1))" \
  "${ROOT}/bin/gantry-hub" --kubeconfig "${DEV}/hub.kubeconfig" --namespace gantry-system --metrics-secure=false \
  --allow-loopback-workers --endpoint-bind-address "${ENDPOINT_ADDR}" --endpoint-page $(pprof 0) ${GANTRY_HUB_FLAGS:-}
for n in "${WORKERS[@]}"; do
  # shellcheck disable=SC2046,SC2086 # pprof and GANTRY_AGENT_FLAGS split into words
  start_process "gantry-agent-${n}" "$((PORT_BASE + 2 * n))" "$((PORT_BASE + 2 * n + 1))" \
    "${ROOT}/bin/gantry-agent" --kubeconfig "${DEV}/worker-${n}.kubeconfig" --metrics-secure=false \
    --cluster-name "worker-${n}" --namespace gantry-system $(pprof "${n}") ${GANTRY_AGENT_FLAGS:-}
done
for name in gantry-hub gantry-agent-1 gantry-agent-2; do
  wait_healthy "${name}"
done
log "gantry-hub and agents healthy"
# A request without a token gets 401 once the endpoint serves.
deadline=$((SECONDS + TIMEOUT))
until [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://${ENDPOINT_ADDR}/logs/default/none")" == 401 ]]; do
  ((SECONDS < deadline)) || die "the hub's endpoint does not answer on ${ENDPOINT_ADDR}; see ${DEV}/logs/gantry-hub.log"
  sleep 1
done
sed -e "s|\${ENDPOINT_URL}|http://${ENDPOINT_ADDR}|g" "${TESTBED}/hub-endpoint.yaml" \
  | khub apply --server-side --force-conflicts -f - >/dev/null
log "the hub's endpoint serves on http://${ENDPOINT_ADDR} (ConfigMap gantry-system/gantry-hub-endpoint)"

# --- 10. hub objects ----------------------------------------------------------
khub apply -f "${TESTBED}/hub-objects.yaml" >/dev/null
for n in "${WORKERS[@]}"; do
  if ! khub wait --for=condition=Connected "workerclusters.gantry.dev/worker-${n}" --timeout="${TIMEOUT}s" >/dev/null; then
    khub get workerclusters.gantry.dev -o yaml >&2 || true
    tail -n 30 "${DEV}/logs/gantry-hub.log" >&2 || true
    die "WorkerCluster worker-${n} is not Connected; see ${DEV}/logs/gantry-hub.log"
  fi
done
log "both WorkerClusters Connected"

# --- 11. summary -------------------------------------------------------------
print_summary
