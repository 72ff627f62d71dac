# dsguard — run `make help` for the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# VERSION is the git tag's form (v1.2.3); what a binary says, the image's tag
# and the chart's version and appVersion drop the "v" (1.2.3), as GoReleaser's
# {{ .Version }} and Helm do: one convention, held by test/chart's
# TestVersion_OneConvention.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
PLAIN_VERSION := $(patsubst v%,%,$(VERSION))
BIN_DIR ?= bin
GO ?= go
LDFLAGS := -s -w -X main.version=$(PLAIN_VERSION)
# TAGS are Go build tags for `make build`. The container image's binary is
# built with IMAGE_TAGS: norender leaves Helm's SDK out (the webhook never
# renders charts; the release binaries, which `dsguard check` users install,
# keep it). The Dockerfile and test/e2e/framework.ImageBuildTags say the same.
TAGS ?=
IMAGE_TAGS := norender
export CGO_ENABLED ?= 0

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n\n"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/dsguard (static, version stamped)
	$(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/dsguard ./cmd/dsguard

# Three steps run in the background (hack/background.sh), niced, beside the
# stages that leave cores idle, and are joined before what needs them:
# - the tools build (hack/tools.sh: Kubernetes, etcd, helm, cert-manager, the
#   node's runtime, promtool), the longest step on a cold machine, right after go vet,
#   whose compiled packages it shares, beside the unit tests and CEL cost;
# - fuzzing and the race detector's unit tests (each compiles every
#   dependency again, instrumented), beside the chart and e2e stages, which
#   mostly wait on the control plane;
# - the release checks (release-test: GoReleaser's check and snapshot, and
#   `make image` built twice), beside the real-node and fault e2e, the only
#   stages whose idle cores nothing else takes: beside chart and e2e they
#   would only push fuzzing and race further past the end of e2e.
# The fault suite (leader election, restarts, reloads, churn under load) runs
# once, last, against a dsguard built with the race detector: it proves both
# the faults survived and that no race occurs while they happen.
.PHONY: test
test: ## Run every test CI runs: vet, gofmt, actionlint, unit, CEL cost, Kubernetes binaries, chart, e2e, fuzz (20,000 inputs per target) and the race detector's unit tests (beside chart and e2e), real-node e2e, the fault e2e against a -race dsguard, GoReleaser's check and snapshot and make image's reproducibility (beside those two); prints each stage's duration
	@start=$$(date +%s); \
	export DSGUARD_BACKGROUND=$$(mktemp -d "$${TMPDIR:-/tmp}/dsguard-background.XXXXXX"); \
	export DSGUARD_STAGES=$$DSGUARD_BACKGROUND/stages; \
	trap 'hack/stage.sh --table "$$DSGUARD_STAGES"; hack/background.sh stop-all' EXIT INT TERM; \
	hack/stage.sh "gofmt" hack/check-gofmt.sh && \
	hack/stage.sh "go vet" $(GO) vet ./... && \
	hack/stage.sh "GitHub workflows (actionlint)" hack/actionlint.sh && \
	hack/background.sh start tools sh -c 'hack/tools.sh --node --promtool && hack/debian-package.sh chromium chromium' && \
	hack/stage.sh "unit tests" $(GO) test -count=1 $(UNIT_PKGS) && \
	hack/stage.sh "vet and unit tests of the image's build (-tags $(IMAGE_TAGS))" $(MAKE) -s unit-image && \
	hack/stage.sh "CEL cost of the generated policies (worst cases at 1.5 MiB, $(CEL_COST_MARGIN) of the API server's limits)" $(MAKE) -s cel-cost && \
	hack/stage.sh "Kubernetes binaries, the node's runtime and Chromium (started after go vet beside the stages since)" hack/background.sh join tools && \
	hack/background.sh start fuzz-race $(MAKE) -s fuzz-and-race && \
	hack/stage.sh "chart (helm 3 + helm 4 lint, golden templates, schema, Dockerfile, promtool tests of the alerts)" $(MAKE) -s chart-test && \
	hack/stage.sh "e2e (real kube-apiserver + kubectl; the fault suite runs last, against a -race dsguard)" $(MAKE) -s e2e E2E_PKGS="$(E2E_BUT_FAULTS)" && \
	hack/stage.sh "cosign, fuzz and the race detector's unit tests (started after the tools, beside chart and e2e)" hack/background.sh join fuzz-race && \
	hack/background.sh start release $(MAKE) -s release-test && \
	hack/stage.sh "e2e on a real node (kubelet, containerd, helm install of the image)" $(MAKE) -s e2e-node && \
	hack/stage.sh "fault e2e ($(RACE_E2E_PKGS)) against a dsguard built with -race" $(MAKE) -s race-e2e && \
	hack/stage.sh "GoReleaser check and snapshot, make image twice (started after fuzz and race, beside the real-node and fault e2e)" hack/background.sh join release; \
	rc=$$?; echo "==> make test: $$([ $$rc = 0 ] && echo ok || echo FAILED) in $$(( $$(date +%s) - start ))s"; exit $$rc

# E2E_PKGS are the packages `make e2e` runs; make test leaves the fault suite
# to race-e2e.
E2E_PKGS ?= ./test/e2e/...
E2E_BUT_FAULTS = $(shell $(GO) list ./test/e2e/... | grep -v -e '/test/e2e/faults$$')

# Fuzzing in `make test` is a short run per target, bounded by count (go
# test -fuzztime Nx), so that a loaded machine tries as many inputs as an idle
# one instead of fewer; `make fuzz` runs longer, by time.
TEST_FUZZTIME ?= 20000x

# fuzz-and-race is the step make test runs in the background beside chart
# and e2e: cosign, which only the real-node e2e after them needs (built with
# the other tools, it took half a core from the wrapper build that chart and
# e2e wait for: 560 s beside its 893 s on a cold run), fuzzing, the race
# detector's unit tests, then the compile of the
# -race dsguard that race-e2e runs (the e2e framework's build then only
# links it) and of the arm64 dsguard e2e-node publishes, each a stage.
.PHONY: fuzz-and-race
fuzz-and-race:
	hack/stage.sh "cosign for the real-node e2e's release test (built from its own module)" hack/tools.sh --cosign && \
	hack/stage.sh "fuzz (every target $(TEST_FUZZTIME))" env FUZZTIME=$(TEST_FUZZTIME) hack/fuzz.sh && \
	hack/stage.sh "race detector (unit tests of $(RACE_PKGS))" $(MAKE) -s race && \
	hack/stage.sh "compile the -race dsguard for race-e2e" env CGO_ENABLED=1 $(GO) build -race -o /dev/null ./cmd/dsguard && \
	hack/stage.sh "compile the image's dsguard for linux/arm64 (the published release's index in e2e-node)" \
	  env GOOS=linux GOARCH=arm64 $(GO) build -tags '$(IMAGE_TAGS)' -o /dev/null ./cmd/dsguard

# release-test is the step make test runs in the background beside the
# real-node and fault e2e, so that what a tag runs has run before the tag:
# GoReleaser and cyclonedx-gomod built (hack/tools.sh), `goreleaser check`,
# then the image built twice by `make image` (image-reproducible) and a
# snapshot of the tag's release from .goreleaser.yaml as it is: the six
# binaries (-trimpath, which nothing else compiles with but `make build`:
# every dependency once more per platform on a cold build cache), archives,
# checksums, SBOMs, krew manifest and Homebrew cask, into dist/ (what `make
# clean` removes). Skipped, as offline: publishing (the GitHub release;
# --snapshot skips it anyway) and signing (keyless in the release workflow,
# by its OIDC token; the configuration signs nothing itself today, cosign
# signs the image and chart in hack/release/publish.sh, which the real-node
# e2e runs against a registry of its own). Docker is not used. The image
# index of `make release-snapshot`, built twice, is left to that target:
# two more -trimpath compiles, and the real-node e2e builds and publishes an
# index already.
.PHONY: release-test
release-test:
	hack/stage.sh "GoReleaser and cyclonedx-gomod (built from their own modules)" $(WITH_RELEASE_TOOLS) true && \
	hack/stage.sh "goreleaser check" $(WITH_RELEASE_TOOLS) goreleaser check && \
	hack/stage.sh "make image twice, from two copies of the source (image-reproducible)" $(MAKE) -s image-reproducible && \
	hack/stage.sh "goreleaser release --snapshot (six platforms, archives, SBOMs, krew, Homebrew)" \
	  $(WITH_RELEASE_TOOLS) goreleaser release --snapshot --clean --skip=publish,sign && \
	hack/stage.sh "the snapshot's artefacts (completions, checksums, krew, Homebrew, notes)" hack/release/check-dist.sh

# test/chart needs the helm binaries of hack/tools.sh: it runs after them (chart-test).
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -e /test/e2e -e /test/chart)

