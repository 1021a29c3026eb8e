# Scenario c of the real-Longhorn suite: a real rebuild. A volume of 2 replicas holds data
# (written into each replica's head file: with no frontend there is no block device to write
# through); replica traffic is paced by tc on the node bridges so that the rebuild lasts long
# enough to be seen between 0 and 100%. One replica is failed (its Replica deleted, as Longhorn's
# own UI does), Longhorn rebuilds it on another node, `check drain X --wait` (X holds the last
# healthy replica) follows the real progress and returns once the rebuild is done, and the
# drain of X then goes through. Sourced.

C_DATA_MB=${C_DATA_MB:-256}
C_RATE=${C_RATE:-48mbit}

replica_dir() { # REPLICA: its data directory on this host
	jp replicas.longhorn.io "$1" '{.spec.diskPath}/replicas/{.spec.dataDirectoryName}'
}
pace() { # on|off: tc on every node bridge (egress towards that node's pods)
	local i
	for i in $(seq 1 "$NODES"); do
		if [ "$1" = on ]; then
			tc qdisc replace dev "$(node_br "$i")" root tbf rate "$C_RATE" burst 256kb latency 2s
		else
			tc qdisc del dev "$(node_br "$i")" root 2>/dev/null || true
		fi
	done
}
# rebuild_sample VOLUME: "mode map | rebuild status" of its engine, one line.
rebuild_sample() {
	value lhk get engines.longhorn.io -l "longhornvolume=$1" -o json | python3 -c '
import json, sys
try:
    items = json.load(sys.stdin)["items"]
except ValueError:
    items = []  # the API server did not answer this time
e = items[0]["status"] if items else {}
modes = " ".join("%s=%s" % kv for kv in sorted((e.get("replicaModeMap") or {}).items()))
rs = []
for addr, st in sorted((e.get("rebuildStatus") or {}).items()):
    rs.append("%s:%s%%%s%s" % (addr, st.get("progress", 0), " rebuilding" if st.get("isRebuilding") else "",
                               " " + st["state"] if st.get("state") else ""))
print("%s | %s" % (modes, " ".join(rs) or "-"))'
}
# rebuilt SAMPLE: both replicas RW in the engine's mode map, none WO.
rebuilt() { [ "$(grep -o '=RW' <<<"${1%%|*}" | wc -l)" = 2 ] && ! grep -q '=WO' <<<"$1"; }

