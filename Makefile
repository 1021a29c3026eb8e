# Thin wrappers over cargo and the longhorn-guard binary. `make help` lists them.
CARGO      ?= cargo
# cargo's output directory (CARGO_TARGET_DIR when set, as cargo does).
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
BIN        := $(TARGET_DIR)/debug/longhorn-guard
CERT_DIR   ?= certs/dev
LISTEN     ?= 127.0.0.1:8443
STATE      ?= demo/cluster-snapshot.yaml
POLICY     ?=
POLICY_ARG := $(if $(POLICY),--policy $(POLICY),)

.PHONY: help build test fmt lint clippy run certs manifests e2e e2e-faults lint-example gate-policy replicas-policy bench bench-https scale fuzz clean chart-test harness-test e2e-helm static image image-oci e2e-cluster longhorn-bin e2e-longhorn e2e-longhorn-multus

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## Build the binary (debug)
	$(CARGO) build --locked

# Tests run TEST_THREADS at a time whatever the core count: most of them wait on timers,
# sockets and child processes, not on a core (README, "Development").
TEST_THREADS ?= 8

test: ## Every check CI runs: fmt, clippy -D warnings, all tests
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets -- -D warnings
	$(MAKE) --no-print-directory chart-test
	$(MAKE) --no-print-directory harness-test
	$(CARGO) test --locked -- --test-threads=$(TEST_THREADS)

fmt: ## Format the code
	$(CARGO) fmt --all

lint: ## Code lint: rustfmt check and clippy -D warnings
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

clippy: lint

$(CERT_DIR)/tls.crt: | build
	$(BIN) certs --out $(CERT_DIR) --ip 127.0.0.1

certs: build ## Generate (or re-issue) development certificates in certs/dev
	$(BIN) certs --out $(CERT_DIR) --ip 127.0.0.1

run: build $(CERT_DIR)/tls.crt ## Serve on 127.0.0.1:8443 with the demo cluster snapshot
	$(BIN) serve --tls-dir $(CERT_DIR) --listen $(LISTEN) --state $(STATE) $(POLICY_ARG)

clean: ## Remove build output and generated certificates
	$(CARGO) clean
	rm -rf $(CERT_DIR)

gate-policy: build ## Re-render manifests/components/gate-policy from manifests/base/policy.yaml's gate settings
	$(BIN) gate-policy --policy manifests/base/policy.yaml > manifests/components/gate-policy/gate-policy.yaml

replicas-policy: build ## Re-render manifests/components/replicas-policy from manifests/base/policy.yaml's replicas settings
	$(BIN) replicas-policy --policy manifests/base/policy.yaml > manifests/components/replicas-policy/replicas-policy.yaml

# `longhorn-guard lint` exits 0 (warnings only), 1 (deny-level findings) or 2 (unreadable
# input). Each run below checks for the exit status the samples are meant to give, so exit 1
# with the deny policy and exit 2 on the malformed samples are expected, not failures.
lint-example: build ## Lint the shipped samples in examples/lint (warn, deny and malformed runs)
	@echo '$$ longhorn-guard lint examples/lint/manifests'
	@$(BIN) lint examples/lint/manifests; rc=$$?; echo "[exit $$rc; 0 expected: warnings only]"; test $$rc -eq 0
	@echo
	@echo '$$ longhorn-guard lint --policy examples/lint/policy-deny.yaml examples/lint/manifests'
	@$(BIN) lint --policy examples/lint/policy-deny.yaml examples/lint/manifests; rc=$$?; echo "[exit $$rc; 1 expected: deny-level findings]"; test $$rc -eq 1
	@echo
	@echo '$$ longhorn-guard lint examples/lint/malformed'
	@$(BIN) lint examples/lint/malformed; rc=$$?; echo "[exit $$rc; 2 expected: unreadable input]"; test $$rc -eq 2

# 250,000 cases per target x 5 targets = 1,250,000 inputs (docs/server.md, "Fuzzing").
FUZZ_CASES ?= 250000
fuzz: ## Fuzz every parser and decision: FUZZ_CASES cases per target (release build)
	FUZZ_CASES=$(FUZZ_CASES) $(CARGO) test --release --locked --test it fuzz:: -- --nocapture

bench: ## Decision latency and view memory on a synthetic cluster (release build)
	$(CARGO) bench --locked --bench decide

bench-https: ## HTTPS req/s of serve --state (60 nodes, 3,000 volumes) vs a static rustls server, wrk -c64 (docs/scale.md)
	$(CARGO) build --locked --release --bin longhorn-guard --example gen_snapshot --example static_server
	LONGHORN_GUARD_BIN=$(abspath $(TARGET_DIR)/release/longhorn-guard) BENCH_EXAMPLES=$(abspath $(TARGET_DIR)/release/examples) benches/https.sh

