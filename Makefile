# crdplane — see README.md. Tools are installed into ./bin at pinned versions.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
# One build configuration for every target (the binaries, vet, the tests,
# the images, the upstream builds, the client matrix): static binaries
# (CGO_ENABLED=0) built with -trimpath, as the images need them, so that the
# compiler's cache serves each package once; a second configuration compiles
# the whole dependency graph again (the images' build did, minutes of CI).
export CGO_ENABLED ?= 0
export GOFLAGS := $(strip $(GOFLAGS) $(if $(findstring -trimpath,$(GOFLAGS)),,-trimpath))

BUF_VERSION := v1.73.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
GRPC_GATEWAY_VERSION := v2.31.0
GOLANGCI_LINT_VERSION := v2.15.0

MODULES := . pkg proto conformance bench/upstream services/storage services/registry services/validator services/converter services/gateway
SERVICES := gateway registry validator converter storage

.PHONY: all build run test test-unit test-e2e kube-apiserver test-clients generate check-generated lint tools bench clean fmt vet conformance conformance-fuzz fuzz fuzz-short

all: build

$(BIN)/buf:
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
$(BIN)/protoc-gen-grpc-gateway:
	GOBIN=$(BIN) $(GO) install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$(GRPC_GATEWAY_VERSION)
$(BIN)/golangci-lint:
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/protoc-gen-grpc-gateway

## download: fetch every module that the build, the tests, the oracle, the
## client matrix and the tools need into the module cache: every module
## graph at once, DOWNLOAD_PARALLEL fetches at a time in each (the go command
## alone fetches GOMAXPROCS at a time, 2 on a 2-core machine, so a slow
## module proxy costs its latency module after module). .ci/run starts
## with it; what follows only builds. Nothing is built here.
DOWNLOAD_PARALLEL ?= 16
# dir:modfile of every module graph outside go.work
MOD_GRAPHS := conformance/upstream:go.mod e2e/kubeapiserver:go.mod e2e/sampleapiserver:go.mod \
	e2e/clients/clientgo:go.mod e2e/clients/clientgo:go130.mod e2e/clients/clientgo:go133.mod \
	e2e/clients/controllerruntime:go.mod e2e/clients/controllerruntime:cr018.mod \
	e2e/clients/helm:go.mod
TOOL_PKGS := github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION) \
	google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION) \
	google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION) \
	github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$(GRPC_GATEWAY_VERSION) \
	github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
.PHONY: download
download:
	@start=$$(date +%s); pids=""; \
	(GOMAXPROCS=$(DOWNLOAD_PARALLEL) $(GO) mod download || { echo "download: go.work failed"; exit 1; }) & pids="$$pids $$!"; \
	for g in $(MOD_GRAPHS); do \
		(cd $${g%%:*} && GOWORK=off GOMAXPROCS=$(DOWNLOAD_PARALLEL) $(GO) mod download -modfile=$${g##*:} || { echo "download: $$g failed"; exit 1; }) & pids="$$pids $$!"; done; \
	for t in $(TOOL_PKGS); do \
		(out=$$(GOMAXPROCS=$(DOWNLOAD_PARALLEL) $(GO) install -n $$t 2>&1) || { echo "$$out" | tail -5; echo "download: $$t failed"; exit 1; }) & pids="$$pids $$!"; done; \
	fail=0; for p in $$pids; do wait $$p || fail=1; done; \
	echo "download: every module graph in $$(( $$(date +%s) - start ))s"; exit $$fail

## generate: regenerate the Go code from proto/ (committed).
generate: tools
	buf lint
	buf generate

## check-generated: fail when the committed generated code is stale.
check-generated: generate
	@if [ -n "$$(git status --porcelain -- proto)" ]; then \
		echo "generated code in proto/ is stale; run 'make generate' and commit:"; \
		git status --porcelain -- proto; git --no-pager diff --stat -- proto; exit 1; fi

## lint: golangci-lint (.golangci.yml: the import rules as depguard rules,
## errcheck, staticcheck, gosec, govet, revive's exported rule on pkg/) in
## every module of MODULES, then buf lint and buf breaking against BUF_AGAINST:
## the branch main, or on main the commit before (nothing to compare in a
## clone of depth 1: then main itself, which passes).
LINT_CONCURRENCY ?= 1
HASH := \#
BUF_AGAINST ?= .git$(HASH)$(shell \
	if [ "$$(git rev-parse --abbrev-ref HEAD 2>/dev/null)" != main ] && git rev-parse -q --verify refs/heads/main >/dev/null; then echo branch=main; \
	elif git rev-parse -q --verify 'HEAD~1^{commit}' >/dev/null; then echo ref=HEAD~1; \
	else echo branch=main; fi)
lint: $(BIN)/golangci-lint $(BIN)/buf
	@fail=0; for m in $(MODULES); do echo "== golangci-lint $$m"; \
		(cd $$m && golangci-lint run --config $(CURDIR)/.golangci.yml --concurrency $(LINT_CONCURRENCY) ./...) || fail=1; done; exit $$fail
	buf lint
	buf breaking --against '$(BUF_AGAINST)'

## build: the all-in-one binary and one binary per service, into ./bin.
build:
	$(GO) build -o $(BIN)/crdplane ./cmd/crdplane
	@for s in $(SERVICES); do $(GO) build -o $(BIN)/crdplane-$$s ./services/$$s/cmd/crdplane-$$s || exit 1; done

## run: the whole platform locally (embedded etcd, all five services in one process).
run: build
	$(BIN)/crdplane run --data-dir .run/etcd --kubeconfig .run/kubeconfig

fmt:
	gofmt -l -w $$(git ls-files '*.go' | grep -v -E '\.pb(\.gw)?\.go$$|_grpc\.pb\.go$$')

vet:
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

## test: generated code fresh, gofmt clean, vet, unit tests of every module, then the end-to-end tests.
test: check-generated
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v -E '\.pb(\.gw)?\.go$$|_grpc\.pb\.go$$')); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(MAKE) vet
	$(MAKE) test-unit
	$(MAKE) test-deploy
	$(MAKE) test-e2e

