#!/usr/bin/env bash
# The kind path, for hosts with a container runtime: a hub and two workers as kind clusters
# (kind-configs/), Gantry's images loaded into them, the chart installed, the workers registered with
# their in-network API addresses and bound tokens of the chart's gantry-hub-remote, and fake GPU nodes
# (kwok, run on the host) on each worker.
#
#   hack/kind.sh up     make kind-up
#   hack/kind.sh e2e    make kind-e2e: the demo's jobs on the kind fleet, each to completion
#   hack/kind.sh down   make kind-down
#
# Environment: GANTRY_KIND_DIR (default .kind) keeps the kubeconfigs, kwok's logs and pids.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$(realpath -m "${GANTRY_KIND_DIR:-${ROOT}/.kind}")
CLUSTERS=(hub worker-1 worker-2)
declare -A GPU_PRODUCT=([worker-1]=NVIDIA-A100-SXM4-80GB [worker-2]=NVIDIA-H100-80GB-HBM3)
TAG=kind
NODES_PER_WORKER=4

log() { echo "kind: $*" >&2; }
die() { echo "kind: ERROR: $*" >&2; exit 1; }

# require_runtime fails before anything is created when kind or the runtime it drives is missing.
require_runtime() {
  command -v kind >/dev/null || die "kind is not installed (https://kind.sigs.k8s.io); without a container runtime, use make demo, which needs none"
  command -v kubectl >/dev/null || die "kubectl is not installed"
  local provider=${KIND_EXPERIMENTAL_PROVIDER:-docker}
  command -v "${provider}" >/dev/null \
    || die "no container runtime: ${provider} is not installed (kind runs its nodes as containers); without one, use make demo"
  "${provider}" info >/dev/null 2>&1 \
    || die "no container runtime: '${provider} info' fails (is the daemon running, may you use it?); without one, use make demo"
}

k() { local c=$1; shift; kubectl --kubeconfig "${DIR}/${c}.kubeconfig" "$@"; }
chart() { (cd "${ROOT}" && go run ./hack/chart "$@"); }

up() {
  require_runtime
  mkdir -p "${DIR}/logs" "${DIR}/pids"
  dirname "$(command -v kubectl)" > "${DIR}/bin-dir"   # hack/demo.sh finds kubectl there
  (cd "${ROOT}" && VERSION=${TAG} make images >/dev/null)
  for c in "${CLUSTERS[@]}"; do
    if ! kind get clusters 2>/dev/null | grep -qx "gantry-${c}"; then
      log "creating cluster gantry-${c}"
      kind create cluster --config "${ROOT}/kind-configs/${c}.yaml" --kubeconfig "${DIR}/${c}.kubeconfig"
    fi
    kind get kubeconfig --name "gantry-${c}" > "${DIR}/${c}.kubeconfig"
    local image=gantry-agent
    [[ ${c} == hub ]] && image=gantry-hub
    kind load image-archive "${ROOT}/bin/images/${image}.tar" --name "gantry-${c}"
    k "${c}" apply --server-side -f "${ROOT}/deploy/namespace/namespace.yaml" >/dev/null
  done
  chart install --kubeconfig "${DIR}/hub.kubeconfig" --set role=hub --set image.tag="${TAG}"
  log "hub installed"
  for w in worker-1 worker-2; do
    chart install --kubeconfig "${DIR}/${w}.kubeconfig" --set role=agent \
      --set agent.clusterName="${w}" --set image.tag="${TAG}"
    fake_gpu_nodes "${w}"
    register "${w}"
    log "${w} installed and registered"
  done
  k hub apply -f "${ROOT}/hack/testbed/hub-objects.yaml" >/dev/null
  for w in worker-1 worker-2; do
    k hub wait --for=condition=Connected "workerclusters.gantry.dev/${w}" --timeout=180s >/dev/null \
      || die "WorkerCluster ${w} is not Connected: kubectl --kubeconfig ${DIR}/hub.kubeconfig get workercluster ${w} -o yaml"
  done
  log "ready: KUBECONFIG=${DIR}/hub.kubeconfig kubectl get workerclusters"
}

# fake_gpu_nodes runs kwok on the host for a worker and adds GPU nodes it plays, as on the kwok testbed.
fake_gpu_nodes() {
  local w=$1 bin
  bin=$("${ROOT}/hack/install-tools.sh" | tail -n 1)
  if ! { [[ -f "${DIR}/pids/kwok-${w}.pid" ]] && kill -0 "$(cat "${DIR}/pids/kwok-${w}.pid")" 2>/dev/null; }; then
    "${bin}/kwok" --kubeconfig "${DIR}/${w}.kubeconfig" --config "${ROOT}/hack/testbed/stages.yaml" \
      --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
      --server-address 127.0.0.1:0 >>"${DIR}/logs/kwok-${w}.log" 2>&1 &
    echo $! > "${DIR}/pids/kwok-${w}.pid"
  fi
  for ((i = 0; i < NODES_PER_WORKER; i++)); do
    sed -e "s/\${NODE_NAME}/${w}-gpu-${i}/g" -e "s/\${GPU_PRODUCT}/${GPU_PRODUCT[${w}]}/g" \
      "${ROOT}/hack/testbed/gpu-node.yaml"
    echo "---"
  done | k "${w}" apply -f - >/dev/null
  k "${w}" wait --for=condition=Ready node -l type=kwok --timeout=120s >/dev/null \
    || die "the fake GPU nodes of ${w} are not Ready; see ${DIR}/logs/kwok-${w}.log"
}

# register writes the hub's kubeconfig Secret for a worker: the worker's address inside the kind network,
# its CA, and a bound token of gantry-hub-remote, nothing else.
register() {
  local w=$1 internal server ca token
  internal=$(kind get kubeconfig --internal --name "gantry-${w}")
  server=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}' --kubeconfig <(echo "${internal}"))
  ca=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' --kubeconfig <(echo "${internal}"))
  token=$(k "${w}" -n gantry-system create token gantry-hub-remote --duration=8760h)
  cat > "${DIR}/${w}.hub-access.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: ${w}
  cluster: {server: ${server}, certificate-authority-data: ${ca}}
users:
- name: gantry-hub-remote
  user: {token: ${token}}
contexts:
- name: ${w}
  context: {cluster: ${w}, user: gantry-hub-remote}
current-context: ${w}
KUBECONFIG
  chmod 600 "${DIR}/${w}.hub-access.kubeconfig"
  k hub -n gantry-system create secret generic "${w}-kubeconfig" \
    --from-file=kubeconfig="${DIR}/${w}.hub-access.kubeconfig" --dry-run=client -o yaml | k hub apply -f - >/dev/null
}

down() {
  for f in "${DIR}"/pids/*.pid; do
    [[ -f ${f} ]] && kill "$(cat "${f}")" 2>/dev/null || true
  done
  if command -v kind >/dev/null; then
    for c in "${CLUSTERS[@]}"; do kind delete cluster --name "gantry-${c}" 2>/dev/null || true; done
  fi
  rm -rf "${DIR}"
}

case "${1:-}" in
  up) up ;;
  e2e) require_runtime; [[ -f "${DIR}/hub.kubeconfig" ]] || die "no kind fleet in ${DIR}: make kind-up first"
       GANTRY_DEV_DIR="${DIR}" "${ROOT}/hack/demo.sh" ;;
  down) down ;;
  *) die "usage: hack/kind.sh up|e2e|down" ;;
esac
