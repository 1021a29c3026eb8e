# `longhorn-guard check drain NODE`'s doctor against the live API server (issue 25). Sourced by
# e2e/run.sh, which provides k, run, check, has, log, $BIN, $LH_NS, $IM3.
#
# On node-3 (cordoned; its only replica, of vol-healthy, is protected on node-1 and node-2):
# Longhorn's budget for its instance manager $IM3 (the fixture's shape, minAvailable 1 over the
# instance-manager pod's labels), stale since nothing on node-3 needs it; an application budget
# at 0 over a running pod; a DaemonSet pod and an emptyDir pod. A bare API server has no
# disruption controller or kubelet: the budgets' and pods' status is written with
# --subresource=status, as those would.

DOCTOR_APP=e2e-doctor-web
DOCTOR_LABEL=longhorn-guard-e2e-doctor=true

# finding MARK ID TEXT: a line of the doctor's table with MARK (BLOCK, flag, ok) and ID that
# holds TEXT.
finding() { grep -F -- "$3" <<<"$OUT" | grep -qE "^$1 +$2 "; }

# doctor_budgets IM LABELS APP: Longhorn's budget for instance manager IM in $LH_NS, in the
# shape of shared/fixtures/longhorn/pdb-instance-manager.json (minAvailable 1 over LABELS, a
# JSON object), and an application budget (minAvailable 1 over app=APP) in default.
doctor_budgets() {
	k create -f - >/dev/null <<-EOF
		{"apiVersion": "v1", "kind": "List", "items": [
		 {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
		  "metadata": {"name": "$1", "namespace": "$LH_NS", "labels": {"longhorn-guard-e2e": "true", "longhorn-guard-e2e-doctor": "true"}},
		  "spec": {"minAvailable": 1, "selector": {"matchLabels": $2}}},
		 {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
		  "metadata": {"name": "$3", "namespace": "default", "labels": {"longhorn-guard-e2e": "true", "longhorn-guard-e2e-doctor": "true"}},
		  "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "$3"}}}}
		]}
	EOF
}

doctor_checks() {
	log "check drain node-3: the drain doctor names each blocker with its remedy"
	local uid=00000000-0000-4000-8000-000000000025 labels
	labels=$(k -n "$LH_NS" get pod "$IM3" -o jsonpath='{.metadata.labels}')
	doctor_budgets "$IM3" "$labels" "$DOCTOR_APP"
	k create -f - >/dev/null <<-EOF
		{"apiVersion": "v1", "kind": "List", "items": [
		 {"apiVersion": "v1", "kind": "Pod",
		  "metadata": {"name": "$DOCTOR_APP-6d4cf56db6-x7k2p", "namespace": "default",
		   "labels": {"app": "$DOCTOR_APP", "longhorn-guard-e2e": "true", "longhorn-guard-e2e-doctor": "true"},
		   "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "$DOCTOR_APP-6d4cf56db6", "uid": "$uid", "controller": true}]},
		  "spec": {"nodeName": "node-3", "containers": [{"name": "web", "image": "registry.invalid/web:1"}]}},
		 {"apiVersion": "v1", "kind": "Pod",
		  "metadata": {"name": "e2e-doctor-manager-8xk2q", "namespace": "$LH_NS", "labels": {"longhorn-guard-e2e": "true", "longhorn-guard-e2e-doctor": "true"},
		   "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "longhorn-manager", "uid": "$uid", "controller": true}]},
		  "spec": {"nodeName": "node-3", "containers": [{"name": "manager", "image": "registry.invalid/manager:1"}]}},
		 {"apiVersion": "v1", "kind": "Pod",
		  "metadata": {"name": "e2e-doctor-cache-0", "namespace": "default", "labels": {"longhorn-guard-e2e": "true", "longhorn-guard-e2e-doctor": "true"},
		   "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "e2e-doctor-cache", "uid": "$uid", "controller": true}]},
		  "spec": {"nodeName": "node-3", "volumes": [{"name": "scratch", "emptyDir": {}}],
		   "containers": [{"name": "cache", "image": "registry.invalid/cache:1"}]}}
		]}
	EOF
	local at_zero='{"status":{"observedGeneration":1,"disruptionsAllowed":0,"currentHealthy":1,"desiredHealthy":1,"expectedPods":1}}'
	k -n "$LH_NS" patch pdb "$IM3" --subresource=status --type=merge -p "$at_zero" >/dev/null
	k -n default patch pdb "$DOCTOR_APP" --subresource=status --type=merge -p "$at_zero" >/dev/null
	k -n default patch pod "$DOCTOR_APP-6d4cf56db6-x7k2p" --subresource=status --type=merge \
		-p '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}' >/dev/null

	LONGHORN_GUARD_LOG=warn run "$BIN" check drain node-3
	check "check drain node-3 exits 1: the budgets block" rc_is 1
	check "longhorn-guard's own verdicts on node-3 block no volume" has "checked, none blocking)"
	check "Longhorn's budget $IM3 is named stale, with Longhorn's source" \
		finding BLOCK longhorn-pdb-stale "poddisruptionbudget $LH_NS/$IM3: Longhorn's budget for instance manager $IM3, stale: no replica or engine on node-3 needs it, yet it is still there on the cordoned node; Longhorn deletes it only when canDeleteInstanceManagerPDB passes (longhorn-manager controller/instance_manager_controller.go)"
	check "its remedy: delete it, safe by the guard's analysis" \
		has "remedy: kubectl -n $LH_NS delete pdb $IM3 is safe: longhorn-guard's analysis finds no volume that needs instance manager $IM3"
	check "the application budget at 0 is named with its selector and counts" \
		finding BLOCK pdb-at-zero "poddisruptionbudget default/$DOCTOR_APP: selector app=$DOCTOR_APP covers default/$DOCTOR_APP-6d4cf56db6-x7k2p on node-3; disruptionsAllowed 0 (minAvailable 1; currentHealthy 1, desiredHealthy 1, expectedPods 1)"
	check "the DaemonSet pod needs --ignore-daemonsets" \
		finding flag daemonset-pod "pod $LH_NS/e2e-doctor-manager-8xk2q: managed by DaemonSet longhorn-manager"
	check "the emptyDir pod needs --delete-emptydir-data" \
		finding flag emptydir-pod "pod default/e2e-doctor-cache-0: has emptyDir volume scratch"
	check "the flags it needs are in the remedies" \
		all "has 'remedy: kubectl drain node-3 --ignore-daemonsets'" "has 'remedy: kubectl drain node-3 --delete-emptydir-data'"
	check "one verdict line counts both budgets, and no command line while the drain would block" \
		all "has 'node-3: a drain would BLOCK on 2 PodDisruptionBudgets ('" "lacks 'drain with:'"
	LONGHORN_GUARD_LOG=warn run "$BIN" check drain node-3 --output json
	check "the one kubectl drain command line, with both flags, in the JSON" \
		has "\"kubectlDrain\": \"kubectl drain node-3 --ignore-daemonsets --delete-emptydir-data"
	doctor_cleanup
}

doctor_cleanup() {
	k delete pdb -A -l "$DOCTOR_LABEL" --ignore-not-found >/dev/null 2>&1
	k delete pods -A -l "$DOCTOR_LABEL" --grace-period=0 --force --ignore-not-found >/dev/null 2>&1
	true
}
