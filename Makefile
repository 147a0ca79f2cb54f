# Gantry's build, test and testbed entry points. Tools are pinned; binaries the tests need are built once
# from the Go module proxy into $(GANTRY_CACHE) by hack/install-tools.sh.
SHELL := /usr/bin/env bash
GANTRY_CACHE ?= $(HOME)/.cache/gantry
export GANTRY_CACHE
CONTROLLER_GEN ?= go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
# golangci-lint with the checks of .golangci.yml, built from the module proxy (cached by Go).
GOLANGCI_LINT ?= go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
GO_TEST_FLAGS ?=

.PHONY: all build generate manifests verify lint fmt vet test test-unit test-integration test-page test-e2e bench bench-scale bench-dispatch dev-up dev-down demo tools images push release krew kind-up kind-e2e kind-down

all: build

build:
	go build -o bin/ ./cmd/gantry-hub ./cmd/gantry-agent ./cmd/kubectl-gantry
	install -m 0755 cmd/kubectl-gantry/kubectl_complete-gantry bin/

# krew writes bin/krew/: kubectl-gantry_<os>_<arch>.tar.gz for linux and darwin, amd64 and arm64, and the krew
# plugin manifest gantry.yaml pointing at RELEASE_URL/<archive> with their sha256.
krew:
	go run ./hack/krew -version "$${VERSION:?set VERSION, e.g. v0.2.0}" -url "$${RELEASE_URL:?set RELEASE_URL, the https URL the archives are published under}"

# images writes bin/images/gantry-hub.tar, gantry-agent.tar and kubectl-gantry.tar: OCI image layouts in a tar, each
# an index of linux/amd64 and linux/arm64, built without a container engine; equal commits give equal bytes.
images:
	go run ./hack/images -out bin/images

# release makes release VERSION from the commit checked out (clean tree, a CHANGELOG.md section "## VERSION"):
# bin/release/VERSION/ holds the images, the chart packaged with that version, install-hub.yaml and
# install-worker.yaml, RELEASE-NOTES.md and SHA256SUMS; the tag VERSION is made on the commit. With REGISTRY,
# the images and the chart are pushed there and the chart pulls its images from there. UNTAGGED=1 tries
# a release from the tree as it is, without the tag.
release:
	go run ./hack/release -version "$${VERSION:?set VERSION, e.g. v0.3.0}" $(if $(REGISTRY),-registry "$(REGISTRY)") $(if $(UNTAGGED),-untagged)

# push pushes those archives to $(REGISTRY)/gantry-hub:<version> and $(REGISTRY)/gantry-agent:<version>.
push:
	@test -n "$(REGISTRY)" || { echo "REGISTRY is empty: make push REGISTRY=registry.example/gantry"; exit 1; }
	$(MAKE) images
	go run ./hack/images -out bin/images -push "$(REGISTRY)"

generate:
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/... paths=./internal/kueue/...

# manifests generates the CRDs and the API reference written from them (docs/api-reference.md), copies the
# CRDs into the chart, and renders the kustomize bases and overlays of deploy/ from the chart.
manifests:
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=deploy/crd
	go run ./hack/crdversions -dir deploy/crd -served v1alpha1
	go run ./hack/apidocs -crds deploy/crd -out docs/api-reference.md
	rm -f deploy/charts/gantry/crds/*.yaml && cp deploy/crd/gantry.dev_*.yaml deploy/charts/gantry/crds/
	go run ./hack/manifests -chart deploy/charts/gantry -out deploy

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	go vet ./...

# verify regenerates every generated file and fails when the checked-in copy differs.
verify: generate manifests lint
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- apis internal/kueue deploy docs/api-reference.md || { echo "generated files are out of date: run make generate manifests"; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- apis internal/kueue deploy docs/api-reference.md)" || { echo "untracked generated files:"; git ls-files --others --exclude-standard -- apis internal/kueue deploy docs/api-reference.md; exit 1; }
	@go mod tidy -diff >/dev/null || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }

lint:
	$(GOLANGCI_LINT) run --timeout 15m ./...

tools:
	@hack/install-tools.sh >/dev/null

# test runs everything CI runs: generated-code drift, vet, unit, integration and end-to-end tests.
test: verify vet
	hack/test.sh

test-unit:
	go test $(GO_TEST_FLAGS) ./apis/... ./jobkind/... ./dispatch/... ./agent/... ./hub/... ./internal/... ./cmd/... ./hack/... ./kind-configs/... ./test/scrape/... ./test/metricstest/... ./test/doccmd/...

test-integration:
	KUBEBUILDER_ASSETS=$$(hack/install-tools.sh --envtest | tail -n 1) go test $(GO_TEST_FLAGS) ./test/integration/...

# test-page drives the hub's page in headless Chromium over a queue 100,000 deep (screenshots in
# $GANTRY_ARTIFACTS, else $TMPDIR/gantry-e2e-screenshots).
test-page:
	GANTRY_CHROMIUM=$$(hack/install-chromium.sh) KUBEBUILDER_ASSETS=$$(hack/install-tools.sh --envtest | tail -n 1) go test $(GO_TEST_FLAGS) -v -timeout 15m ./test/page/...

test-e2e: build images
	GANTRY_CHROMIUM=$$(hack/install-chromium.sh) GANTRY_RUNC=$$(hack/install-debian.sh runc) GANTRY_TOOLS=$$(hack/install-tools.sh | tail -n 1) go test $(GO_TEST_FLAGS) -timeout 30m ./test/e2e/...

bench-dispatch:
	go test -run '^$$' -bench . -benchmem ./dispatch/... ./agent/admission/...

# bench prints the dispatch benchmark against its targets and the last recorded run
# (test/e2e/bench/recorded.json); BENCH_RECORD=test/e2e/bench/recorded.json make bench records a new one.
bench: build
	hack/bench.sh

# bench-scale measures one hub over a deep queue and many worker clusters, real API servers and
# in-memory ones (test/scale); flags through SCALE_FLAGS, e.g.
# SCALE_FLAGS="-workers 4 -memory-workers 96 -depths 1000,10000".
bench-scale: build
	KUBEBUILDER_ASSETS=$$(hack/install-tools.sh --envtest | tail -n 1) go run ./test/scale $(SCALE_FLAGS)

dev-up:
	hack/dev-up.sh

dev-down:
	hack/dev-down.sh

demo:
	hack/demo.sh

# The kind path, for hosts with a container runtime (hack/kind.sh): three kind clusters with Gantry
# installed from the chart, the demo's jobs on them, and their removal.
kind-up:
	hack/kind.sh up

kind-e2e:
	hack/kind.sh e2e

kind-down:
	hack/kind.sh down
