#!/usr/bin/env bash
# The Helm step of the real-kubelet suite: installs charts/longhorn-guard with Helm's Go SDK
# (helm-python-sdk, no helm binary), checks the release, upgrades it with a changed policy
# while dry-run evictions keep coming (none may fail), uninstalls it and proves nothing of
# longhorn-guard is left (e2e/cluster_helm.py says what each check does).
#
#   e2e/cluster-helm.sh KUBECONFIG IMAGE        # IMAGE: name:tag the cluster's nodes can run
#   E2E_CLUSTER_EXTRA=e2e/cluster-helm.sh make e2e-cluster    # KUBECONFIG, GUARD_IMAGE from the suite
#
# Release and namespace are longhorn-guard-helm, so the step can run beside a kustomize
# install of longhorn-guard (as in make e2e-cluster); every check looks only at its own release.
# Against a bare kube-apiserver (no Ready Node) only the objects are checked: install,
# upgrade (policy ConfigMap, kept certificate) and the leftovers after uninstall.
# Uses the chart tests' venv (make chart-test's target/chart-venv; made if missing).
# Env: KUBECTL (kubectl), E2E_CRDS (Longhorn CRDs applied if the cluster lacks them),
# HELM_E2E_RELEASE / HELM_E2E_NAMESPACE (longhorn-guard-helm), HELM_E2E_PULL_POLICY (IfNotPresent).
set -euo pipefail

KCFG=${1:-${KUBECONFIG:-}}
IMAGE=${2:-${GUARD_IMAGE:-}}
[ -n "$KCFG" ] && [ -n "$IMAGE" ] || { echo "usage: $0 KUBECONFIG IMAGE (or KUBECONFIG and GUARD_IMAGE in the environment)" >&2; exit 2; }
[ -r "$KCFG" ] || { echo "cluster-helm: kubeconfig $KCFG not readable" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
VENV=$TARGET_DIR/chart-venv
make -s -C "$ROOT" "$VENV/.installed" >/dev/null
exec env PYTHONDONTWRITEBYTECODE=1 "$VENV/bin/python" "$ROOT/e2e/cluster_helm.py" \
	--kubeconfig "$KCFG" --image "$IMAGE" \
	--release "${HELM_E2E_RELEASE:-longhorn-guard-helm}" --namespace "${HELM_E2E_NAMESPACE:-longhorn-guard-helm}" \
	--pull-policy "${HELM_E2E_PULL_POLICY:-IfNotPresent}"