.PHONY: unit
unit: ## Run the unit tests only (no control plane)
	$(GO) test $(UNIT_PKGS)

# The margin is costMargin in vap/cost_test.go; it is named here for the log.
CEL_COST_MARGIN := 90 %

.PHONY: cel-cost
cel-cost: ## Measure every generated ValidatingAdmissionPolicy program's runtime cost on the worst cases; fails above 90 % of a limit
	$(GO) test -count=1 -timeout 30m -run '^TestRender_CostStaysUnderTheAPIServersLimits$$' ./vap/ -args -vap.cost

# The race detector needs cgo (gcc): only the race target turns it on. Its
# packages are those that run goroutines (informers, work queues, the heavy
# lane, certificate rotation, the audit) and, end to end, the fault suite
# (leader election, API server restarts, policy reloads and node churn under
# request load) against a dsguard built with -race.
RACE_PKGS ?= ./webhook/ ./clusterview/ ./audit/ ./certs/ ./metricsauth/ ./coverage/ ./vapsync/
RACE_E2E_PKGS ?= ./test/e2e/faults/

.PHONY: race
race: ## Run the concurrent packages' unit tests under the race detector (cgo on for this target only)
	CGO_ENABLED=1 $(GO) test -race -count=1 $(RACE_PKGS)

