# Scenario f of the real-Longhorn suite: the drains that delete instead of evicting (issue 44;
# docs/drain.md, "Every way to remove the last healthy copy"). A one-replica volume attached on
# node Y keeps its last healthy replica on node X:
#   f0. the cost: a burst of pod deletions outside instance managers makes no call to the
#       guard (the API server's own apiserver_admission_webhook_request_total);
#   f1. `kubectl delete pod <X's instance manager>` (plain, --grace-period=0 --force,
#       --dry-run=server), deleting X's budget and X's InstanceManager, and
#       `kubectl drain X --disable-eviction` are each refused with the guard's message;
#   f2. once Longhorn has rebuilt the replica elsewhere, the budget's deletion, the pod's
#       deletion and the drain each go through;
#   f3. Longhorn's own replacement of its instance-manager pods (a danger-zone setting, then the
#       setting again with every manager restarted) goes through, also on a node whose
#       instance manager the guard refuses to an admin, with no refusal in Longhorn's logs.
# Every step is a line of the timeline (seconds from the start; `tl`, `new_pod`, `im_running`
# of seedrace.sh, `attach_away` of drains.sh, the Longhorn helpers of longhorn.sh). Sourced; runs alone with
# `e2e/cluster.sh checks check_deletes` on a cluster `up` made with Longhorn and the guard in.
# Every lookup prints nothing rather than failing, so an empty answer fails a check and never
# stops the run.

F_BURST=${F_BURST:-30}
PD_HOOK="pod-delete.longhorn-guard.io"
BD_HOOK="budget-delete.longhorn-guard.io"
ID_HOOK="instance-manager-delete.longhorn-guard.io"

# Lookups print nothing rather than fail (lib.sh's `value` and `matching`; no index into a
# list that may be empty, no head after a writer). Of longhorn.sh, drains.sh and seedrace.sh:
# replicas, vol_state, jp, im_pod_on (NODE's instance-manager pod), pod_uid, new_pod,
# im_running, tl, attach_away.

# del_im NODE: the InstanceManager of NODE, or nothing.
del_im() {
	[ -n "$1" ] || return 0
	value lhk get instancemanagers.longhorn.io -l "longhorn.io/node=$1" -o jsonpath='{.items[*].metadata.name}' | awk '{print $1}'
}
del_pdb_exists() { [ -n "$1" ] && lhk get pdb "$1" >/dev/null 2>&1; }
del_replica_nodes() { replicas "$1" | awk '{print $2}' | sort -u; }
del_first_replica_node() { del_replica_nodes "$1" | awk 'NR == 1'; }
del_replica_count() { replicas "$1" | awk 'NF {n++} END {print n + 0}'; }
# del_calls HOOK: the calls the API server made to webhook HOOK so far (every code summed).
del_calls() {
	value k get --raw /metrics | awk -v n="name=\"$1\"" \
		'index($0, "apiserver_admission_webhook_request_total{") == 1 && index($0, n) {s += $NF} END {print s + 0}'
}
# del_ims: "NODE POD UID" of every instance-manager pod.
del_ims() {
	value lhk get pods -l longhorn.io/component=instance-manager \
		-o jsonpath='{range .items[*]}{.spec.nodeName}{" "}{.metadata.name}{" "}{.metadata.uid}{"\n"}{end}' | sort
}
# del_all_replaced BEFORE: every node of BEFORE (del_ims) runs an instance-manager pod of
# another uid, and every instance manager runs.
del_all_replaced() {
	local now node uid
	[ -n "$1" ] || return 1
	now=$(del_ims)
	while read -r node _ uid; do
		[ -n "$node" ] || continue
		grep -q "^$node " <<<"$now" || return 1
		! grep -q " $uid\$" <<<"$now" || return 1
	done <<<"$1"
	ims_running
}
# del_setting NAME VALUE: a Longhorn Setting set to VALUE (any text: JSON-quoted here).
del_setting() {
	lhk patch settings.longhorn.io "$1" --type merge \
		-p "$(python3 -c 'import json, sys; print(json.dumps({"value": sys.argv[1]}))' "$2")" >/dev/null 2>&1 || true
}
# del_refused HOOK TEXT: the last `run` was refused by HOOK with TEXT in its message.
del_refused() { all 'rc_not 0' "has 'admission webhook \"$1\" denied the request'" "has \"$2\""; }
# del_lh_mentions SINCE: lines of the managers' logs since SINCE that name longhorn-guard.
del_lh_mentions() {
	value lhk logs -l app=longhorn-manager --since-time="$1" --tail=-1 | matching -c 'longhorn-guard'
}
# del_guard_saw USER SINCE: the guard's admission log lines (warnings and denials) since SINCE
# for USER.
del_guard_saw() {
	value k -n "$GUARD_NS" logs -l "$GUARD_SEL" --since-time="$2" --tail=-1 |
		matching -F "\"user\":\"$1\"" | matching -c '"message":"admission'
}

