# Checks a, b and e of the real-kubelet suite: the real `kubectl drain` against longhorn-guard,
# real instance-manager pods stopped by a real kubelet, `kubectl delete node`. Sourced.

DRAIN_FLAGS=(--ignore-daemonsets --delete-emptydir-data --timeout=240s)

now_s() { date +%s.%N; }
pod_exists() { k -n "$1" get pod "$2" >/dev/null 2>&1; }
# im_task_running NODE POD: a task of POD's containers still runs in NODE's containerd.
im_task_running() {
	local c
	for c in $(ctr_ "${1#node-}" containers ls -q "labels.\"io.kubernetes.pod.name\"==$2" 2>/dev/null); do
		ctr_ "${1#node-}" tasks ls 2>/dev/null | awk -v c="$c" '$1 == c && $3 == "RUNNING" {f = 1} END {exit !f}' && return 0
	done
	return 1
}
view_has() { # VOLUME NODE: longhorn-guard's view (check drain, live) blocks NODE for VOLUME
	local out
	out=$("$GUARD_BIN" check drain "$2" 2>/dev/null) || true
	grep -q "^$1 .*block" <<<"$out"
}
restore_node() { # NODE: uncordon, and the instance-manager pod Longhorn would recreate
	k uncordon "$1" >/dev/null
	pod_exists "$LH_NS" "$(im_of "$1")" || lh im-pod "$1" "$IM_IMAGE" >/dev/null
	wait_for 90 im_pods_running "$NODES" || fail "instance-manager pod on $1 running again"
}
# drain_bg NODE: kubectl drain in the background, output in $DIR/drain-NODE.log.
drain_bg() {
	: >"$DIR/drain-$1.log"
	k drain "$1" "${DRAIN_FLAGS[@]}" >"$DIR/drain-$1.log" 2>&1 &
	DRAIN_PID=$!
	DRAIN_T0=$(now_s)
}
drain_says() { grep -qF -- "$2" "$DIR/drain-$1.log"; }
denials() { grep -c 'longhorn-guard: draining' "$DIR/drain-$1.log" || true; }
denials_at_least() { [ "$(denials "$1")" -ge "$2" ]; }

check_node_delete() {
	log "e. kubectl delete node of a real node holding a volume's last healthy replica"
	lh volume vol-a --replicas node-1=rebuilding,node-2=healthy
	wait_for 30 view_has vol-a node-2 || fail "the guard's view has vol-a blocking node-2"
	run k delete node node-2 --wait=false
	check "kubectl delete node node-2 is denied, naming vol-a" all 'rc_not 0' 'has "vol-a"' 'has "longhorn-guard"'
	check "node-2 still exists and is Ready" node_ready 2
}

# a: kubectl prints the 429 and retries; a status patch as Longhorn's rebuild makes the
# replica on node-1 healthy; the drain finishes; the kubelet stops the instance manager.
check_blocked_drain() {
	local im t_first t_heal t_evicted t_done t_stopped rc n
	log "a. blocked drain of node-2 (vol-a's last healthy replica), released by the rebuild's status patch"
	im=$(im_of node-2)
	drain_bg node-2
	wait_for 60 drain_says node-2 "longhorn-guard: draining node-2" || fail "kubectl drain printed the guard's message"
	t_first=$(now_s)
	wait_for 30 denials_at_least node-2 3 || true
	n=$(denials node-2)
	matching -m1 -A2 'longhorn-guard: draining' "$DIR/drain-node-2.log" | sed 's/^/    drain: /'
	check "kubectl drain prints the 429 and retries ($n denials seen, every 5 s)" test "$n" -ge 2
	check "the instance manager still runs while denied" im_task_running node-2 "$im"
	lh heal vol-a node-1
	t_heal=$(now_s)
	wait_for 60 gone -n "$LH_NS" get pod "$im" || true
	t_evicted=$(now_s)
	wait "$DRAIN_PID" && rc=0 || rc=$?
	t_done=$(now_s)
	tail -n 3 "$DIR/drain-node-2.log" | sed 's/^/    drain: /'
	check "kubectl drain node-2 finishes after the patch (exit $rc)" test "$rc" = 0
	wait_for 40 eval '! im_task_running node-2 "$im"' || true
	t_stopped=$(now_s)
	check "node-2's kubelet stopped the instance-manager container" eval '! im_task_running node-2 "$im"'
	printf '    timeline (s from drain start): first 429 %s, status patch %s, instance manager evicted %s, drain done %s, container stopped %s\n' \
		"$(secs "$DRAIN_T0" "$t_first")" "$(secs "$DRAIN_T0" "$t_heal")" "$(secs "$DRAIN_T0" "$t_evicted")" \
		"$(secs "$DRAIN_T0" "$t_done")" "$(secs "$DRAIN_T0" "$t_stopped")"
	restore_node node-2
}

