# Scenario b of the real-Longhorn suite: for each of Longhorn's node-drain-policy values, a
# one-replica volume (its last healthy replica on node X), attached elsewhere or detached, and a
# real `kubectl drain X`. Who refuses: Longhorn's PodDisruptionBudget on X's instance manager
# (read before the drain: the API server consults the guard's webhook first, so a 429 from the
# guard hides the budget's answer), the guard's 429, both; what kubectl prints; the outcome.
# The guard must hold wherever data would be stranded. Sourced.

POLICIES=(block-if-contains-last-replica allow-if-replica-is-stopped always-allow block-for-eviction block-for-eviction-if-contains-last-replica)
DRAIN_TABLE=()
B_DRAIN_TIMEOUT=${B_DRAIN_TIMEOUT:-45}

# im_pod_on NODE: the name of the (first) instance-manager pod on NODE, or nothing.
im_pod_on() {
	[ -n "$1" ] || return 0 # no node: no selector that would match every node's pod
	value lhk get pods -l longhorn.io/component=instance-manager --field-selector "spec.nodeName=$1" \
		-o jsonpath='{.items[*].metadata.name}' | awk '{print $1}'
}
# pdb_says NODE: Longhorn's budget for NODE's instance manager: "absent" or "allowed=N".
pdb_says() {
	local im
	im=$(value lhk get instancemanagers.longhorn.io -l "longhorn.io/node=$1" -o jsonpath='{.items[*].metadata.name}' | awk '{print $1}')
	if [ -n "$im" ] && lhk get pdb "$im" >/dev/null 2>&1; then
		echo "allowed=$(jp pdb "$im" '{.status.disruptionsAllowed}')"
	else
		echo absent
	fi
}
other_node() { # NODE: a node that is not NODE
	local i
	for i in $(seq 1 "$NODES"); do [ "node-$i" = "$1" ] || { echo "node-$i"; return; }; done
}
# attach_away VOLUME X: VOLUME, attached on node-1, attached on a node other than X (its
# replica's node) instead when X is node-1; waits for it and prints that node.
attach_away() {
	local y
	y=$(other_node "$2")
	if [ "$2" = node-1 ]; then
		lh_detach "$1"
		wait_for 60 vol_is "$1" detached/unknown || true
		lh_attach "$1" "$y"
	fi
	wait_for 120 vol_is "$1" attached/healthy || true
	echo "$y"
}

# one_drain POLICY MODE: MODE attached|detached. Adds a row to DRAIN_TABLE.
one_drain() {
	local policy=$1 mode=$2 vol x y pdb rc guard lh_refused outcome t0 dt stranded log timeout
	vol=vol-b-$((${#DRAIN_TABLE[@]} + 1))
	lh_setting node-drain-policy "$policy"
	lh_volume "$vol" 1 268435456
	wait_for 60 vol_is "$vol" detached/unknown || true
	# Attach once wherever Longhorn likes, so the replica exists and has run; then X is its node.
	lh_attach "$vol" node-1
	wait_for 120 vol_is "$vol" attached/healthy || fail "$vol attached and healthy"
	x=$(replica_nodes "$vol" | sed -n 1p)
	if [ -z "$x" ]; then
		fail "$policy, $mode: $vol has a replica on a node to drain ($(vol_state "$vol"))"
		DRAIN_TABLE+=("| $policy | $mode | - | - | - | not run: no replica |")
		lh_detach "$vol"
		lh_delete_volume "$vol"
		wait_for 120 vol_gone "$vol" || true
		return 0
	fi
	if [ "$mode" = attached ]; then
		y=$(attach_away "$vol" "$x")
	else
		lh_detach "$vol"
		wait_for 120 vol_is "$vol" detached/unknown || true
		y=-
	fi
	k cordon "$x" >/dev/null
	sleep 6 # Longhorn's instance-manager controller decides the budget on cordon
	pdb=$(pdb_says "$x")
	# Longhorn's eviction policies move the replica first: give them time to finish.
	timeout=$B_DRAIN_TIMEOUT
	case $policy in block-for-eviction*) timeout=$((B_DRAIN_TIMEOUT * 4)) ;; esac
	log=$DIR/drain-$vol.log
	t0=$(now_s)
	k drain "$x" "${DRAIN_FLAGS[@]:0:2}" --timeout="${timeout}s" >"$log" 2>&1 && rc=0 || rc=$?
	dt=$(secs "$t0" "$(now_s)")
	guard=$(grep -c 'longhorn-guard: draining' "$log" || true)
	lh_refused=$(grep -c 'disruption budget' "$log" || true)
	if [ "$rc" = 0 ]; then outcome="drained in ${dt}s"; else outcome="not drained (timeout ${timeout}s)"; fi
	# Stranded: X drained while it held the volume's last healthy replica at the drain's start.
	stranded=no
	if [ "$rc" = 0 ] && [ "$(replica_nodes "$vol")" = "$x" ]; then stranded=yes; fi
	DRAIN_TABLE+=("| $policy | $mode (engine ${y}) | $pdb | $([ "$guard" -gt 0 ] && echo "429 x$guard" || echo none) | $([ "$lh_refused" -gt 0 ] && echo "PDB x$lh_refused" || echo none) | $outcome |")
	printf '    %s %s: X=%s, Longhorn PDB %s, guard 429s %s, PDB refusals %s, %s; replica now on %s\n' \
		"$policy" "$mode" "$x" "$pdb" "$guard" "$lh_refused" "$outcome" "$(replica_nodes "$vol" | tr '\n' ' ')"
	# What kubectl printed, each distinct line once (pod names and the guard's reasons kept).
	sed -E 's/^(error when evicting pods\/"[^"]*" -n "[^"]*") \(will retry after 5s\): /\1: /' "$log" | sort | uniq -c | sort -rn | sed -n 1,8p | cut -c1-400 | sed 's/^/      kubectl: /'
	check "$policy, $mode: no drain strands the last healthy replica (stranded: $stranded)" test "$stranded" = no
	if [ "$policy" = always-allow ]; then
		check "$policy, $mode: the guard holds where Longhorn allows" test "$guard" -gt 0
	fi
	k uncordon "$x" >/dev/null
	lh_detach "$vol"
	lh_delete_volume "$vol"
	wait_for 120 vol_gone "$vol" || true
	wait_for 180 ims_running || fail "instance managers running again after $policy $mode"
}

check_policy_drains() {
	local p m
	log "b. kubectl drain X, X holding a volume's last healthy replica, for each node-drain-policy"
	for p in "${POLICIES[@]}"; do
		for m in attached detached; do one_drain "$p" "$m"; done
	done
	lh_setting node-drain-policy block-if-contains-last-replica
	figure "b. drain table (Longhorn's PDB read after cordon; 429/PDB: refusals kubectl printed)"
	figure "| node-drain-policy | volume | Longhorn PDB | guard | PDB refusals printed | kubectl drain |"
	for row in "${DRAIN_TABLE[@]}"; do figure "$row"; done
}