test-unit:
	@for m in $(filter-out .,$(MODULES)); do echo "== $$m"; (cd $$m && $(GO) test -count=1 ./...) || exit 1; done
	@echo "== . (root module; e2e and deploy run in their own targets)"; $(GO) test -count=1 $$($(GO) list ./... | grep -v -E '/(e2e|bench)$$|/deploy/')

KUBE_APISERVER_BIN := $(BIN)/kube-apiserver
# /version as upstream's release reports it (the module's version).
KUBE_APISERVER_LDFLAGS := -X k8s.io/component-base/version.gitVersion=v1.33.13 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=33 -X k8s.io/component-base/version.gitTreeState=clean
# The extension API server of the aggregation layer's e2e test: upstream's
# k8s.io/sample-apiserver v0.33.5, the newest the module proxy serves (its own
# module, outside go.work, pinned in e2e/sampleapiserver/go.mod), built with
# e2e/kubeapiserver's k8s.io v0.33.13 graph so the two share their compiled
# packages.
SAMPLE_APISERVER_BIN := $(BIN)/sample-apiserver

## test-e2e: start the platform on loopback and drive it with kubectl and client-go
## (TestExtensionAPIServer: behind upstream's kube-apiserver, $(KUBE_APISERVER_BIN);
## the aggregation layer's test with the real sample-apiserver behind it).
test-e2e: build $(KUBE_APISERVER_BIN) $(SAMPLE_APISERVER_BIN)
	CRDPLANE_BIN=$(BIN)/crdplane CRDPLANE_BIN_DIR=$(BIN) KUBE_APISERVER_BIN=$(KUBE_APISERVER_BIN) SAMPLE_APISERVER_BIN=$(SAMPLE_APISERVER_BIN) $(GO) test -count=1 -timeout 25m ./e2e/...

## kube-apiserver, $(KUBE_APISERVER_BIN): upstream's kube-apiserver v1.33 from the library
## (e2e/kubeapiserver: its own module, GOWORK=off), the front of the
## extension API server e2e test; rebuilt only when its module changes.
kube-apiserver: $(KUBE_APISERVER_BIN)
$(KUBE_APISERVER_BIN): e2e/kubeapiserver/go.mod e2e/kubeapiserver/go.sum e2e/kubeapiserver/main.go
	cd e2e/kubeapiserver && GOWORK=off $(GO) build -ldflags '$(KUBE_APISERVER_LDFLAGS)' -o $(KUBE_APISERVER_BIN) .

