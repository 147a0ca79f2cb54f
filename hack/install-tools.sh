#!/usr/bin/env bash
# Builds the pinned testbed/envtest binaries from the Go module proxy:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (k8s.io/kubernetes)
#   kube-apiserver-vX.Y.Z, the API server of the oldest release a worker may run (hack/tools/kube-oldest),
#   which the integration tests start as a worker
#   etcd (go.etcd.io/etcd/server/v3), kwok, kwokctl (sigs.k8s.io/kwok)
#   jobset-controller-manager (sigs.k8s.io/jobset), with the module's JobSet CRD and
#   webhook manifests copied next to it into jobset/ (the testbed installs them)
#   kuberay-operator (github.com/ray-project/kuberay/ray-operator), with the module's
#   RayCluster, RayJob and RayService CRDs copied next to it into kuberay/crd/ (the
#   operator watches all three; the testbed installs them)
#   trainer-controller-manager (github.com/kubeflow/trainer/v2), with the module's TrainJob,
#   TrainingRuntime and ClusterTrainingRuntime CRDs and its webhook manifests copied next to it into
#   trainer/ (the testbed installs them)
#   kueue-controller-manager (sigs.k8s.io/kueue), with the module's CRDs of the kinds it serves copied
#   next to it into kueue/crd/ and its webhook manifests into kueue/webhook/ (one e2e test runs Kueue
#   on one worker and installs them; the testbed does not)
#
# Usage: BIN=$(hack/install-tools.sh [--envtest])
#   Prints the bin dir as the last line of stdout; progress goes to stderr.
#   Binaries are cached in ${GANTRY_CACHE:-$HOME/.cache/gantry}/bin/<stamp>/, so a
#   second run returns at once. envtest: KUBEBUILDER_ASSETS=$(hack/install-tools.sh --envtest)
#   --envtest  only etcd, the two kube-apiservers, kubectl and Kueue's CRDs (what the integration tests use; saves
#              several minutes on a cold machine; never builds JobSet, KubeRay, the trainer or Kueue).
#              Same bin dir as a full run.
#
# Versions come from the build modules under hack/tools/{kube,kube-oldest,etcd,kwok,jobset,kuberay,trainer,kueue};
# each is a separate module so their dependency graphs never have to agree.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="${ROOT}/hack/tools"
CACHE="${GANTRY_CACHE:-${HOME}/.cache/gantry}"

log() { echo "install-tools: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Reads the required version of module $2 from go.mod $1.
modver() {
  local v
  v=$(awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) && $0 !~ /=>/ {
        print ($1 == "require") ? $3 : $2; exit }' "$1")
  [[ -n "${v}" ]] || die "cannot find ${2} in ${1}"
  echo "${v}"
}

ENVTEST_ONLY=0
case "${1:-}" in
  "") ;;
  --envtest) ENVTEST_ONLY=1 ;;
  *) die "unknown argument: $1 (usage: hack/install-tools.sh [--envtest])" ;;
esac

K8S_VERSION=$(modver "${TOOLS}/kube/go.mod" k8s.io/kubernetes)
OLDEST_K8S_VERSION=$(modver "${TOOLS}/kube-oldest/go.mod" k8s.io/kubernetes)
ETCD_VERSION=$(modver "${TOOLS}/etcd/go.mod" go.etcd.io/etcd/server/v3)
KWOK_VERSION=$(modver "${TOOLS}/kwok/go.mod" sigs.k8s.io/kwok)
JOBSET_VERSION=$(modver "${TOOLS}/jobset/go.mod" sigs.k8s.io/jobset)
KUBERAY_MODULE=github.com/ray-project/kuberay/ray-operator
KUBERAY_VERSION=$(modver "${TOOLS}/kuberay/go.mod" "${KUBERAY_MODULE}")
# Gantry reads RayJobs with the types of its own KubeRay requirement: the testbed should run that release.
if gantry_kuberay=$(modver "${ROOT}/go.mod" "${KUBERAY_MODULE}" 2>/dev/null) \
   && [[ "${gantry_kuberay}" != "${KUBERAY_VERSION}" ]]; then
  log "warning: go.mod requires ${KUBERAY_MODULE} ${gantry_kuberay}, hack/tools/kuberay builds ${KUBERAY_VERSION}"
fi

TRAINER_MODULE=github.com/kubeflow/trainer/v2
TRAINER_VERSION=$(modver "${TOOLS}/trainer/go.mod" "${TRAINER_MODULE}")
if gantry_trainer=$(modver "${ROOT}/go.mod" "${TRAINER_MODULE}" 2>/dev/null) \
   && [[ "${gantry_trainer}" != "${TRAINER_VERSION}" ]]; then
  log "warning: go.mod requires ${TRAINER_MODULE} ${gantry_trainer}, hack/tools/trainer builds ${TRAINER_VERSION}"