# The fault suite against a dsguard built with -race: leader election, API
# server restarts, policy reloads, rolling restarts and node churn under
# request load, where dsguard's goroutines meet. A race in dsguard prints its
# report and makes dsguard exit 66, which fails the suite. The test binary
# itself is not instrumented: it only drives kubectl and HTTP clients, and
# instrumenting it would compile every dependency a second time.
.PHONY: race-e2e
race-e2e: tools ## Run the fault e2e suite against a dsguard built with -race
	DSGUARD_E2E_RACE=1 hack/run-isolated.sh $(GO) test -count=1 -p 1 -timeout 30m -v -shuffle=$(E2E_SHUFFLE) $(RACE_E2E_PKGS) 2>&1 | hack/e2e-summary.sh

.PHONY: unit-image
unit-image: ## Vet and unit-test the packages the image's build tags change (IMAGE_TAGS); build the offline dsguard of make demo
	$(GO) vet -tags '$(IMAGE_TAGS)' ./render/ ./cmd/dsguard/
	$(GO) test -count=1 -tags '$(IMAGE_TAGS)' ./render/ ./cmd/dsguard/
	@# The offline build make demo shows its first verdicts with (hack/demo.sh).
	$(GO) build -tags 'offline,$(IMAGE_TAGS)' -o /dev/null ./cmd/dsguard/

# The e2e tests of a package share one cluster and run in a new order each
# time (-shuffle), so that none leans on what another left behind; the
# summary prints each package's seed, and E2E_SHUFFLE=<seed> replays it.
E2E_SHUFFLE ?= on

.PHONY: e2e
e2e: tools browser ## Run the end-to-end suite against a real kube-apiserver with the real kubectl, tests in a shuffled order (E2E_SHUFFLE=<seed> replays one)
	hack/run-isolated.sh $(GO) test -count=1 -p 1 -timeout 20m -v -shuffle=$(E2E_SHUFFLE) $(E2E_PKGS) 2>&1 | hack/e2e-summary.sh

# The coverage map's e2e opens the page in Debian's Chromium.
.PHONY: browser
browser:
	@hack/debian-package.sh chromium chromium

