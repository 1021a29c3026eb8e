# `longhorn-guard check cluster` against the live API server (issue 12). Sourced by e2e/run.sh,
# which provides k, run, check, has, log, guard_kubeconfig, $BIN, $WORK, $LH_NS, $LABEL, $PORT.
#
# check cluster runs as the ServiceAccount longhorn-guard/longhorn-guard (the kubeconfig serve
# uses; serve --check-interval runs the same reads in the cluster), so the shipped RBAC is what
# it gets. First without the BackupTarget/RecurringJob/Snapshot CRDs when the cluster lacks
# them (no crash: the backup target is "not checked"), then with e2e/crds/longhorn-extra-crds.yaml
# and objects that make backup-target, recurring-jobs and snapshot-retention fire: a backup
# target that answers 403, a snapshot job keeping more than snapshot-max-count (250, Longhorn's
# default), a backup job keeping nothing, a volume in no job, and 610 snapshots (two pages of
# the 500-item LISTs): 250 of vol-degraded (the limit), 200 of vol-healthy (80 %), 160 of
# vol-detached of which 10 are marked removed.

EXTRA_CRDS=$E2E/crds/longhorn-extra-crds.yaml
EXTRA_CRD_NAMES=(backuptargets.longhorn.io recurringjobs.longhorn.io snapshots.longhorn.io)
CREATED_EXTRA_CRDS=()

# cc_line SEVERITY OBJECT MESSAGE: one finding line of check cluster's table.
cc_line() { printf '%-8s %-40s %s' "$1" "$2" "$3"; }
check_cluster() { KUBECONFIG=$WORK/sa.kubeconfig "$BIN" check cluster "$@"; }

# snapshots VOLUME COUNT: COUNT Snapshot objects of VOLUME as List items (one per line).
snapshots() {
	local i sep=
	for i in $(seq -w 1 "$2"); do
		printf '%s{"apiVersion":"longhorn.io/v1beta2","kind":"Snapshot","metadata":{"name":"e2e-%s-%s","namespace":"%s","labels":{"longhorn-guard-e2e":"true","longhornvolume":"%s"}},"spec":{"volume":"%s","createSnapshot":true,"labels":{}}}\n' \
			"$sep" "$1" "$i" "$LH_NS" "$1" "$1"
		sep=,
	done
}