fi

KUEUE_VERSION=$(modver "${TOOLS}/kueue/go.mod" sigs.k8s.io/kueue)

STAMP="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_jobset-${JOBSET_VERSION}_kuberay-${KUBERAY_VERSION}_trainer-${TRAINER_VERSION}_kueue-${KUEUE_VERSION}"
BIN="${CACHE}/bin/${STAMP}"
# What the testbed reads from the JobSet module, copied into BIN/jobset/ (see jobset_manifests).
JOBSET_CRD=crd/jobset.x-k8s.io_jobsets.yaml
# The CRDs of the KubeRay module, copied into BIN/kuberay/crd/ (see copy_crds).
KUBERAY_CRDS=(ray.io_rayclusters.yaml ray.io_rayjobs.yaml ray.io_rayservices.yaml)
# The CRDs of the trainer module, copied into BIN/trainer/crd/ (see copy_crds).
TRAINER_CRDS=(trainer.kubeflow.org_trainjobs.yaml trainer.kubeflow.org_trainingruntimes.yaml
              trainer.kubeflow.org_clustertrainingruntimes.yaml)
# The CRDs of the Kueue module, copied into BIN/kueue/crd/ (see copy_crds): the kinds its controller
# manager watches with MultiKueue and provisioning requests off.
KUEUE_CRDS=(kueue.x-k8s.io_admissionchecks.yaml kueue.x-k8s.io_clusterqueues.yaml kueue.x-k8s.io_cohorts.yaml
            kueue.x-k8s.io_localqueues.yaml kueue.x-k8s.io_resourceflavors.yaml
            kueue.x-k8s.io_workloadpriorityclasses.yaml kueue.x-k8s.io_workloads.yaml kueue.x-k8s.io_topologies.yaml)
if ((ENVTEST_ONLY)); then
  WANT=(etcd kube-apiserver kubectl "kube-apiserver-${OLDEST_K8S_VERSION}")
else
  WANT=(etcd kube-apiserver kubectl "kube-apiserver-${OLDEST_K8S_VERSION}" kube-controller-manager kube-scheduler kwok kwokctl jobset-controller-manager
        kuberay-operator trainer-controller-manager kueue-controller-manager)
fi

# crds_present NAME FILE...: true when every FILE is in BIN/NAME/crd/.
crds_present() {
  local name=$1 f
  shift
  for f in "$@"; do
    [[ -f "${BIN}/${name}/crd/${f}" ]] || return 1
  done
}

missing() {
  local b
  for b in "${WANT[@]}"; do
    [[ -x "${BIN}/${b}" ]] || echo "${b}"
  done
  # The integration tests install Kueue's CRDs on a worker (no controller): copied in either run.
  crds_present kueue "${KUEUE_CRDS[@]}" || echo "kueue CRDs"
  if ((!ENVTEST_ONLY)); then
    [[ -f "${BIN}/jobset/${JOBSET_CRD}" && -f "${BIN}/jobset/webhook/kustomization.yaml" ]] \
      || echo "jobset manifests"
    crds_present kuberay "${KUBERAY_CRDS[@]}" || echo "kuberay CRDs"
    crds_present trainer "${TRAINER_CRDS[@]}" && [[ -f "${BIN}/trainer/webhook/kustomization.yaml" ]] \
      || echo "trainer manifests"
    [[ -f "${BIN}/kueue/webhook/manifests.yaml" ]] || echo "kueue webhook manifests"
  fi
}

# Fast path: everything already built.
if [[ -z "$(missing)" ]]; then
  echo "${BIN}"
  exit 0
fi

command -v go >/dev/null || die "go is not in PATH"
command -v flock >/dev/null || die "flock is not in PATH (util-linux)"

mkdir -p "${BIN}"
# One builder at a time; a concurrent caller waits (bounded) and then finds the
# binaries present.
exec 9>"${CACHE}/bin/.${STAMP}.lock"
if ! flock -n 9; then
  log "another build holds ${CACHE}/bin/.${STAMP}.lock; waiting (up to 30 min)"
  flock -w 1800 9 || die "timed out waiting for the build lock"
fi

# Go settings that keep these builds independent of the caller's environment:
# no go.work, go.sum must already be complete, static binaries.
export GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0

STAGE=$(mktemp -d "${CACHE}/bin/.stage.XXXXXX")
trap 'rm -rf "${STAGE}"' EXIT