# --- install / e2e (docs/install.md; the suites: e2e/TESTING.md) ---
KUBECTL    ?= kubectl
OUT_DIR    ?= _out
DEV_TLS    := manifests/overlays/dev-certs/tls
E2E_BIN    ?= $(abspath $(BIN))

manifests: $(CERT_DIR)/tls.crt ## Render _out/manifests.yaml (all objects + TLS Secret + caBundle from certs/dev)
	mkdir -p $(DEV_TLS) $(OUT_DIR)
	printf '*\n' > $(OUT_DIR)/.gitignore
	cp $(CERT_DIR)/ca.crt $(CERT_DIR)/tls.crt $(CERT_DIR)/tls.key $(DEV_TLS)/
	$(KUBECTL) kustomize manifests/overlays/dev-certs > $(OUT_DIR)/manifests.yaml
	@echo "wrote $(OUT_DIR)/manifests.yaml; install: kubectl apply -f $(OUT_DIR)/manifests.yaml"

e2e: build ## End-to-end suite: the cluster KUBECONFIG names, or with KUBE_APISERVER=... an API server of its own (e2e/TESTING.md); E2E_FAULTS_CLUSTER=1 adds e2e-faults
	LONGHORN_GUARD_BIN=$(E2E_BIN) e2e/run.sh
	if [ "$${E2E_FAULTS_CLUSTER:-0}" = 1 ]; then LONGHORN_GUARD_BIN=$(E2E_BIN) e2e/faults-cluster.sh; fi

e2e-faults: build ## etcd faults: 3 etcd members, 2 API servers, 2 guards; partition, leader and quorum loss, API-server failover (root; KUBE_APISERVER, ETCD=etcd 3.5.13+; e2e/TESTING.md)
	LONGHORN_GUARD_BIN=$(E2E_BIN) e2e/faults-cluster.sh

scale: ## Scale harness against the cluster KUBECONFIG names: SCALE_NODES, SCALE_VOLUMES (docs/scale.md)
	$(CARGO) build --locked --release --bin longhorn-guard --example scale_load --example admission_load
	LONGHORN_GUARD_BIN=$(abspath $(TARGET_DIR)/release/longhorn-guard) SCALE_EXAMPLES=$(abspath $(TARGET_DIR)/release/examples) e2e/scale.sh

# --- Helm chart (charts/longhorn-guard; docs/install.md, "Helm") ---
# Helm's Go SDK from PyPI (helm-python-sdk, libhelm_c): no helm binary. The venv lives in
# target/ and is made again only when tests/chart/requirements.txt changes.
PYTHON     ?= python3
CHART_VENV := $(TARGET_DIR)/chart-venv