check_rebuild() {
	local vol=vol-c e x f r dir head t0 t_fail t_wait_done t_rebuilt="" t_last_wo="" wait_rc drain_rc mid=0 s line
	log "c. a real rebuild: $C_DATA_MB MiB in each replica, replica traffic paced at $C_RATE"
	lh_setting node-drain-policy block-if-contains-last-replica
	lh_volume "$vol" 2 2147483648
	wait_for 60 vol_is "$vol" detached/unknown || true
	lh_attach "$vol" node-1
	wait_for 180 vol_is "$vol" attached/healthy || fail "$vol attached and healthy"
	e=$(jp volumes.longhorn.io "$vol" '{.status.currentNodeID}')
	# X: a replica node without the engine; F: the replica to fail (the other one).
	x=$(replicas "$vol" | awk -v e="$e" '$2 != e {print $2; exit}')
	f=$(replicas "$vol" | awk -v x="$x" '$2 != x {print $1; exit}')
	replicas "$vol" | sed 's/^/    replica: /'
	printf '    engine on %s; X=%s keeps the last healthy replica once %s fails\n' "$e" "$x" "$f"
	if [ -z "$e" ] || [ -z "$x" ] || [ -z "$f" ]; then
		fail "c: $vol has its engine, a replica elsewhere (X) and one to fail ($(vol_state "$vol"))"
		lh_detach "$vol"
		lh_delete_volume "$vol"
		return 0
	fi
	head -c "$((C_DATA_MB * 1024 * 1024))" /dev/urandom >"$DIR/vol-c.data"
	for r in $(replicas "$vol" | awk '{print $1}'); do
		dir=$(replica_dir "$r")
		head=$(value ls "$dir"/volume-head-*.img | tail -n1)
		[ -n "$head" ] || {
			fail "c: replica $r has a head file to write into (in '$dir')"
			continue
		}
		dd if="$DIR/vol-c.data" of="$head" bs=1M conv=notrunc,fsync status=none
		printf '    wrote %s MiB into %s (%s allocated)\n' "$C_DATA_MB" "$head" "$(du -h "$head" | cut -f1)"
	done
	rm -f "$DIR/vol-c.data"
	pace on
	t0=$(now_s)
	lhk delete replicas.longhorn.io "$f" --wait=false >/dev/null
	t_fail=$(now_s)
	# The wait's own exit time and status, written as it returns.
	rm -f "$DIR/wait-c.done"
	( "$GUARD_BIN" check drain "$x" --wait --timeout 15m >"$DIR/wait-c.log" 2>&1 && rc=0 || rc=$?
		echo "$rc $(now_s)" >"$DIR/wait-c.done") &
	local wpid=$!
	: >"$DIR/rebuild-c.log"
	for s in $(seq 1 900); do
		line=$(rebuild_sample "$vol")
		printf '%s +%ss %s\n' "$(date +%T)" "$(secs "$t0" "$(now_s)")" "$line" >>"$DIR/rebuild-c.log"
		if grep -qE ':([1-9]|[1-9][0-9])% rebuilding' <<<"$line" && [ "$mid" = 0 ]; then
			mid=1
			lh_snapshot rebuilding
		fi
		if grep -q '=WO' <<<"$line"; then t_last_wo=$(now_s); fi
		if [ -z "$t_rebuilt" ] && [ "$mid" = 1 ] && rebuilt "$line"; then t_rebuilt=$(now_s); fi
		kill -0 "$wpid" 2>/dev/null || [ -z "$t_rebuilt" ] || break
		sleep 1
	done
	wait "$wpid" || true
	read -r wait_rc t_wait_done <"$DIR/wait-c.done" || true
	# One sample line per change of the engine's rebuild status.
	awk '{k = $0; sub(/^[^ ]+ [^ ]+ /, "", k); if (k != last) print; last = k}' "$DIR/rebuild-c.log" | sed 's/^/    engine: /'
	sed 's/^/    check drain --wait: /' "$DIR/wait-c.log"
	check "the engine reported the rebuild between 0 and 100% at least once" test "$mid" = 1
	check "check drain $x --wait printed a progress between 0 and 100%" grep -qE 'rebuild ([1-9]|[1-9][0-9])%' "$DIR/wait-c.log"
	check "check drain $x --wait returned 0 (exit $wait_rc)" test "$wait_rc" = 0
	check "the rebuild completed (both replicas RW)" test -n "$t_rebuilt"
	check "--wait returned only after the last sample with the replica still WO" \
		awk -v w="$t_wait_done" -v l="${t_last_wo:-0}" 'BEGIN { exit !(w > l) }' 
	pace off
	drain_bg "$x"
	wait "$DRAIN_PID" && drain_rc=0 || drain_rc=$?
	tail -n 3 "$DIR/drain-$x.log" | sed 's/^/    drain: /'
	check "kubectl drain $x goes through after the rebuild (exit $drain_rc)" test "$drain_rc" = 0
	figure "c. rebuild timeline (s from the replica's failure): rebuild done $([ -n "$t_rebuilt" ] && secs "$t_fail" "$t_rebuilt" || echo never), check drain --wait returned $(secs "$t_fail" "$t_wait_done") (exit $wait_rc), drain of $x done $(secs "$t_fail" "$(now_s)") (exit $drain_rc)"
	figure "c. progress samples: $(grep -oE '[0-9]+% rebuilding' "$DIR/rebuild-c.log" | uniq | tr '\n' ' ')"
	k uncordon "$x" >/dev/null
	lh_detach "$vol"
	lh_delete_volume "$vol"
	wait_for 180 ims_running || fail "instance managers running again after the drain of $x"
	wait_for 180 managers_ready || fail "managers Ready again after the drain of $x"
}
