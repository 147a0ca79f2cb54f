#!/usr/bin/env bash
# Runs every test tier: unit (pure decisions, fuzz seeds, builders), integration (hub and agents
# in-process against three real API servers) and end to end (whole kwok clusters with the real binaries).
# Pinned Kubernetes binaries are built once into $GANTRY_CACHE by hack/install-tools.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== unit tests"
go test -count=1 ./apis/... ./jobkind/... ./dispatch/... ./agent/... ./hub/... ./internal/... ./cmd/... ./hack/... ./kind-configs/... ./test/scrape/... ./test/metricstest/... ./test/doccmd/...

echo "== integration tests (real kube-apiservers: one hub, two workers)"
assets=$(hack/install-tools.sh --envtest | tail -n 1)
KUBEBUILDER_ASSETS="$assets" go test -count=1 -timeout 15m ./test/integration/...

echo "== the hub's page in headless Chromium over a queue 100,000 deep (a real kube-apiserver)"
GANTRY_CHROMIUM="$(hack/install-chromium.sh)" KUBEBUILDER_ASSETS="$assets" go test -count=1 -timeout 15m ./test/page/...

echo "== scale harness, a small run (real kube-apiservers, the real gantry-hub and gantry-agent)"
make --no-print-directory build
KUBEBUILDER_ASSETS="$assets" go test -count=1 -timeout 10m ./test/scale/...

if compgen -G "test/e2e/*_test.go" >/dev/null; then
  echo "== end-to-end tests (kwok clusters, real gantry-hub and gantry-agent, some from their images under runc)"
  make --no-print-directory build images
  GANTRY_CHROMIUM="$(hack/install-chromium.sh)" GANTRY_RUNC="$(hack/install-debian.sh runc)" GANTRY_TOOLS="$(hack/install-tools.sh | tail -n 1)" go test -count=1 -timeout 30m ./test/e2e/...
fi