$(SAMPLE_APISERVER_BIN): e2e/sampleapiserver/go.mod e2e/sampleapiserver/go.sum e2e/sampleapiserver/main.go
	cd e2e/sampleapiserver && GOWORK=off $(GO) build -o $(SAMPLE_APISERVER_BIN) .

## bench-aggregator: issue 16's proxy overhead: a GET of a flunder through
## crdplane's aggregation layer, directly from the sample-apiserver, and
## through upstream kube-apiserver v1.33's aggregator in front of the same
## sample-apiserver, interleaved in one run; prints the medians (e2e
## TestAggregatorLatency).
.PHONY: bench-aggregator
bench-aggregator: build $(SAMPLE_APISERVER_BIN) $(KUBE_APISERVER_BIN)
	CRDPLANE_BENCH=1 CRDPLANE_BIN=$(BIN)/crdplane SAMPLE_APISERVER_BIN=$(SAMPLE_APISERVER_BIN) KUBE_APISERVER_BIN=$(KUBE_APISERVER_BIN) $(GO) test -count=1 -run TestAggregatorLatency -v ./e2e/

## test-clients: the client matrix (e2e/clients/README.md): a fresh server
## driven by client-go v0.30/v0.33/v0.37, controller-runtime v0.18/v0.25,
## kubectl 1.27/1.30/1.33 and helm v3; one PASS/FAIL line per client x
## version x check. SERVER=upstream runs it against upstream
## apiextensions-apiserver v1.33 instead; CLIENTS=regexp narrows it.
SERVER ?= crdplane
test-clients: build $(if $(filter upstream,$(SERVER)),$(BIN)/apiextensions-upstream)
	SERVER=$(SERVER) CRDPLANE_BIN=$(BIN)/crdplane UPSTREAM_BIN=$(BIN)/apiextensions-upstream GO=$(GO) e2e/clients/run.sh

## bench: Go benchmarks of the hot paths (not part of make test).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 5 ./bench/...

## fuzz: every native Go fuzz target (func FuzzXxx), one at a time, each for
## FUZZTIME (default 30s; FUZZ=regexp narrows them); prints the executions
## of each. A crasher lands in the package's testdata/fuzz/FuzzXxx/ and fails
## the run (hack/fuzz.sh). Not part of make test.
FUZZTIME ?= 30s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) hack/fuzz.sh

## fuzz-short: make fuzz at 5s a target.
fuzz-short:
	GO=$(GO) FUZZTIME=5s hack/fuzz.sh

## fuzz-ci: make fuzz-short without the targets of the gateway, registry,
## validator and storage packages (FUZZ_CI_SKIP), for CI. Their
## instrumented test binaries (900 to 1,300 packages, k8s.io/apiserver
## and apiextensions-apiserver among them) took ~700 of fuzz-short's ~880 s
## on 2 cores to build and start, and fuzzed 0 to 200 inputs in their 5 to
## 20 s: no more than their seed corpora, which make test runs. The light
## targets (~200 s) still fuzz for real; make fuzz runs every target. The
## gateway's FuzzDecodeObject took 129 s for 1,963 inputs; the decoder it
## checks is fuzzed by pkg/jsondec's FuzzUnmarshal (80,000 inputs in 9 s).
FUZZ_CI_SKIP ?= ^(FuzzProtobufBody|FuzzListOptions|FuzzRequestBody|FuzzCRDPatch|FuzzCRDValidation|FuzzValidateCRD|FuzzSelector|FuzzDecodeContinue|FuzzDecodeObject)$$
.PHONY: fuzz-ci
fuzz-ci:
	GO=$(GO) FUZZTIME=5s FUZZSKIP='$(FUZZ_CI_SKIP)' hack/fuzz.sh

clean:
	rm -rf $(BIN) .run

# ---------------------------------------------------------------------------
# Validator load test (services/validator/README.md). Not part of `make test`.
# ---------------------------------------------------------------------------
GHZ_VERSION := v0.120.0

$(BIN)/ghz:
	GOBIN=$(BIN) $(GO) install github.com/bojand/ghz/cmd/ghz@$(GHZ_VERSION)

