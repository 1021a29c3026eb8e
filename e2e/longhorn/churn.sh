# Scenarios e and d of the real-Longhorn suite. Sourced.
#   e. No false allow through Longhorn's own churn: with node-drain-policy always-allow (so no
#      budget of Longhorn's answers), dry-run evictions of the instance manager that holds a
#      volume's last healthy replica, twice a second, while every manager pod and another
#      node's instance manager are restarted; not one may be allowed. Then the guard's view
#      still equals kubectl get for every kind.
#   d. longhorn#10833: a Kubernetes Node holding one replica of a detached volume is deleted
#      (the guard allows it: another healthy copy exists); then the node holding the other
#      replica is drained, and what Longhorn's budgets and manager do is reported (the manager
#      looks up the deleted node for that budget); `check drain` must name what holds the drain
#      and a safe remedy. Last, since the deleted Node does not come back.

api_post_eviction() { # POD: a dry-run eviction as the cluster admin; prints "CODE guard|other"
	local body
	body=$(curl -s -o - -w '\n%{http_code}' --max-time 10 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
		-X POST -H 'Content-Type: application/json' \
		-d "{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{\"name\":\"$1\",\"namespace\":\"$LH_NS\"}}" \
		"https://$CTL_IP:$API_PORT/api/v1/namespaces/$LH_NS/pods/$1/eviction?dryRun=All")
	printf '%s %s\n' "$(tail -n1 <<<"$body")" "$(grep -q 'longhorn-guard' <<<"$body" && echo guard || echo other)"
}

check_churn() {
	local vol=vol-e x y im yim stop t0 counts allowed
	log "e. no false allow through Longhorn's churn (manager pods and an instance manager restarted)"
	lh_setting node-drain-policy always-allow
	lh_volume "$vol" 1 268435456
	wait_for 60 vol_is "$vol" detached/unknown || true
	lh_attach "$vol" node-1
	wait_for 120 vol_is "$vol" attached/healthy || fail "$vol attached and healthy"
	x=$(replica_nodes "$vol" | sed -n 1p)
	y=$(other_node "$x")
	im=$(im_pod_on "$x")
	yim=$(im_pod_on "$y")
	if [ -z "$im" ] || [ -z "$yim" ]; then
		fail "e: $vol has a replica node with an instance manager, and another node has one ('$x': '$im', '$y': '$yim')"
		lh_detach "$vol"
		lh_delete_volume "$vol"
		lh_setting node-drain-policy block-if-contains-last-replica
		return 0
	fi
	printf '    %s: last healthy replica on %s (instance manager %s); restarting managers and %s instance manager\n' "$vol" "$x" "$im" "$y"
	stop=$DIR/churn.stop
	rm -f "$stop"
	t0=$(now_s)
	(while [ ! -f "$stop" ]; do api_post_eviction "$im"; sleep 0.5; done >"$DIR/churn-evictions.log") &
	local lpid=$!
	sleep 3
	lhk delete pod -l app=longhorn-manager --wait=false >/dev/null
	sleep 5
	# As Longhorn replaces its own instance managers: an operator's delete of an instance manager
	# under an attached engine is refused by the guard (scenario f), Longhorn's own is not.
	lhk delete pod "$yim" --wait=false --ignore-not-found \
		--as=system:serviceaccount:longhorn-system:longhorn-service-account >/dev/null
	wait_for 240 managers_ready || fail "managers Ready again"
	wait_for 240 ims_running || fail "instance managers running again"
	wait_for 120 vol_is "$vol" attached/healthy || true
	sleep 10
	touch "$stop"
	wait "$lpid" || true
	counts=$(sort "$DIR/churn-evictions.log" | uniq -c | sed 's/^ *//' | tr '\n' ';')
	allowed=$(grep -c '^201 ' "$DIR/churn-evictions.log" || true)
	figure "e. $(wc -l <"$DIR/churn-evictions.log") dry-run evictions of $im over $(secs "$t0" "$(now_s)") s of churn: $counts"
	check "no eviction of the last healthy replica's instance manager allowed during churn ($allowed allowed)" test "$allowed" = 0
	check "the guard answered them (429 with its message)" grep -q '^429 guard' "$DIR/churn-evictions.log"
	wait_for 60 view_counts >/dev/null || true
	check "after the churn the guard's view counts equal kubectl get for every kind" view_counts
	lh_detach "$vol"
	lh_delete_volume "$vol"
	lh_setting node-drain-policy block-if-contains-last-replica
}

check_10833() {
	local vol=vol-d p q r rc
	log "d. longhorn#10833: a deleted Node that held a replica of a detached volume, then a drain elsewhere"
	lh_volume "$vol" 2 268435456
	wait_for 60 vol_is "$vol" detached/unknown || true
	lh_attach "$vol" node-1
	wait_for 120 vol_is "$vol" attached/healthy || fail "$vol attached and healthy"
	lh_detach "$vol"
	wait_for 120 vol_is "$vol" detached/unknown || true
	read -r p q <<<"$(replica_nodes "$vol" | tr '\n' ' ')"
	r=$q
	if [ -z "$p" ] || [ -z "$q" ]; then
		fail "d: $vol has replicas on two nodes ('$p', '$q')"
		lh_delete_volume "$vol"
		return 0
	fi
	printf '    %s detached, replicas on %s and %s; deleting Node %s, then draining %s\n' "$vol" "$p" "$q" "$p" "$r"
	# The node is gone for good: its kubelet first, as when a machine is removed.
	stop_named "kubelet-${p#node-}"
	run k delete node "$p"
	check "kubectl delete node $p is allowed (another healthy copy of $vol is on $q)" rc_is 0
	sleep 20
	lhk get pdb | sed 's/^/    pdb: /'
	k cordon "$r" >/dev/null
	sleep 6
	k drain "$r" "${DRAIN_FLAGS[@]:0:2}" --timeout=60s >"$DIR/drain-d.log" 2>&1 && rc=0 || rc=$?
	matching -m3 -E 'evict|error' "$DIR/drain-d.log" | cut -c1-220 | sed 's/^/    drain: /'
	figure "d. after deleting $p: kubectl drain $r exit $rc; Longhorn budgets: $(lhk get pdb --no-headers 2>/dev/null | awk '{print $1 " allowed=" $4}' | tr '\n' ' ')"
	# What the managers log about it, each distinct error once.
	lhk logs -l app=longhorn-manager --since=180s --tail=-1 2>/dev/null | grep -E 'level=(error|warning)' |
		sed -nE 's/.*msg="([^"]*)".* error="(([^"\\]|\\.){0,200}).*/\1: \2/p' | sort | uniq -c | sort -rn | head -6 | sed 's/^/    manager: /' || true
	run "$GUARD_BIN" check drain "$r"
	check "kubectl drain $r does not take $vol's last healthy copy (exit $rc)" test "$rc" != 0
	check "check drain $r names $vol and where its other replica went" has "$vol"
	check "check drain $r names the budget that holds the drain" has "poddisruptionbudget longhorn-system/"
	check "check drain $r gives a remedy for each" has "remedy:"
	k uncordon "$r" >/dev/null
}