# build MODULE_DIR LDFLAGS NAME=PACKAGE...
# Builds into the stage dir, then moves each binary into place so a reader never
# sees a half-written file.
build() {
  local dir=$1 ldflags=$2 spec name pkg start
  shift 2
  local pkgs=() names=()
  for spec in "$@"; do
    name=${spec%%=*} pkg=${spec#*=}
    [[ -x "${BIN}/${name}" ]] && continue
    [[ " ${WANT[*]} " == *" ${name} "* ]] || continue
    names+=("${name}") pkgs+=("${pkg}")
  done
  [[ ${#pkgs[@]} -gt 0 ]] || return 0
  log "building ${names[*]} (module ${dir#"${ROOT}/"})"
  start=${SECONDS}
  rm -rf "${STAGE:?}"/*
  if [[ ${#pkgs[@]} -eq 1 ]]; then
    (cd "${dir}" && go build -trimpath -ldflags "${ldflags}" -o "${STAGE}/${names[0]}" "${pkgs[0]}") \
      || die "building ${names[*]} failed"
  else
    (cd "${dir}" && go build -trimpath -ldflags "${ldflags}" -o "${STAGE}/" "${pkgs[@]}") \
      || die "building ${names[*]} failed"
  fi
  for name in "${names[@]}"; do
    [[ -x "${STAGE}/${name}" ]] || die "expected ${STAGE}/${name} after build"
    mv -f "${STAGE}/${name}" "${BIN}/${name}"
  done
  log "built ${names[*]} in $((SECONDS - start))s"
}

# k8s_ldflags [VERSION]: the version variables of a Kubernetes binary (default: K8S_VERSION).
k8s_ldflags() {
  local v=${1:-${K8S_VERSION}} major minor f=() p
  major=${v#v}; major=${major%%.*}
  minor=${v#v"${major}".}; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=("-X ${p}.gitVersion=${v}" "-X ${p}.gitMajor=${major}" "-X ${p}.gitMinor=${minor}"
        "-X ${p}.gitTreeState=clean")
  done
  echo "-s -w ${f[*]}"
}

# kwokctl derives component flags from its default Kubernetes version; make that
# default match the binaries built here.
KWOK_LDFLAGS="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${K8S_VERSION#v}"

# What envtest needs first (see --envtest).
build "${TOOLS}/etcd" "-s -w" etcd=.
build "${TOOLS}/kube" "$(k8s_ldflags)" \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kubectl=k8s.io/kubernetes/cmd/kubectl
build "${TOOLS}/kube-oldest" "$(k8s_ldflags "${OLDEST_K8S_VERSION}")" \
  "kube-apiserver-${OLDEST_K8S_VERSION}=k8s.io/kubernetes/cmd/kube-apiserver"
build "${TOOLS}/kube" "$(k8s_ldflags)" \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
build "${TOOLS}/kwok" "${KWOK_LDFLAGS}" \
  kwok=sigs.k8s.io/kwok/cmd/kwok kwokctl=sigs.k8s.io/kwok/cmd/kwokctl

# module_dir BUILD_MODULE_DIR MODULE: the directory of MODULE (at the version the build module requires)
# in the module cache, from go mod download (which fetches it if needed).
module_dir() {
  local out dir
  out=$(cd "$1" && go mod download -json "$2") || die "go mod download $2 failed"
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"${out}" | head -n 1)
  [[ -d "${dir}" ]] || die "go mod download printed no directory for $2"
  echo "${dir}"
}

# JobSet: the controller manager is the main package at the root of the module sigs.k8s.io/jobset.
jobset_module_dir() { module_dir "${TOOLS}/jobset" sigs.k8s.io/jobset; }

# Copies the module's JobSet CRD and its webhook kustomization (the upstream
# webhook configurations with their patches) into BIN/jobset/, in one rename.
jobset_manifests() {
  [[ -f "${BIN}/jobset/${JOBSET_CRD}" && -f "${BIN}/jobset/webhook/kustomization.yaml" ]] && return 0
  local dir
  dir=$(jobset_module_dir)
  [[ -f "${dir}/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" ]] \
    || die "no JobSet CRD in the module sigs.k8s.io/jobset (${dir})"
  [[ -f "${dir}/config/components/webhook/kustomization.yaml" ]] \
    || die "no webhook kustomization in the module sigs.k8s.io/jobset (${dir})"
  rm -rf "${STAGE:?}"/*
  mkdir -p "${STAGE}/jobset/crd"
  cp "${dir}/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" "${STAGE}/jobset/${JOBSET_CRD}"
  cp -R "${dir}/config/components/webhook" "${STAGE}/jobset/webhook"
  chmod -R u+w "${STAGE}/jobset"   # the module cache is read-only
  rm -rf "${BIN}/jobset"
  mv "${STAGE}/jobset" "${BIN}/jobset"
  log "copied the JobSet ${JOBSET_VERSION} CRD and webhook manifests into ${BIN}/jobset"
}

# copy_crds NAME BUILD_MODULE_DIR MODULE SUBDIR FILE...: copies the CRD files from SUBDIR of MODULE into
# BIN/NAME/crd/, in one rename.
copy_crds() {
  local name=$1 build_dir=$2 module=$3 subdir=$4 dir f
  shift 4
  crds_present "${name}" "$@" && return 0
  dir=$(module_dir "${build_dir}" "${module}")
  rm -rf "${STAGE:?}"/*
  mkdir -p "${STAGE}/${name}/crd"
  for f in "$@"; do
    [[ -f "${dir}/${subdir}/${f}" ]] || die "no ${f} in the module ${module} (${dir}/${subdir})"
    cp "${dir}/${subdir}/${f}" "${STAGE}/${name}/crd/${f}"
  done
  chmod -R u+w "${STAGE}/${name}"   # the module cache is read-only
  rm -rf "${BIN:?}/${name}"
  mv "${STAGE}/${name}" "${BIN}/${name}"
  log "copied the ${module} CRDs into ${BIN}/${name}/crd"
}

# copy_webhook NAME BUILD_MODULE_DIR MODULE SUBDIR FILE: copies the directory SUBDIR of MODULE, the
# webhook manifests, which must hold FILE, into BIN/NAME/webhook/.
copy_webhook() {
  local name=$1 build_dir=$2 module=$3 subdir=$4 file=$5 dir
  [[ -f "${BIN}/${name}/webhook/${file}" ]] && return 0
  dir=$(module_dir "${build_dir}" "${module}")
  [[ -f "${dir}/${subdir}/${file}" ]] || die "no ${file} in the module ${module} (${dir}/${subdir})"
  rm -rf "${STAGE:?}"/*
  cp -R "${dir}/${subdir}" "${STAGE}/webhook"
  chmod -R u+w "${STAGE}/webhook"   # the module cache is read-only
  rm -rf "${BIN:?}/${name}/webhook"
  mv "${STAGE}/webhook" "${BIN}/${name}/webhook"
  log "copied the ${module} webhook manifests into ${BIN}/${name}/webhook"
}

# Before Kueue's webhook manifests: copy_crds replaces the whole kueue/ directory.
copy_crds kueue "${TOOLS}/kueue" sigs.k8s.io/kueue config/components/crd/bases "${KUEUE_CRDS[@]}"
if ((!ENVTEST_ONLY)); then
  # The module carries no commit the build could read; the version says which release it is.
  build "${TOOLS}/jobset" "-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=${JOBSET_VERSION} -X sigs.k8s.io/jobset/pkg/version.GitCommit=unknown" \
    jobset-controller-manager=sigs.k8s.io/jobset
  jobset_manifests
  # KubeRay: the operator is the main package at the root of its module; its version is a constant
  # of the module (utils.KUBERAY_VERSION), so it needs no version ldflags.
  build "${TOOLS}/kuberay" "-s -w" kuberay-operator="${KUBERAY_MODULE}"
  copy_crds kuberay "${TOOLS}/kuberay" "${KUBERAY_MODULE}" config/crd/bases "${KUBERAY_CRDS[@]}"
  # The trainer: its controller manager has no version variables for ldflags to set.
  build "${TOOLS}/trainer" "-s -w" trainer-controller-manager="${TRAINER_MODULE}/cmd/trainer-controller-manager"
  copy_crds trainer "${TOOLS}/trainer" "${TRAINER_MODULE}" manifests/base/crds "${TRAINER_CRDS[@]}"
  copy_webhook trainer "${TOOLS}/trainer" "${TRAINER_MODULE}" manifests/base/webhook kustomization.yaml
  # Kueue: its version variables say which release it is (the module carries no commit).
  build "${TOOLS}/kueue" "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=${KUEUE_VERSION}" \
    kueue-controller-manager=sigs.k8s.io/kueue/cmd/kueue
  copy_webhook kueue "${TOOLS}/kueue" sigs.k8s.io/kueue config/components/webhook manifests.yaml
fi

[[ -z "$(missing)" ]] || die "still missing after build: $(missing | tr '\n' ' ')"
log "binaries ready in ${BIN}"
echo "${BIN}"