.PHONY: loadtest-validator
## loadtest-validator: run the validator alone (--crd-dir) and load it with ghz
## (Admit of a CronTab with CEL rules), then 1 vs 2 replicas behind client-side
## round robin; prints req/s and p50/p99. DURATION=10s CONCURRENCY=50 REPLICA_CPUS=1.
loadtest-validator: $(BIN)/ghz
	$(GO) build -o $(BIN)/crdplane-validator ./services/validator/cmd/crdplane-validator
	$(GO) build -o $(BIN)/validator-load ./services/validator/cmd/validator-load
	BIN=$(BIN) ./services/validator/hack/loadtest.sh

# ---------------------------------------------------------------------------
# Deployment (deploy/README.md): images, manifests, the compose stack.
# ---------------------------------------------------------------------------
.PHONY: images test-deploy test-compose

## images: one image per service plus etcd, FROM scratch around static
## binaries built here (nothing is pulled). CRDPLANE_IMAGE_PREFIX, CRDPLANE_TAG.
images:
	deploy/images/build.sh

## test-deploy: (part of make test) every kustomize overlay builds and decodes
## strictly, workloads follow the rules, and every container's arguments (and
## the compose file's) are accepted by the binary they run.
test-deploy: build
	$(GO) build -o $(BIN)/etcd ./deploy/etcd
	CRDPLANE_BIN_DIR=$(BIN) $(GO) test -count=1 ./deploy/...

## test-compose: the docker compose stack (3-member etcd, 3 validators, 2
## converters) through kubectl, then under load with a validator stopped and
## the etcd leader killed: no acknowledged write lost. Needs docker.
test-compose: images
	deploy/compose/test/run.sh

.PHONY: soak
## soak: the soak benchmark (bench/soak, issue 19): the compose stack at
## SOAK_RATE req/s (50) of mixed CRUD, watches and malformed requests for
## SOAK_DURATION (30m), one replica of a tier killed every 2 minutes in
## rotation; checks no acknowledged write is lost and no unexpected crash,
## prints latency and errors and writes bench/soak/results-<date>.md.
## Needs docker; not part of make test.
SOAK_DURATION ?= 30m
soak: images
	SOAK_DURATION=$(SOAK_DURATION) bench/soak/run.sh

# ---------------------------------------------------------------------------
# Conformance oracle (conformance/README.md): upstream apiextensions-apiserver
# (its own Go module, outside go.work, pinned in conformance/upstream/go.mod)
# and crdplane side by side, the same requests to both.
# ---------------------------------------------------------------------------
UPSTREAM_BIN := $(BIN)/apiextensions-upstream

$(UPSTREAM_BIN): conformance/upstream/go.mod conformance/upstream/go.sum conformance/upstream/main.go
	cd conformance/upstream && GOWORK=off $(GO) build -o $(UPSTREAM_BIN) .

## conformance: run every case under conformance/cases against both servers;
## prints "N requests, N identical" and writes a diff per mismatch to
## conformance/out/. CONFORMANCE_CASES=substr narrows it.
conformance: $(UPSTREAM_BIN)
	$(GO) build -o $(BIN)/crdplane ./cmd/crdplane
	cd conformance && CRDPLANE_CONFORMANCE=1 UPSTREAM_BIN=$(UPSTREAM_BIN) CRDPLANE_BIN=$(BIN)/crdplane \
		$(GO) test -count=1 -timeout 20m -run 'TestOracle$$' -v . 2>&1 | grep -v -E '^\s+[IWE][0-9]{4} ' ; exit $${PIPESTATUS[0]}

## conformance-fuzz: the oracle's fuzz mode: the operators' objects with many
## seeded variants each (SEED, default: the time; VARIANTS, default 25). A
## difference found is reproduced with the same SEED and VARIANTS.
conformance-fuzz: $(UPSTREAM_BIN)
	$(GO) build -o $(BIN)/crdplane ./cmd/crdplane
	@seed=$${SEED:-$$(date +%s)}; echo "conformance-fuzz: SEED=$$seed VARIANTS=$${VARIANTS:-25}"; \
	cd conformance && CRDPLANE_CONFORMANCE=1 CONFORMANCE_CASES=operators/ CONFORMANCE_SEED=$$seed CONFORMANCE_VARIANTS=$${VARIANTS:-25} \
		UPSTREAM_BIN=$(UPSTREAM_BIN) CRDPLANE_BIN=$(BIN)/crdplane \
		$(GO) test -count=1 -timeout 30m -run 'TestOracle$$' -v . 2>&1 | grep -v -E '^\s+[IWE][0-9]{4} ' ; exit $${PIPESTATUS[0]}

