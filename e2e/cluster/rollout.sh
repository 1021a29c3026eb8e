# Check c of the real-kubelet suite: serving pods replaced while reviews arrive. Dry-run
# evictions of instance-manager pods go through the API server at LOAD_RATE (60/s) for the
# whole of: a rollout restart; a drain of the node hosting one guard replica; a drain of the
# node hosting both. Failed webhook calls are counted on both sides: the load's non-answers
# and the API server's "failed calling webhook" log lines. Sourced.

LOAD_RATE=${E2E_CLUSTER_LOAD_RATE:-60}

load_start() { # NAME POD...: evict_load.py in the background
	local name=$1 pod args=()
	shift
	for pod in "$@"; do args+=(--pod "$LH_NS/$pod"); done
	rm -f "$DIR/stop-$name"
	python3 "$E2E/cluster/evict_load.py" --server "https://$CTL_IP:$API_PORT" --ca "$PKI/ca.crt" \
		--cert "$PKI/admin.crt" --key "$PKI/admin.key" --rate "$LOAD_RATE" --stop-file "$DIR/stop-$name" \
		"${args[@]}" >"$DIR/load-$name.json" 2>&1 &
	LOAD_PID=$!
	LOAD_LOG_OFFSET=$(stat -c %s "$DIR/log/kube-apiserver.log")
}
# load_stop NAME WHAT: stops the load, prints and checks its counts.
load_stop() {
	local name=$1 what=$2 sent answered failed rate api_errors
	touch "$DIR/stop-$name"
	wait "$LOAD_PID" || true
	read -r sent answered failed rate < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["sent"], d["answered"], d["failed"], d["rate"])' "$DIR/load-$name.json") || {
		cat "$DIR/load-$name.json"
		fail "$what: the load ran"
		return
	}
	api_errors=$(tail -c +"$((LOAD_LOG_OFFSET + 1))" "$DIR/log/kube-apiserver.log" | grep -ci 'failed calling webhook' || true)
	printf '    %s: reviews sent %s, answered %s, failed %s, %s/s; API server "failed calling webhook": %s\n' \
		"$what" "$sent" "$answered" "$failed" "$rate" "$api_errors"
	ROLLOUT_FIGURES+=("$what: sent $sent, answered $answered, failed $failed at $rate/s, API server webhook errors $api_errors")
	[ "$failed" = 0 ] || python3 -c 'import json,sys; [print("    failure:", f) for f in json.load(open(sys.argv[1]))["failures"]]' "$DIR/load-$name.json"
	check "$what: 0 failed webhook calls at >= 50/s" all '[ "$failed" = 0 ]' '[ "$api_errors" = 0 ]' \
		'awk -v r="$rate" "BEGIN { exit !(r >= 50) }"'
}
guard_count() { [ "$(guard_pods | wc -l)" = "$1" ]; }
# settle: the Deployment rolled out and every old pod gone (its shutdown done: the API server's
# idle connections to it closed, within terminationGracePeriodSeconds, 110 s).
settle() {
	k -n "$GUARD_NS" rollout status deployment/longhorn-guard --timeout=180s >/dev/null || fail "rollout finished"
	wait_for 150 guard_count 2 || fail "old guard pods gone"
}
# spread_guard: one guard replica per node (the anti-affinity is only preferred: a rollout
# can put both on one node); moves one with a cordon if needed.
spread_guard() {
	local both
	both=$(guard_pods | awk '{print $2}' | sort | uniq -d)
	[ -n "$both" ] || return 0
	k cordon "$both" >/dev/null
	k -n "$GUARD_NS" delete pod "$(guard_pods | awk 'NR == 1 {print $1}')" --wait=false >/dev/null
	settle
	k uncordon "$both" >/dev/null
}
other_node() { [ "$1" = node-1 ] && echo node-2 || echo node-1; }

check_rollout() {
	local t0 node other
	ROLLOUT_FIGURES=()
	log "c. rollout restart while dry-run evictions arrive at $LOAD_RATE/s"
	load_start rollout "$(im_of node-1)" "$(im_of node-2)"
	sleep 3
	t0=$(now_s)
	k -n "$GUARD_NS" rollout restart deployment/longhorn-guard >/dev/null
	settle
	# Failures print their send time (epoch): compare with this to place them.
	printf '    rollout restart at %s; to old pods gone: %s s\n' "$t0" "$(secs "$t0" "$(now_s)")"
	sleep 2
	load_stop rollout "rollout restart"
	guard_pods | sed 's/^/    pod node ip: /'

	spread_guard
	node=$(guard_pods | awk 'NR == 1 {print $2}')
	if [ -z "$node" ]; then
		fail "c: a guard replica on a node to drain"
		return 0
	fi
	other=$(other_node "$node")
	log "c. the same while draining $node, which hosts one guard replica"
	load_start drain-one "$(im_of "$other")"
	sleep 3
	t0=$(now_s)
	run k drain "$node" "${DRAIN_FLAGS[@]}"
	check "kubectl drain $node finishes" rc_is 0
	settle
	printf '    drain of %s to old pods gone: %s s\n' "$node" "$(secs "$t0" "$(now_s)")"
	sleep 2
	load_stop drain-one "drain of $node (one replica there)"
	restore_node "$node"

	log "c. both guard replicas on node-1, then node-1 drained"
	k cordon node-2 >/dev/null
	k -n "$GUARD_NS" rollout restart deployment/longhorn-guard >/dev/null
	settle
	k uncordon node-2 >/dev/null
	guard_pods | sed 's/^/    pod node ip: /'
	check "both replicas on node-1" test "$(guard_pods | awk '$2 == "node-1"' | wc -l)" = 2
	load_start drain-both "$(im_of node-2)"
	sleep 3
	t0=$(now_s)
	run k drain node-1 "${DRAIN_FLAGS[@]}"
	check "kubectl drain node-1 finishes: the guard's PDB lets one replica go, the other once its replacement is Ready on node-2" \
		all 'rc_is 0' 'has "disruption budget"'
	printf '    drain of node-1 with both replicas: %s s (the PDB held the second eviction until the replacement was Ready)\n' "$(secs "$t0" "$(now_s)")"
	settle
	sleep 2
	load_stop drain-both "drain of node-1 (both replicas there)"
	restore_node node-1
}