$(CHART_VENV)/.installed: tests/chart/requirements.txt
	rm -rf $(CHART_VENV)
	$(PYTHON) -m venv $(CHART_VENV)
	$(CHART_VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/chart/requirements.txt
	touch $@

# Install, upgrade, uninstall for real with the SDK (e2e/cluster-helm.sh; e2e/TESTING.md).
e2e-helm: $(CHART_VENV)/.installed ## Helm install/upgrade/uninstall against the cluster KUBECONFIG names, with GUARD_IMAGE
	e2e/cluster-helm.sh "$(KUBECONFIG)" "$(GUARD_IMAGE)"

# The harnesses' own logic that needs no cluster: window.py's data check, sampler and figures on
# real snapshots (the write through Longhorn's engine only where its binary is: WINDOW_LONGHORN).
harness-test: ## Unit tests of the e2e harnesses' Python (part of make test)
	$(PYTHON) -m unittest discover -s e2e/longhorn -p '*_test.py'

chart-test: $(CHART_VENV)/.installed ## Render and lint the Helm chart, compare it with kustomize (part of make test)
	PYTHONDONTWRITEBYTECODE=1 $(CHART_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/chart

# --- image and the real-kubelet suite (docs/install.md, "Image"; e2e/TESTING.md, "Real-kubelet suite") ---
# A static glibc binary (no musl target needed): runs on scratch and distroless/static.
STATIC_TARGET ?= $(shell rustc -vV | sed -n 's/^host: //p')
STATIC_BIN    := $(TARGET_DIR)/$(STATIC_TARGET)/release/longhorn-guard
IMAGE         ?= ghcr.io/longhorn-guard/longhorn-guard:0.1.0
IMAGE_TAR     ?= $(OUT_DIR)/images/longhorn-guard.tar
# Trust roots, as distroless/static ships them (a kubeconfig without certificate-authority).
CA_CERTS      ?= /etc/ssl/certs/ca-certificates.crt
ENGINE        ?= $(firstword $(foreach e,docker podman buildah,$(if $(shell $(e) info >/dev/null 2>&1 && echo y),$(e))))

static: ## Release binary linked statically (glibc, +crt-static): $(STATIC_BIN)
	RUSTFLAGS="-C target-feature=+crt-static" $(CARGO) build --release --locked --target $(STATIC_TARGET) --bin longhorn-guard

image: ## Build IMAGE with the Dockerfile and a container engine (docker, podman or buildah) if one answers
	@if [ -z "$(ENGINE)" ]; then echo "make image: no container engine answers (docker/podman/buildah info failed); make image-oci writes the same image without one"; exit 1; fi
	$(if $(filter buildah,$(ENGINE)),buildah bud,$(ENGINE) build) -t $(IMAGE) .

image-oci: static ## Write IMAGE as an OCI/docker-save tar without an engine or registry: $(IMAGE_TAR)
	mkdir -p $(dir $(IMAGE_TAR))
	printf '*\n' > $(OUT_DIR)/.gitignore
	$(PYTHON) image/oci-image.py --out $(IMAGE_TAR) --name $(IMAGE) \
	  --file $(STATIC_BIN):/usr/local/bin/longhorn-guard:0755 --nonroot-passwd --dir /tmp:1777 \
	  $(if $(wildcard $(CA_CERTS)),--file $(CA_CERTS):/etc/ssl/certs/ca-certificates.crt:0644) \
	  --user 65532:65532 --expose 8443/tcp --entrypoint '["/usr/local/bin/longhorn-guard"]' \
	  --cmd '["serve","--tls-dir","/etc/longhorn-guard/tls","--listen","0.0.0.0:8443"]'

# Root, and the binaries e2e/TESTING.md lists: KUBE_BIN_DIR, ETCD, CONTAINERD_BIN_DIR, RUNC.
e2e-cluster: image-oci ## Real-kubelet suite: a throw-away 2-node cluster, install, drain/rollout/gate checks (e2e/cluster.sh)
	GUARD_IMAGE=$(IMAGE) GUARD_IMAGE_TAR=$(abspath $(IMAGE_TAR)) e2e/cluster.sh run

# --- real Longhorn (e2e/TESTING.md, "Real Longhorn") ---
# Source trees the user provides (git archive of each public repository at its tag); nothing is
# downloaded, nothing built is committed.
LONGHORN_BIN_DIR ?= $(abspath $(OUT_DIR)/longhorn-bin)

longhorn-bin: ## Build Longhorn (the version of the LONGHORN_*_SRC trees) and Multus v3.9.3/v4.2.4 from source trees into LONGHORN_BIN_DIR (e2e/longhorn/build.sh)
	e2e/longhorn/build.sh $(LONGHORN_BIN_DIR)

# Root; the e2e-cluster settings, plus LONGHORN_BIN_DIR (make longhorn-bin) and LONGHORN_SRC.
e2e-longhorn: image-oci ## Real Longhorn (the version of LONGHORN_SRC, v1.10-v1.12) on the real-kubelet cluster (3 nodes): scenarios a-f of e2e/longhorn/checks.sh (and u, Longhorn upgraded under the guard, with LONGHORN_UPGRADE_SRC and LONGHORN_UPGRADE_BIN_DIR)
	GUARD_IMAGE=$(IMAGE) GUARD_IMAGE_TAR=$(abspath $(IMAGE_TAR)) LONGHORN_BIN_DIR=$(LONGHORN_BIN_DIR) \
	  E2E_CLUSTER_SUITE=longhorn E2E_MULTUS= e2e/cluster.sh run

# Root; e2e-longhorn's settings, plus E2E_MULTUS (v3.9.3 or v4.2.4) and MULTUS_SRC (multus-cni at
# that tag). F_STALL_S: how long the raced rebuild is sampled without the gate.
E2E_MULTUS ?= v4.2.4
e2e-longhorn-multus: image-oci ## The seed's race with real Multus E2E_MULTUS on real Longhorn: stall without the gate, rebuild with it (e2e/longhorn/seedrace.sh)
	GUARD_IMAGE=$(IMAGE) GUARD_IMAGE_TAR=$(abspath $(IMAGE_TAR)) LONGHORN_BIN_DIR=$(LONGHORN_BIN_DIR) \
	  E2E_CLUSTER_SUITE=longhorn E2E_MULTUS=$(E2E_MULTUS) e2e/cluster.sh run
