# Check f of the real-kubelet suite: `longhorn-guard check drain NODE` (live, read-only) names
# every blocker of a real drain with its remedy (issue 25), and agrees with what the real
# `kubectl drain` refuses. Sourced; uses e2e/doctor.sh's `finding` and `doctor_budgets`.
#
# On node-2, cordoned, with nothing of Longhorn's on it that any volume needs: Longhorn's budget
# for its instance manager (the shape of shared/fixtures/longhorn/pdb-instance-manager.json over
# the real pod's labels), which the real disruption controller holds at 0, so stale; an
# application Deployment with a budget of minAvailable 1 (0 allowed); a DaemonSet; a Deployment
# whose pod has an emptyDir. Then a volume whose last healthy replica is on node-2 turns the
# same budget into a needed one.

DOC_NODE=node-2
DOC_LABEL=longhorn-guard-e2e-doctor=true

# doc_workload KIND NAME SPEC_YAML: a Deployment or DaemonSet of the sleeping image in default,
# labelled for the cleanup; SPEC_YAML is the pod spec's extra lines (indented 6).
doc_workload() {
	k apply -f - >/dev/null <<-EOF
		apiVersion: apps/v1
		kind: $1
		metadata: {name: $2, namespace: default, labels: {longhorn-guard-e2e-doctor: "true"}}
		spec:
		  $([ "$1" = Deployment ] && echo "replicas: 1")
		  selector: {matchLabels: {app: $2}}
		  template:
		    metadata: {labels: {app: $2, longhorn-guard-e2e-doctor: "true"}}
		    spec:
		      terminationGracePeriodSeconds: 1
		      containers: [{name: app, image: "$IM_IMAGE", imagePullPolicy: Never}]
		$3
	EOF
}
pod_of() { value k -n default get pods -l "app=$1" --field-selector="spec.nodeName=$DOC_NODE" -o jsonpath='{.items[*].metadata.name}' | awk '{print $1}'; }
pdb_at_zero() { [ "$(k -n "$1" get pdb "$2" -o jsonpath='{.status.observedGeneration}/{.status.disruptionsAllowed}')" = 1/0 ]; }