# del_burst: F_BURST pods that never run, in longhorn-system and in default, made and deleted;
# the calls to the pod-delete webhook before and after.
del_burst() {
	local c0 c1 ns list
	c0=$(del_calls "$PD_HOOK")
	for ns in "$LH_NS" default; do
		list=$(python3 -c '
import json, sys
ns, n, image = sys.argv[1], int(sys.argv[2]), sys.argv[3]
pod = lambda i: {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "burst-%d" % i, "namespace": ns, "labels": {"longhorn-guard-e2e-burst": "true"}},
                 "spec": {"nodeSelector": {"kubernetes.io/hostname": "nowhere"},
                          "containers": [{"name": "c", "image": image, "imagePullPolicy": "Never"}]}}
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod(i) for i in range(1, n + 1)]}))' "$ns" "$F_BURST" "$IM_IMAGE")
		k create -f - <<<"$list" >/dev/null 2>&1 || true
		k -n "$ns" delete pod -l longhorn-guard-e2e-burst=true --wait=false >/dev/null 2>&1 || true
	done
	c1=$(del_calls "$PD_HOOK")
	tl "f0. $((2 * F_BURST)) deletions of pods that are no instance manager ($F_BURST in $LH_NS, $F_BURST in default): calls to $PD_HOOK $c0 before, $c1 after"
	figure "f0. apiserver_admission_webhook_request_total{name=\"$PD_HOOK\"}: $c0 before, $c1 after $((2 * F_BURST)) deletions of other pods"
	check "f0: deleting pods that are no instance manager costs no call to the guard ($c0 -> $c1)" test "$c1" = "$c0"
}

# del_replacement WHAT: Longhorn replaces every instance-manager pod after `del_setting`s or a
# restart done by the caller between del_replacement_start and this; W is the node whose
# instance manager the guard refuses to an admin.
del_replacement_start() {
	DEL_BEFORE=$(del_ims)
	DEL_CALLS=$(del_calls "$PD_HOOK")
	DEL_SINCE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
}
del_replacement() {
	local what=$1 w=$2 after calls mentions saw
	wait_for 300 del_all_replaced "$DEL_BEFORE" || true
	after=$(del_ims)
	calls=$(del_calls "$PD_HOOK")
	mentions=$(del_lh_mentions "$DEL_SINCE")
	saw=$(del_guard_saw "system:serviceaccount:$LH_NS:longhorn-service-account" "$DEL_SINCE")
	tl "f3. $what: instance-manager pods now $(awk '{printf "%s:%s ", $1, substr($3, 1, 8)}' <<<"$after")(were $(awk '{printf "%s:%s ", $1, substr($3, 1, 8)}' <<<"$DEL_BEFORE")); calls to $PD_HOOK $DEL_CALLS -> $calls; manager log lines naming longhorn-guard: $mentions"
	value lhk logs -l app=longhorn-manager --since-time="$DEL_SINCE" --tail=-1 |
		matching -E 'Deleting instance manager pod|Creating pod for instance manager' | sed -nE 's/.*msg="([^"]*)".*/\1/p' |
		sort | uniq -c | sed -n 1,6p | sed 's/^/    manager: /'
	check "f3 ($what): Longhorn replaced the instance-manager pod of every node, $w's included" del_all_replaced "$DEL_BEFORE"
	check "f3 ($what): Longhorn's deletions never reached the guard ($PD_HOOK calls $DEL_CALLS -> $calls)" test "$calls" = "$DEL_CALLS"
	check "f3 ($what): no line of Longhorn's managers names longhorn-guard ($mentions)" test "$mentions" = 0
	check "f3 ($what): the guard answered nothing for Longhorn's account ($saw)" test "$saw" = 0
}

# del_volumes_gone VOLUME...: each detached and deleted, and gone.
del_volumes_gone() {
	local v
	for v in "$@"; do
		lh_detach "$v" 2>/dev/null || true
		lh_delete_volume "$v"
	done
	for v in "$@"; do wait_for 120 vol_gone "$v" || fail "f: $v deleted"; done
}