# The long differential: 10,000 coverage scenarios against the real
# DaemonSet controller, each followed by two rounds of node changes (taints
# added and lifted, labels changed, nodes added and removed). Not part of
# `make test`; docs/performance.md records a run. DSGUARD_DIFF_SEED replays one.
LONG_SCENARIOS ?= 10000
LONG_NODE_ROUNDS ?= 2

.PHONY: e2e-long
e2e-long: tools ## The long coverage differential: LONG_SCENARIOS (10,000) scenarios with LONG_NODE_ROUNDS (2) node-change rounds each, against the real DaemonSet controller
	DSGUARD_DIFF_SCENARIOS=$(LONG_SCENARIOS) DSGUARD_DIFF_NODE_ROUNDS=$(LONG_NODE_ROUNDS) hack/run-isolated.sh $(GO) test -count=1 -timeout 180m -v -run '^TestCoverageMatchesDaemonSetController$$' ./test/e2e/coverage/ 2>&1 | hack/e2e-summary.sh

.PHONY: e2e-node
e2e-node: ## As root: the real-node e2e (kubelet, containerd, runc, bridge CNI): helm install of the image built here, and of a release published to a registry in the test
	hack/tools.sh --node --cosign
	trap 'hack/node-cleanup.sh; rm -rf "$${TMPDIR:-/tmp}"/dsguard-e2e-node-images-*' EXIT INT TERM; \
	DSGUARD_E2E_NODE=1 hack/run-isolated.sh $(GO) test -count=1 -p 1 -timeout 20m -v -shuffle=$(E2E_SHUFFLE) ./test/e2e/node/ 2>&1 | hack/e2e-summary.sh

.PHONY: chart-test
chart-test: tools ## Lint and render the chart with helm 3 and helm 4 (golden files; UPDATE=1 rewrites them); promtool tests of the alerts
	$(GO) test -count=1 -timeout 20m ./test/chart/ $(if $(UPDATE),-run TestTemplate_Golden -args -update)

.PHONY: chart-docs
chart-docs: ## Regenerate the values table of charts/dsguard/README.md from values.yaml
	$(GO) run ./hack/chart-readme -chart charts/dsguard

# The demo needs only a control plane without controllers, and helm (v3),
# which renders the chart's webhook configuration the demo installs: it
# builds these and nothing else (helm4, cert-manager, the controllers and
# the node's binaries are for the tests).
DEMO_TOOLS := kube-apiserver,kubectl,etcd,helm

.PHONY: demo
demo: ## Show dsguard's offline verdicts while a real control plane builds, then walk through kubectl being rejected and warned by dsguard serving
	@GO=$(GO) hack/demo.sh $(DEMO_TOOLS)

.PHONY: bench
bench: ## Run the benchmarks (engine: target <= 5us and <= 20 allocs per DaemonSet)
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: security-bench
security-bench: ## Abuse harnesses: the 10,000-term DaemonSet at 5,000 nodes (target < 1 s) and a dry-run flood of 8 clients (compliant p99 target < 100 ms)
	$(GO) test -run '^$$' -bench 'WorstCaseAffinity|DryRunFlood' -benchtime 200x ./webhook/

.PHONY: bench-load
bench-load: tools ## Load harness: real kube-apiserver, NODES Nodes (default 5000), dsguard beside a no-op webhook under node churn (LOAD_FLAGS: see go run ./test/load -h)
	hack/run-isolated.sh $(GO) run ./test/load -nodes $(NODES) $(LOAD_FLAGS)

NODES ?= 5000

.PHONY: fuzz
fuzz: ## Run every fuzz target (policy parser, manifest decoder, admission handler, ...) for FUZZTIME each, default 1m
	FUZZTIME=$${FUZZTIME:-1m} hack/fuzz.sh

.PHONY: soak
soak: tools ## Run the fault-injection soak at full length (SOAK, default 10m): requests, node churn, policy reloads, a certificate rotation
	hack/run-isolated.sh $(GO) test -count=1 -p 1 -timeout 30m -v -run '^TestSoak$$' ./test/e2e/faults/ -args -soak=$${SOAK:-10m} 2>&1 | hack/e2e-summary.sh

.PHONY: lint
lint: ## gofmt, go vet and actionlint
	hack/check-gofmt.sh
	hack/actionlint.sh
	$(GO) vet ./...

