# Check c of the real-kubelet suite: serving pods replaced while reviews arrive. Dry-run
# evictions of instance-manager pods go through the API server at LOAD_RATE (60/s) for the
# whole of: a rollout restart; a drain of the node hosting one guard replica; a drain of the
# node hosting both. Failed webhook calls are counted on both sides: the load's non-answers
# and the API server's "failed calling webhook" log lines. Sourced.
# check_rollouts (not in run_checks: about 80 minutes) repeats the first two many times.

LOAD_RATE=${E2E_CLUSTER_LOAD_RATE:-60}
ROLLOUTS=${E2E_CLUSTER_ROLLOUTS:-20}
DRAINS=${E2E_CLUSTER_DRAINS:-20}
# LOAD_CREATE: a namespace where half the load is dry-run instance-manager pod creations
# (evict_load.py --create); empty: evictions only.
LOAD_CREATE=

load_start() { # NAME POD...: evict_load.py in the background
	local name=$1 pod args=()
	shift
	for pod in "$@"; do args+=(--pod "$LH_NS/$pod"); done
	[ -z "$LOAD_CREATE" ] || args+=(--create "$LOAD_CREATE")
	rm -f "$DIR/stop-$name"
	python3 "$E2E/cluster/evict_load.py" --server "https://$CTL_IP:$API_PORT" --ca "$PKI/ca.crt" \
		--cert "$PKI/admin.crt" --key "$PKI/admin.key" --rate "$LOAD_RATE" --stop-file "$DIR/stop-$name" \
		"${args[@]}" >"$DIR/load-$name.json" 2>&1 &
	LOAD_PID=$!
	LOAD_LOG_OFFSET=$(stat -c %s "$DIR/log/kube-apiserver.log")
}
# load_end NAME WHAT: stops the load and reads its counts into SENT LOAD_FAILED RATE EVICTIONS
# CREATIONS API_ERRORS (failed: evictions not answered, creations not gated; API_ERRORS: the
# API server's "failed calling webhook" lines since load_start, the Ignore webhook's "failing
# open" ones included) and prints the first failures; status 1 (counted as a failure) when the
# load did not run.
load_end() {
	touch "$DIR/stop-$1"
	wait "$LOAD_PID" || true
	read -r SENT LOAD_FAILED RATE EVICTIONS CREATIONS < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
print(d["sent"], d["failed"], d["rate"], d["evictions"]["sent"], d["creations"]["sent"])' "$DIR/load-$1.json") || {
		cat "$DIR/load-$1.json"
		fail "$2: the load ran"
		return 1
	}
	API_ERRORS=$(tail -c +"$((LOAD_LOG_OFFSET + 1))" "$DIR/log/kube-apiserver.log" | grep -ci 'failed calling webhook' || true)
	[ "$LOAD_FAILED" = 0 ] || python3 -c 'import json,sys; [print("    failure:", f) for f in json.load(open(sys.argv[1]))["failures"]]' "$DIR/load-$1.json"
}
# load_stop NAME WHAT: stops the load, prints and checks its counts.
load_stop() {
	local what=$2
	load_end "$1" "$what" || return 0
	printf '    %s: reviews sent %s, answered %s, failed %s, %s/s; API server "failed calling webhook": %s\n' \
		"$what" "$SENT" "$((SENT - LOAD_FAILED))" "$LOAD_FAILED" "$RATE" "$API_ERRORS"
	ROLLOUT_FIGURES+=("$what: sent $SENT, answered $((SENT - LOAD_FAILED)), failed $LOAD_FAILED at $RATE/s, API server webhook errors $API_ERRORS")
	check "$what: 0 failed webhook calls at >= 50/s" all '[ "$LOAD_FAILED" = 0 ]' '[ "$API_ERRORS" = 0 ]' \
		'awk -v r="$RATE" "BEGIN { exit !(r >= 50) }"'
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

# round_stop NAME WHAT TIMES: stops the load, prints one line with its counts and TIMES, and
# adds them to the totals.
round_stop() {
	load_end "$1" "$2" || return 0
	printf '    %s: %s; reviews %s (%s evictions, %s pod creations) at %s/s, lost %s, API server webhook errors %s\n' \
		"$2" "$3" "$SENT" "$EVICTIONS" "$CREATIONS" "$RATE" "$LOAD_FAILED" "$API_ERRORS"
	ROUND_SENT=$((ROUND_SENT + SENT))
	ROUND_LOST=$((ROUND_LOST + LOAD_FAILED))
	ROUND_API=$((ROUND_API + API_ERRORS))
	awk -v r="$RATE" 'BEGIN { exit !(r >= 50) }' || ROUND_SLOW+=("$2: $RATE/s")
}
# spread SECONDS...: "min / median / max s" of the figures.
spread() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f / %.1f / %.1f s", v[1], (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[NR] }'
}