check_cluster_checks() {
	local n absent=1
	guard_kubeconfig "$WORK/sa.kubeconfig"
	for n in "${EXTRA_CRD_NAMES[@]}"; do
		k get crd "$n" >/dev/null 2>&1 && absent=0
	done
	log "check cluster without the BackupTarget/RecurringJob/Snapshot CRDs (as ServiceAccount $GUARD_NS/longhorn-guard)"
	if [ "$absent" = 1 ]; then
		run check_cluster
		check "check cluster runs without those CRDs (exit 1: the state has errors; not 2)" rc_is 1
		check "the backup target is reported as not checked" \
			has "$(cc_line info backuptargets "not checked: no BackupTarget objects and no backup-target setting were read")"
		check "no snapshot-retention finding without Snapshot objects" lacks "== snapshot-retention"
	else
		echo "    skipped: this cluster already serves some of ${EXTRA_CRD_NAMES[*]}"
	fi

	log "check cluster with backup targets, recurring jobs and 610 snapshots"
	for n in "${EXTRA_CRD_NAMES[@]}"; do
		if ! k get crd "$n" >/dev/null 2>&1; then
			awk -v want="name: $n" 'BEGIN{RS="---\n"} index($0, want) {printf "---\n%s", $0}' "$EXTRA_CRDS" | k create -f - >/dev/null
			CREATED_EXTRA_CRDS+=("$n")
		fi
	done
	k wait --for=condition=Established --timeout=60s "${EXTRA_CRD_NAMES[@]/#/crd/}" >/dev/null
	k create -f "$E2E/state/check-cluster.json" >/dev/null
	k -n "$LH_NS" patch backuptargets.longhorn.io default --subresource=status --type=merge -p \
		'{"status":{"available":false,"conditions":[{"type":"Unavailable","status":"True","reason":"Unavailable","message":"failed to list backup volumes in s3://longhorn-backups@us-east-1/: AccessDenied: 403 Forbidden"}]}}' >/dev/null
	k -n "$LH_NS" label volumes.longhorn.io vol-detached recurring-job.longhorn.io/weekly-backup=enabled >/dev/null
	{
		echo '{"apiVersion":"v1","kind":"List","items":['
		snapshots vol-degraded 250
		echo ,
		snapshots vol-healthy 200
		echo ,
		snapshots vol-detached 160
		echo ']}'
	} >"$WORK/snapshots.json"
	k create -f "$WORK/snapshots.json" >/dev/null
	for n in 001 002; do
		k -n "$LH_NS" patch snapshots.longhorn.io "e2e-vol-healthy-$n" --subresource=status --type=merge \
			-p '{"status":{"size":1073741824,"readyToUse":true}}' >/dev/null
	done
	for n in $(seq 151 160); do
		k -n "$LH_NS" patch snapshots.longhorn.io "e2e-vol-detached-$n" --subresource=status --type=merge \
			-p '{"status":{"markRemoved":true}}' >/dev/null
	done
	echo "    $(k -n "$LH_NS" get snapshots.longhorn.io -l "$LABEL" -o name | wc -l) snapshots"

	run check_cluster
	check "check cluster exits 1 (error findings)" rc_is 1
	check "backup-target: the target that answers 403" has "$(cc_line error backuptarget/default \
		"backup target default (s3://longhorn-backups@us-east-1/) is not available: failed to list backup volumes in s3://longhorn-backups@us-east-1/: AccessDenied: 403 Forbidden")"
	check "recurring-jobs: snapshot-hourly keeps more than snapshot-max-count" has "$(cc_line error recurringjob/snapshot-hourly \
		"snapshot-hourly (snapshot) has retain 300 >= the limit of vol-degraded (250): its next snapshot fails before it prunes")"
	check "recurring-jobs: backup-nightly keeps nothing" has "$(cc_line warning recurringjob/backup-nightly \
		"backup-nightly (backup) has retain 0: it keeps nothing it makes")"
	check "recurring-jobs: vol-detached names a job that does not exist" has "$(cc_line warning volumes \
		"1 volume in no recurring snapshot or backup job: vol-detached")"
	check "snapshot-retention: vol-degraded at the limit (250 snapshots, read over two pages)" has "$(cc_line error volume/vol-degraded \
		"vol-degraded has 250 snapshots (snapshotMaxCount=250): at the limit: new snapshots and backups of it fail")"
	check "snapshot-retention: vol-healthy at 80 %, with the space two of them hold" has "$(cc_line warning volume/vol-healthy \
		"vol-healthy has 200 snapshots (snapshotMaxCount=250), holding 2.0 GiB: 80% of the limit")"
	check "snapshot-retention: nothing for vol-detached (150 counted, 10 marked removed)" lacks "vol-detached has "
	check "the summary line: 4 errors, 9 warnings, 1 info" has "check cluster: 4 errors, 9 warnings, 1 info (10 checks)"
	run check_cluster --output json
	check "--output json: the same counts, exit 1" all 'rc_is 1' 'has "\"errors\": 4,"' 'has "\"warnings\": 9,"' 'has "\"object\": \"backuptarget/default\","'
}

# After serve is up: its periodic check cluster (same ServiceAccount) exports the findings.
checks_ran() {
	curl -s --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:$PORT/metrics" |
		grep -qE '^longhorn_guard_checks_runs_total\{result="ok"\} [1-9]'
}
check_cluster_metrics() {
	check "serve ran check cluster (as its ServiceAccount) within 30s" wait_for 30 checks_ran
	OUT=$(value curl -s --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:$PORT/metrics" |
		matching -E '^longhorn_guard_(findings|checks_runs_total)')
	printf '%s\n' "$OUT" | sed 's/^/    /'
	check "serve's /metrics counts the snapshot-retention, backup-target and recurring-jobs errors" \
		all 'has "longhorn_guard_findings{check=\"snapshot-retention\",severity=\"error\"} 1"' \
		'has "longhorn_guard_findings{check=\"backup-target\",severity=\"error\"} 1"' \
		'has "longhorn_guard_findings{check=\"recurring-jobs\",severity=\"error\"} 1"'
}

# Cleanup (external API server): the objects and the CRDs this run created.
check_cluster_cleanup() {
	local n
	if k get crd snapshots.longhorn.io >/dev/null 2>&1; then
		k -n "$LH_NS" delete snapshots.longhorn.io,recurringjobs.longhorn.io,backuptargets.longhorn.io -l "$LABEL" --ignore-not-found --wait=false >/dev/null
	fi
	for n in "${CREATED_EXTRA_CRDS[@]}"; do
		k delete crd "$n" --ignore-not-found --wait=false
	done
}