.PHONY: docs
docs: ## Regenerate docs/rules.md from the rule registry
	$(GO) run ./cmd/dsguard rules -o markdown > docs/rules.md

.PHONY: tools
tools: ## Build kube-apiserver, kube-controller-manager, kubectl, etcd, helm, helm4 and cert-manager into the per-user cache
	hack/tools.sh

# The image, without a Docker engine: the static binary on an empty base as
# an OCI image layout and an OCI archive of it (`ctr images import`, `docker
# load`, `skopeo copy oci-archive:...`). The same source gives the same digest.
IMAGE_REPO ?= ghcr.io/dsguard/dsguard
IMAGE_DIR ?= $(BIN_DIR)/image

.PHONY: image
image: ## Build the container image as an OCI layout and archive in bin/image (no Docker engine; reproducible)
	$(MAKE) -s build BIN_DIR=$(IMAGE_DIR) GOOS=linux TAGS=$(IMAGE_TAGS)
	$(GO) run ./hack/image -binary $(IMAGE_DIR)/dsguard -path /dsguard -user 65532:65532 -ca-certificates -cmd serve \
	  -name $(IMAGE_REPO):$(PLAIN_VERSION) -version $(PLAIN_VERSION) -oci-layout $(IMAGE_DIR)/oci -archive $(IMAGE_DIR)/dsguard.oci.tar

# The release's image: dsguard for each of RELEASE_ARCHES as one OCI image
# index (a node pulls the image of its own architecture). Each binary is
# named by its platform and hack/image checks its ELF header agrees.
RELEASE_ARCHES := amd64 arm64
INDEX_DIR ?= $(BIN_DIR)/image-index
INDEX_BINARIES = $(foreach a,$(RELEASE_ARCHES),-binary linux/$(a)=$(INDEX_DIR)/linux-$(a)/dsguard)

.PHONY: image-binaries
image-binaries:
	@for a in $(RELEASE_ARCHES); do $(MAKE) -s build BIN_DIR=$(INDEX_DIR)/linux-$$a GOOS=linux GOARCH=$$a TAGS=$(IMAGE_TAGS) || exit 1; done

# The SBOM attested to the image describes the image's binary (-tags norender, no Helm), read from the
# module data Go embeds in it, not the CLI of the release archives.
.PHONY: image-sboms
image-sboms: image-binaries
	@for a in $(RELEASE_ARCHES); do \
	  $(WITH_RELEASE_TOOLS) cyclonedx-gomod bin -json -version v$(PLAIN_VERSION) \
	    -output $(INDEX_DIR)/linux-$$a/dsguard.cdx.json $(INDEX_DIR)/linux-$$a/dsguard || exit 1; done

.PHONY: image-index
image-index: image-binaries ## Build the image for linux/amd64 and linux/arm64 as one OCI image index and archive in bin/image-index (no Docker engine)
	$(GO) run ./hack/image $(INDEX_BINARIES) -path /dsguard -user 65532:65532 -ca-certificates -cmd serve \
	  -name $(IMAGE_REPO):$(PLAIN_VERSION) -version $(PLAIN_VERSION) -oci-layout $(INDEX_DIR)/oci -archive $(INDEX_DIR)/dsguard.oci.tar

# What the release workflow runs after GoReleaser: the image index and the
# chart pushed to REGISTRY, signed with the cosign the real-node e2e uses
# (keyless in the workflow; PUBLISH_FLAGS can give --key FILE), GoReleaser's
# Linux SBOMs attested to the image.
REGISTRY ?= ghcr.io/dsguard

.PHONY: release-publish
release-publish: image-sboms ## Push the image index and chart (oci://REGISTRY/charts/dsguard) for VERSION, signed with cosign, the SBOMs of the image's own binaries attested
	cosign=$$(hack/tools.sh --only helm --print-cosign) && helm=$$(hack/tools.sh --only helm --print-dir) && \
	PATH=$$(dirname $$cosign):$$helm:$$PATH \
	  hack/release/publish.sh --registry $(REGISTRY) --version $(PLAIN_VERSION) \
	  $(foreach a,$(RELEASE_ARCHES),--binary linux/$(a)=$(INDEX_DIR)/linux-$(a)/dsguard) \
	  $(foreach a,$(RELEASE_ARCHES),--sbom $(INDEX_DIR)/linux-$(a)/dsguard.cdx.json) $(PUBLISH_FLAGS)