check_deletes() {
	local vol=vol-del vol2=vol-del2 x y='' w im imcr uid c0 c1 lhcpu
	SCEN=deletes
	T0=$(now_s)
	: >"$DIR/timeline-$SCEN"
	log "f. drains that delete instead of evicting: kubectl delete pod, drain --disable-eviction, Longhorn's budget and InstanceManager"
	lh_setting node-drain-policy block-if-contains-last-replica
	del_burst

	lh_volume "$vol" 1 268435456
	wait_for 60 vol_is "$vol" detached/unknown || true
	lh_attach "$vol" node-1
	wait_for 120 vol_is "$vol" attached/healthy || true
	x=$(del_first_replica_node "$vol")
	[ -z "$x" ] || y=$(attach_away "$vol" "$x")
	im=$(im_pod_on "$x")
	imcr=$(del_im "$x")
	uid=$(pod_uid "$im")
	tl "f1. $vol ($(vol_state "$vol")): its only replica on ${x:-?}, engine on ${y:-?}; the instance manager there ${im:-?}, its InstanceManager ${imcr:-?}"
	if [ -z "$x" ] || [ -z "$im" ] || [ -z "$imcr" ]; then
		fail "f: $vol has a replica on a node with an instance-manager pod and an InstanceManager (${x:-no replica}, ${im:-no pod}, ${imcr:-no InstanceManager})"
		del_volumes_gone "$vol"
		return 0
	fi
	wait_for 60 del_pdb_exists "$imcr" || true
	# The guard's view holds the replica once a dry run is refused (an allow on old data would be
	# confirmed by reads first; this only keeps the real deletes below from racing the watch).
	wait_for 60 eval '! k -n "$LH_NS" delete pod "$im" --dry-run=server' || true
	c0=$(del_calls "$PD_HOOK")

	run k -n "$LH_NS" delete pod "$im" --wait=false
	tl "f1. kubectl delete pod $im: exit $RC"
	check "f1: kubectl delete pod $im is refused with the guard's message" del_refused "$PD_HOOK" "longhorn-guard: draining $x would strand 1 volume"
	run k -n "$LH_NS" delete pod "$im" --grace-period=0 --force
	tl "f1. kubectl delete pod $im --grace-period=0 --force: exit $RC"
	check "f1: the force delete (gracePeriodSeconds 0) gets the same answer" del_refused "$PD_HOOK" "longhorn-guard: draining $x would strand 1 volume"
	run k -n "$LH_NS" delete pod "$im" --dry-run=server
	tl "f1. kubectl delete pod $im --dry-run=server: exit $RC"
	check "f1: the dry run gets the same answer" del_refused "$PD_HOOK" "longhorn-guard: draining $x would strand 1 volume"
	c1=$(del_calls "$PD_HOOK")
	check "f1: the API server counted the guard's calls ($c0 -> $c1)" test "$c1" -ge "$((c0 + 3))"

	run k -n "$LH_NS" delete pdb "$imcr"
	tl "f1. kubectl delete pdb $imcr: exit $RC"
	check "f1: deleting $x's budget is refused while it is needed" del_refused "$BD_HOOK" "longhorn-guard: longhorn-pdb-needed poddisruptionbudget $LH_NS/$imcr"
	run k -n "$LH_NS" delete instancemanagers.longhorn.io "$imcr" --wait=false
	tl "f1. kubectl delete instancemanager $imcr: exit $RC"
	check "f1: deleting $x's InstanceManager is refused" del_refused "$ID_HOOK" "longhorn-guard: deleting $x's instance manager would strand 1 volume"

	run k drain "$x" --disable-eviction --ignore-daemonsets --delete-emptydir-data --timeout=60s
	tl "f1. kubectl drain $x --disable-eviction: exit $RC"
	check "f1: kubectl drain $x --disable-eviction is refused with the guard's message" del_refused "$PD_HOOK" "longhorn-guard: draining $x would strand 1 volume"
	check "f1: $x's instance manager still runs, the same pod ($uid)" all 'im_running "$im"' '[ "$(pod_uid "$im")" = "$uid" ]'
	check "f1: $vol still has its replica on $x and is attached ($(vol_state "$vol"))" all '[ "$(del_replica_nodes "$vol")" = "$x" ]' 'vol_is "$vol" attached/healthy'

	# f2. Longhorn rebuilds the replica elsewhere ($x is cordoned: the new one goes to another node).
	lhk patch volumes.longhorn.io "$vol" --type merge -p '{"spec":{"numberOfReplicas":2}}' >/dev/null 2>&1 || true
	tl "f2. $vol: numberOfReplicas 2, $x cordoned"
	# Right after the patch the new replica is listed while the volume still reads healthy (seen:
	# 0.6 s later it was degraded): wait for the rebuild to show first, then for its end.
	wait_for 30 eval '[ "$(del_replica_count "$vol")" = 2 ] && vol_is "$vol" attached/degraded' || true
	wait_for 300 eval '[ "$(del_replica_count "$vol")" = 2 ] && vol_is "$vol" attached/healthy' || true
	tl "f2. $vol rebuilt: replicas on $(del_replica_nodes "$vol" | tr '\n' ' ')($(vol_state "$vol"))"
	check "f2: Longhorn rebuilt $vol on a second node" all '[ "$(del_replica_count "$vol")" = 2 ]' 'vol_is "$vol" attached/healthy'
	if wait_for 120 k -n "$LH_NS" delete pod "$im" --dry-run=server; then
		tl "f2. the guard allows the deletion of $im (dry run)"
	else
		tl "f2. the guard still refuses the deletion of $im (dry run) after 120 s"
	fi
	k uncordon "$x" >/dev/null 2>&1 || true
	wait_for 120 del_pdb_exists "$imcr" || true
	tl "f2. $x uncordoned; Longhorn's budget $imcr $(del_pdb_exists "$imcr" && echo is there || echo is absent)"

	run k -n "$LH_NS" delete pdb "$imcr"
	tl "f2. kubectl delete pdb $imcr: exit $RC"
	check "f2: deleting $x's budget goes through, with the verdict named" \
		all 'rc_is 0' 'has "Warning: longhorn-guard: longhorn-pdb-"' 'lacks longhorn-pdb-needed'
	run k -n "$LH_NS" delete pod "$im" --wait=false
	tl "f2. kubectl delete pod $im: exit $RC"
	check "f2: kubectl delete pod $im goes through" rc_is 0
	wait_for 180 eval 'new_pod "$im" "$uid" && im_running "$im"' || true
	wait_for 300 vol_is "$vol" attached/healthy || true
	tl "f2. Longhorn made $im again and rebuilt $vol ($(vol_state "$vol"))"
	run k drain "$x" --disable-eviction --ignore-daemonsets --delete-emptydir-data --timeout=180s
	tl "f2. kubectl drain $x --disable-eviction: exit $RC"
	check "f2: kubectl drain $x --disable-eviction goes through" rc_is 0
	k uncordon "$x" >/dev/null 2>&1 || true
	wait_for 240 ims_running || true
	wait_for 300 vol_is "$vol" attached/healthy || true
	tl "f2. $x uncordoned; instance managers running: $(ims_running && echo yes || echo no); $vol $(vol_state "$vol")"

	# f3. Longhorn's own replacement of its instance-manager pods. With every volume detached no
	# instance runs, so Longhorn replaces each pod once a danger-zone setting changes; W holds
	# the only, stopped, replica of vol2, so the guard refuses an admin's delete of W's pod.
	lh_detach "$vol"
	lh_volume "$vol2" 1 268435456
	wait_for 60 vol_is "$vol2" detached/unknown || true
	lh_attach "$vol2" node-1
	wait_for 120 vol_is "$vol2" attached/healthy || true
	lh_detach "$vol2"
	wait_for 120 vol_is "$vol" detached/unknown || true
	wait_for 120 vol_is "$vol2" detached/unknown || true
	w=$(del_first_replica_node "$vol2")
	run k -n "$LH_NS" delete pod "$(im_pod_on "$w")" --dry-run=server
	tl "f3. $vol2 detached, its only replica on ${w:-?}; an admin's dry-run delete of ${w:-?}'s instance manager: exit $RC"
	check "f3: the guard refuses an admin's delete of ${w:-?}'s instance manager ($vol2's only copy)" \
		del_refused "$PD_HOOK" "longhorn-guard: draining ${w:-?} would strand 1 volume"
	lhcpu=$(jp settings.longhorn.io guaranteed-instance-manager-cpu '{.value}')
	[ -n "$lhcpu" ] || lhcpu='{"v1":"12","v2":"12"}'
	del_replacement_start
	del_setting guaranteed-instance-manager-cpu '{"v1":"11","v2":"12"}'
	tl "f3. guaranteed-instance-manager-cpu $lhcpu -> {\"v1\":\"11\",\"v2\":\"12\"}"
	del_replacement "setting" "${w:-?}"

	del_replacement_start
	del_setting guaranteed-instance-manager-cpu "$lhcpu"
	lhk delete pod -l app=longhorn-manager --wait=false >/dev/null 2>&1 || true
	tl "f3. guaranteed-instance-manager-cpu back to $lhcpu, every longhorn-manager pod deleted"
	wait_for 300 managers_ready || true
	tl "f3. managers Ready again: $(managers_ready && echo yes || echo no)"
	del_replacement "manager restart" "${w:-?}"

	del_volumes_gone "$vol" "$vol2"
	wait_for 180 ims_running || fail "f: instance managers running at the end"
	figure "f. timeline: $(tr -s ' ' <"$DIR/timeline-$SCEN" | sed 's/^ //' | paste -sd ';' | cut -c1-3000)"
}