# check_rollouts: issue 47's acceptance. ROLLOUTS (E2E_CLUSTER_ROLLOUTS, 20) rollout restarts of
# the guard, then DRAINS (E2E_CLUSTER_DRAINS, 20) drains of a node running one guard replica,
# each under LOAD_RATE (60) reviews a second, half dry-run evictions of instance-manager pods
# (the Fail webhook) and half dry-run instance-manager pod creations (the Ignore one, which must
# add the gate): 0 reviews lost, counted by the load and in the API server's log. Prints each
# round and the spread of its times: for a rollout, to `rollout status` done and to the old pods
# gone; for a drain, `kubectl drain` itself (it waits for the guard pod on the node to go) and to
# the old pod gone. On a cluster `up` made:
#   e2e/cluster.sh checks longhorn_standin install_guard check_rollouts
check_rollouts() {
	local i t0 t1 t2 node other rolled=() gone=() drained=() dgone=() phase_sent
	local LOAD_CREATE=$LH_NS
	ROUND_SENT=0 ROUND_LOST=0 ROUND_API=0 ROUND_SLOW=()
	log "c. $ROLLOUTS rollout restarts, each under $LOAD_RATE reviews a second (evictions and pod creations)"
	for ((i = 1; i <= ROLLOUTS; i++)); do
		load_start "rollout-$i" "$(im_of node-1)" "$(im_of node-2)"
		sleep 3
		t0=$(now_s)
		k -n "$GUARD_NS" rollout restart deployment/longhorn-guard >/dev/null
		k -n "$GUARD_NS" rollout status deployment/longhorn-guard --timeout=180s >/dev/null || fail "rollout $i finished"
		t1=$(now_s)
		wait_for 150 guard_count 2 || fail "rollout $i: old guard pods gone"
		t2=$(now_s)
		sleep 2
		rolled+=("$(secs "$t0" "$t1")")
		gone+=("$(secs "$t0" "$t2")")
		round_stop "rollout-$i" "rollout $i" "rolled out ${rolled[-1]} s, old pods gone ${gone[-1]} s"
	done
	ROLLOUT_FIGURES+=("$ROLLOUTS rollouts: $ROUND_SENT reviews, $ROUND_LOST lost, API server webhook errors $ROUND_API; rolled out $(spread "${rolled[@]}"), old pods gone $(spread "${gone[@]}") (min / median / max)")
	printf '    %s\n' "${ROLLOUT_FIGURES[-1]}"
	check "$ROLLOUTS rollouts under load: 0 reviews lost" test "$ROUND_LOST $ROUND_API" = "0 0"
	phase_sent=$ROUND_SENT

	log "c. $DRAINS drains of a node running one guard replica, each under $LOAD_RATE reviews a second"
	ROUND_SENT=0 ROUND_LOST=0 ROUND_API=0
	for ((i = 1; i <= DRAINS; i++)); do
		spread_guard
		node=$(guard_pods | awk 'NR == 1 {print $2}')
		if [ -z "$node" ]; then
			fail "drain $i: a guard replica on a node to drain"
			continue
		fi
		other=$(other_node "$node")
		load_start "drain-$i" "$(im_of "$other")"
		sleep 3
		t0=$(now_s)
		k drain "$node" "${DRAIN_FLAGS[@]}" >"$DIR/drain-round.log" 2>&1 || fail "drain $i of $node finished"
		t1=$(now_s)
		settle
		t2=$(now_s)
		sleep 2
		drained+=("$(secs "$t0" "$t1")")
		dgone+=("$(secs "$t0" "$t2")")
		round_stop "drain-$i" "drain $i of $node" "drained ${drained[-1]} s, old pod gone ${dgone[-1]} s"
		restore_node "$node"
	done
	ROLLOUT_FIGURES+=("$DRAINS drains: $ROUND_SENT reviews, $ROUND_LOST lost, API server webhook errors $ROUND_API; kubectl drain $(spread "${drained[@]}"), old pod gone $(spread "${dgone[@]}") (min / median / max)")
	printf '    %s\n' "${ROLLOUT_FIGURES[-1]}"
	check "$DRAINS drains under load: 0 reviews lost" test "$ROUND_LOST $ROUND_API" = "0 0"
	check "the load kept >= 50 reviews a second in every round (${#ROUND_SLOW[@]} slower: ${ROUND_SLOW[*]})" \
		test "${#ROUND_SLOW[@]}" = 0
	printf '    reviews in all: %s\n' "$((phase_sent + ROUND_SENT))"
}