# In make test's release step (release-test): `make build` compiles with
# -trimpath, as nothing else in make test does but the GoReleaser snapshot
# after it, so on a cold build cache this compiles every dependency once more
# (minutes; most of them then serve the snapshot's linux/amd64 build); with a
# warm one it takes under a minute.
.PHONY: image-reproducible
image-reproducible: ## Build the image twice with `make image` from two copies of the source (other paths, TMPDIR, umask, time zone, file times, a later second); fails unless binary, digest and archive agree
	$(GO) test -count=1 -v -timeout 30m -run '^TestMakeImage_SameDigestWhereverAndWheneverBuilt$$' ./hack/image/ -args -image.make

.PHONY: docker-image
docker-image: ## Build the same image with a Docker engine (Dockerfile)
	docker build --build-arg VERSION=$(PLAIN_VERSION) -t $(IMAGE_REPO):$(PLAIN_VERSION) .

.PHONY: bench-check-dump
bench-check-dump: ## dsguard check --nodes on a cluster dump of NODES nodes (default 5000) with PODS Pods each (default 30), FORMAT yaml or json, beside merely parsing it
	hack/check-dump.sh $(NODES) $${PODS:-30} $${FORMAT:-yaml}

# The offline reader at 65,000 real-size nodes: the API server's one-line
# NodeList (managedFields kept), kubectl's indented -o json, and the same
# nodes stripped to names, labels and taints; each against its target.
.PHONY: bench-check-nodes
bench-check-nodes: ## dsguard check --nodes on 65,000 nodes as the API server, kubectl -o json and stripped lists give them, beside merely parsing each (targets: 5 s, 5 s, 1 s; 256 MiB)
	hack/check-dump.sh 65000 0 json api 5 256
	hack/check-dump.sh 65000 0 json kubectl 5 256
	hack/check-dump.sh 65000 0 json stripped 1 256

.PHONY: bench-check-memory
bench-check-memory: ## Peak RSS of dsguard check on a generated manifest of MB megabytes (default 50), per output FORMAT (default all)
	hack/check-memory.sh $${MB:-50} $(FORMAT)

# GoReleaser and the SBOM tool its configuration runs (cyclonedx-gomod), built
# by hack/tools.sh from the Go module proxy into the per-user tool cache, keyed
# by version (GORELEASER_VERSION and CYCLONEDX_GOMOD_VERSION there), like the
# other tools. hack/release/with-tools.sh runs a command with both on PATH.
WITH_RELEASE_TOOLS := hack/release/with-tools.sh

.PHONY: release-tools
release-tools: ## Build GoReleaser and cyclonedx-gomod into the per-user tool cache
	@$(WITH_RELEASE_TOOLS) true

.PHONY: release-check
release-check: ## Validate .goreleaser.yaml with GoReleaser's own check
	$(WITH_RELEASE_TOOLS) goreleaser check

.PHONY: release
release: ## Publish the tag's GitHub release with GoReleaser, its notes the tag's CHANGELOG.md section (the release workflow runs this; GITHUB_TOKEN, KREW_INDEX_TOKEN, HOMEBREW_TAP_TOKEN)
	mkdir -p $(BIN_DIR) && hack/release/notes.sh $(PLAIN_VERSION) > $(BIN_DIR)/release-notes.md
	cosign=$$(hack/tools.sh --only helm --print-cosign) && PATH=$$(dirname $$cosign):$$PATH \
	  $(WITH_RELEASE_TOOLS) goreleaser release --clean --release-notes $(BIN_DIR)/release-notes.md

.PHONY: release-snapshot
release-snapshot: ## Build every release artefact into dist/ without publishing (archives, checksums, SBOMs, krew manifest, Homebrew cask, the image index built twice to the same digest)
	$(WITH_RELEASE_TOOLS) goreleaser release --snapshot --clean --skip=publish
	hack/release/snapshot-image.sh dist/image

.PHONY: clean
clean: ## Remove build output
	rm -rf $(BIN_DIR) dist