## bench-scale: issue 17's cost curve (bench/upstream TestScale): for each
## count of SCALE_COUNTS a fresh server of each of SCALE_SERVERS, N CRDs
## created by 8 workers, time to Established, RSS and Go heap, kubectl
## api-resources, one new CRD's latency to discovery and /openapi/v3,
## delete all; a server that has not established N within SCALE_CAP is not
## run at larger counts. Results in bench/scale/results/<time>.{json,csv},
## charts drawn by bench/scale/plot. SCALE_COUNTS=100,1000,3000,10000 adds
## the largest count (crdplane alone: SCALE_SERVERS=crdplane).
SCALE_COUNTS ?= 100,1000,3000
SCALE_SERVERS ?= crdplane,upstream
SCALE_CAP ?= 10m
.PHONY: bench-scale bench-scale-race
bench-scale: $(UPSTREAM_BIN)
	$(GO) build -o $(BIN)/crdplane ./cmd/crdplane
	cd bench/upstream && CRDPLANE_SCALE=$(SCALE_COUNTS) CRDPLANE_SCALE_SERVERS=$(SCALE_SERVERS) CRDPLANE_SCALE_CAP=$(SCALE_CAP) \
		UPSTREAM_BIN=$(UPSTREAM_BIN) CRDPLANE_BIN=$(BIN)/crdplane \
		$(GO) test -count=1 -run '^TestScale$$' -v -timeout 180m . 2>&1 | grep -v -E '^\s+[IWE][0-9]{4} ' ; exit $${PIPESTATUS[0]}
	$(GO) run ./bench/scale/plot -out bench/scale/results $$(ls -t bench/scale/results/*.csv | head -1)

## bench-list: issue 17's large-object benchmark (bench/upstream
## TestLargeList): a fresh server of each of LIST_SERVERS, one CRD and
## LIST_OBJECTS custom resources of ~1 KiB; RSS and heap idle, LIST by pages
## of 500 (time, page latency, peak RSS), a resourceVersion=0 list, a watch.
## Results in bench/scale/results/list-<time>.json.
LIST_OBJECTS ?= 100000
LIST_SERVERS ?= crdplane,upstream
.PHONY: bench-list
bench-list: $(UPSTREAM_BIN)
	$(GO) build -o $(BIN)/crdplane ./cmd/crdplane
	cd bench/upstream && CRDPLANE_LIST_OBJECTS=$(LIST_OBJECTS) CRDPLANE_LIST_SERVERS=$(LIST_SERVERS) CRDPLANE_LIST_DATA=$${CRDPLANE_LIST_DATA:-/dev/shm} \
		UPSTREAM_BIN=$(UPSTREAM_BIN) CRDPLANE_BIN=$(BIN)/crdplane \
		$(GO) test -count=1 -run '^TestLargeList$$' -v -timeout 120m . 2>&1 | grep -v -E '^\s+[IWE][0-9]{4} ' ; exit $${PIPESTATUS[0]}

## bench-scale-race: e2e's TestConcurrentCRDCreates (issue 17 item 5: CRD
## creates, duplicates, name conflicts and deletes from 32 clients against
## a sequential replay) at RACE_OPS operations (make test runs 300).
RACE_OPS ?= 10000
bench-scale-race: build
	CRDPLANE_BIN=$(BIN)/crdplane CRDPLANE_RACE_OPS=$(RACE_OPS) $(GO) test -count=1 -run '^TestConcurrentCRDCreates$$' -v -timeout 60m ./e2e/

## bench-upstream: side-by-side benchmarks against upstream
## apiextensions-apiserver v1.33 (bench/upstream: both servers as processes,
## same machine, same run): LIST of 1,000 CRDs and GET of one, JSON and
## protobuf. BENCHTIME and BENCHCOUNT set the length; medians with benchstat.
BENCHTIME ?= 3s
BENCHCOUNT ?= 5
.PHONY: bench-upstream
bench-upstream: $(UPSTREAM_BIN)
	$(GO) build -o $(BIN)/crdplane ./cmd/crdplane
	cd bench/upstream && UPSTREAM_BIN=$(UPSTREAM_BIN) CRDPLANE_BIN=$(BIN)/crdplane \
		$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -timeout 60m .