check_doctor() {
	local im labels web agent cache
	log "f. check drain $DOC_NODE (live): the drain doctor names each blocker with its remedy"
	im=$(im_of "$DOC_NODE")
	doc_workload DaemonSet doctor-agent ""
	doc_workload Deployment doctor-web "      nodeSelector: {kubernetes.io/hostname: $DOC_NODE}"
	doc_workload Deployment doctor-cache "      nodeSelector: {kubernetes.io/hostname: $DOC_NODE}
      volumes: [{name: scratch, emptyDir: {}}]"
	labels=$(value k -n "$LH_NS" get pod "$im" -o json | python3 -c '
import json, sys
fixture = json.load(open(sys.argv[1]))["spec"]["selector"]["matchLabels"]
labels = json.load(sys.stdin)["metadata"]["labels"]
print(json.dumps({key: labels[key] for key in fixture}))' "$ROOT/../shared/fixtures/longhorn/pdb-instance-manager.json" || true)
	if [ -z "$labels" ]; then
		fail "f: $im has the labels of Longhorn's budget"
		doctor_cluster_cleanup
		return 0
	fi
	doctor_budgets "$im" "$labels" doctor-web
	for d in doctor-web doctor-cache; do
		k -n default rollout status "deployment/$d" --timeout=90s >/dev/null || fail "deployment $d available"
	done
	k -n default rollout status daemonset/doctor-agent --timeout=90s >/dev/null || fail "daemonset doctor-agent available"
	wait_for 30 pdb_at_zero "$LH_NS" "$im" || fail "the disruption controller holds $im at 0"
	wait_for 30 pdb_at_zero default doctor-web || fail "the disruption controller holds doctor-web at 0"
	web=$(pod_of doctor-web) agent=$(pod_of doctor-agent) cache=$(pod_of doctor-cache)
	k cordon "$DOC_NODE" >/dev/null

	# What the real kubectl drain refuses, without flags (client dry run: nothing written).
	run k drain "$DOC_NODE" --dry-run=client
	sed -n '/^error:/,$p' <<<"$OUT" | sed 's/^/    kubectl drain: /'
	check "kubectl drain (no flags) refuses the DaemonSet pod and the emptyDir pod" \
		all 'rc_not 0' "has 'use --ignore-daemonsets to ignore): default/$agent'" "has 'default/$cache'" "has 'use --delete-emptydir-data to override'"

	run "$GUARD_BIN" check drain "$DOC_NODE"
	sed -n "/^$DOC_NODE: beyond/,\$p" <<<"$OUT" | sed 's/^/    /'
	check "check drain $DOC_NODE exits 1: the budgets block" rc_is 1
	check "longhorn-guard's own verdicts on $DOC_NODE block no volume" has "checked, none blocking)"
	check "Longhorn's budget $im is named stale, with Longhorn's source" \
		finding BLOCK longhorn-pdb-stale "poddisruptionbudget $LH_NS/$im: Longhorn's budget for instance manager $im, stale: no replica or engine on $DOC_NODE needs it, yet it is still there on the cordoned node; Longhorn deletes it only when canDeleteInstanceManagerPDB passes"
	check "its remedy: delete it, safe by the guard's analysis" \
		has "remedy: kubectl -n $LH_NS delete pdb $im is safe: longhorn-guard's analysis finds no volume that needs instance manager $im"
	check "the application budget at 0 is named with its selector and the controller's counts" \
		finding BLOCK pdb-at-zero "poddisruptionbudget default/doctor-web: selector app=doctor-web covers default/$web on $DOC_NODE; disruptionsAllowed 0 (minAvailable 1; currentHealthy 1, desiredHealthy 1, expectedPods 1)"
	check "the DaemonSet pod needs --ignore-daemonsets" finding flag daemonset-pod "pod default/$agent: managed by DaemonSet doctor-agent"
	check "the emptyDir pod needs --delete-emptydir-data" finding flag emptydir-pod "pod default/$cache: has emptyDir volume scratch"
	check "the flags it needs are in the remedies" \
		all "has 'remedy: kubectl drain $DOC_NODE --ignore-daemonsets'" "has 'remedy: kubectl drain $DOC_NODE --delete-emptydir-data'"
	check "one verdict line counts both budgets, and no command line while the drain would block" \
		all "has '$DOC_NODE: a drain would BLOCK on 2 PodDisruptionBudgets ('" "lacks 'drain with:'"
	run "$GUARD_BIN" check drain "$DOC_NODE" --output json
	check "the one kubectl drain command line, with both flags, in the JSON" \
		has "\"kubectlDrain\": \"kubectl drain $DOC_NODE --ignore-daemonsets --delete-emptydir-data"

	# The same budget once a volume's last healthy replica is on the node: needed, keep it.
	lh volume vol-doctor --replicas node-1=rebuilding,node-2=healthy
	run "$GUARD_BIN" check drain "$DOC_NODE"
	check "check drain $DOC_NODE exits 1 with vol-doctor's last healthy replica there" rc_is 1
	check "now $im is needed: vol-doctor's stopped replica (a detached volume) is on $DOC_NODE" \
		finding BLOCK longhorn-pdb-needed "poddisruptionbudget $LH_NS/$im: Longhorn's budget for instance manager $im, needed: $DOC_NODE holds replicas or engines of vol-doctor"
	check "its remedy: keep it" has "remedy: do not delete it: once those volumes are protected elsewhere"
	doctor_cluster_cleanup
}

doctor_cluster_cleanup() {
	lh delete-volume vol-doctor >/dev/null 2>&1 || true
	# The budget-delete webhook refuses the instance-manager budget until the guard's view has
	# lost vol-doctor (it is needed until then): retried.
	wait_for 60 k delete pdb -A -l "$DOC_LABEL" --ignore-not-found || fail "the doctor's budgets deleted"
	k -n default delete deployment,daemonset -l "$DOC_LABEL" --ignore-not-found --wait=false >/dev/null 2>&1
	k uncordon "$DOC_NODE" >/dev/null 2>&1
	wait_for 60 eval '[ -z "$(k get pods -A -l "$DOC_LABEL" -o name)" ]' || fail "the doctor's pods are gone"
}