# b: a workload with an attached volume on node-1: the drain evicts the workload; the guard
# holds the instance manager until the engine is gone; the harness detaches the engine once the
# workload pod is gone, as Longhorn would.
check_attached_drain() {
	local im wpod t_wgone t_detach t_evicted t_done rc held
	log "b. drain of node-1 with vol-b attached there for a workload"
	k apply -f - >/dev/null <<-EOF
		apiVersion: apps/v1
		kind: Deployment
		metadata: {name: workload-b, namespace: default}
		spec:
		  replicas: 1
		  selector: {matchLabels: {app: workload-b}}
		  template:
		    metadata: {labels: {app: workload-b}}
		    spec:
		      nodeSelector: {kubernetes.io/hostname: node-1}
		      terminationGracePeriodSeconds: 5
		      containers: [{name: app, image: "$IM_IMAGE", imagePullPolicy: Never}]
	EOF
	k -n default rollout status deployment/workload-b --timeout=90s >/dev/null || fail "workload-b running"
	wpod=$(value k -n default get pods -l app=workload-b -o jsonpath='{.items[*].metadata.name}' | awk '{print $1}')
	if [ -z "$wpod" ]; then
		fail "b: workload-b has a pod"
		k -n default delete deployment workload-b --wait=false >/dev/null
		return 0
	fi
	lh volume vol-b --replicas node-1=healthy,node-2=healthy --attached node-1 --workload "default/$wpod"
	wait_for 30 view_has vol-b node-1 || fail "the guard's view has vol-b blocking node-1"
	im=$(im_of node-1)
	# Its replacement stays Pending (node-1 cordoned) until the uncordon below.
	drain_bg node-1
	wait_for 60 gone -n default get pod "$wpod" || fail "the workload pod was evicted"
	t_wgone=$(now_s)
	held=$(pod_exists "$LH_NS" "$im" && echo yes || echo no)
	wait_for 15 drain_says node-1 "vol-b" || true
	matching -m1 -A1 'longhorn-guard: draining node-1' "$DIR/drain-node-1.log" | sed 's/^/    drain: /'
	check "the guard held the instance manager while vol-b's engine ran (pod present at workload gone: $held)" \
		all '[ "$held" = yes ]' 'drain_says node-1 vol-b'
	lh detach vol-b
	t_detach=$(now_s)
	wait_for 60 gone -n "$LH_NS" get pod "$im" || true
	t_evicted=$(now_s)
	wait "$DRAIN_PID" && rc=0 || rc=$?
	t_done=$(now_s)
	check "kubectl drain node-1 finishes once the engine is detached (exit $rc)" test "$rc" = 0
	check "node-1's kubelet stopped the instance-manager container" wait_for 40 eval '! im_task_running node-1 "$im"'
	printf '    timeline (s from drain start): workload pod gone %s, engine detached %s, instance manager evicted %s, drain done %s (%s denials; the drain also waits for guard pods: 15 s shutdown delay)\n' \
		"$(secs "$DRAIN_T0" "$t_wgone")" "$(secs "$DRAIN_T0" "$t_detach")" "$(secs "$DRAIN_T0" "$t_evicted")" "$(secs "$DRAIN_T0" "$t_done")" "$(denials node-1)"
	k -n default delete deployment workload-b --wait=false >/dev/null
	lh delete-volume vol-b
	restore_node node-1
}
