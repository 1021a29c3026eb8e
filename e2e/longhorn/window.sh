# A whole maintenance window on real Longhorn (issue 45, points 1-5; docs/drain.md, "A
# maintenance window, measured"). Sourced by e2e/longhorn/checks.sh; runs alone on a cluster
# `e2e/cluster.sh up` made with E2E_CLUSTER_SUITE=longhorn:
#   e2e/cluster.sh checks longhorn_up install_guard check_window
# and inside `make e2e-longhorn` with E2E_LONGHORN_WINDOW=1 (off by default: it is long).
#
#   E2E_WINDOW_POLICY   Longhorn's node-drain-policy: default (block-if-contains-last-replica) or
#                       always-allow; several, space-separated, run one window each (default)
#   E2E_WINDOW_GUARD    1: with longhorn-guard; 0: its Deployment scaled to 0 and its webhook
#                       configurations deleted for the window, the install applied again after (1)
#   E2E_WINDOW_PASSES   passes over every node (2); E2E_WINDOW_STUCK_S: a drain with no eviction
#                       and no ticket moved for that long counts as stuck, is stopped and its node
#                       not rebooted (900); E2E_WINDOW_DOWN_S: seconds a node stays down (10);
#                       E2E_WINDOW_SETTLE_S: after the window, the wait for every attached volume
#                       healthy before the data check (900)
#
# 1. Data: WINDOW_VOLUMES (2 and 3 replicas, attached and detached, up to 128 MiB of data each).
#    Each is attached once (so that its replicas have directories), detached, and written while
#    no instance manager runs it, through Longhorn's own engine binary (window.py write: its rest
#    frontend, the one data path that needs no iSCSI or ublk on this kernel; window.py's
#    docstring says why), else into the head files as scenario c does; the volumes to attach
#    are attached again.
# 2. The drainer, per node and pass: cordon; `kubectl drain --timeout=0s` (the eviction API,
#    retried on 429 for as long as it takes, as kured and kubectl drain do) with every line it
#    prints kept; a volume the guard names with "move its workload off NODE first", or with
#    "detach it in Longhorn; if a pod does use it, move that pod off NODE first" (no pod uses
#    it: the tickets here are Longhorn API ones, as the UI's), has its attachment ticket moved
#    to another node (detach, then attach there: no CSI here, so this is the rescheduled pod);
#    without the guard, a refusal by Longhorn's budget moves every ticket on the node, and a
#    ticket still on it once drained is moved then; a hard reboot
#    (node_down: kubelet, every container, containerd, whatever is left in the node's cgroups;
#    no detach first), E2E_WINDOW_DOWN_S down, node_start; Ready with a heartbeat after the
#    start; uncordon.
# 3. The sampler (window.py sample): every volume's state, robustness, healthy replicas and
#    rebuilds once a second; the figures (window.py report): cordon to drained per node, the
#    429 reasons, rebuild durations, time degraded and with no healthy replica per volume, the
#    window's duration, faulted volumes, stuck drains; the data check of every healthy replica.
# 5. `check drain --all` before the window, printed, and beside it what each node's first
#    drain met (window.py plan).
# Every lookup prints nothing rather than failing (lib.sh's value and matching): an empty
# answer fails a check, never stops the run.

WINDOW_POLICY=${E2E_WINDOW_POLICY:-default}
WINDOW_GUARD=${E2E_WINDOW_GUARD:-1}
WINDOW_PASSES=${E2E_WINDOW_PASSES:-2}
WINDOW_STUCK_S=${E2E_WINDOW_STUCK_S:-900}
WINDOW_DOWN_S=${E2E_WINDOW_DOWN_S:-10}
WINDOW_SETTLE_S=${E2E_WINDOW_SETTLE_S:-900}
WINDOW_PY=$E2E/longhorn/window.py
WINDOW_SIZE=268435456
# The engine's write (window.py write): replicas from this port on, 10 apart; the controller
# after them; its rest frontend on 9414 (fixed in the engine).
WINDOW_PORT=29600
# NAME REPLICAS NODE(- detached) MiB-OF-DATA
WINDOW_VOLUMES=(
	"win-a2-1 2 node-1 128"
	"win-a2-2 2 node-2 64"
	"win-a3-3 3 node-3 96"
	"win-a3-1 3 node-1 8"
	"win-d2 2 - 64"
	"win-d3 3 - 16"
)

win_ev() { printf '%s %s\n' "$(date +%s.%N)" "$*" >>"$WDIR/events"; }
win_names() { printf '%s\n' "${WINDOW_VOLUMES[@]}" | awk '{print $1}'; }
win_attached() { printf '%s\n' "${WINDOW_VOLUMES[@]}" | awk '$3 != "-" {print $1}'; }
vol_detached() { [[ "$(vol_state "$1")" == detached/* ]]; }
# win_ticket VOLUME: the node of our attachment ticket, or nothing.
win_ticket() { jp volumeattachments.longhorn.io "$1" '{.spec.attachmentTickets.e2e.nodeID}'; }
# win_tickets_on NODE: the window's volumes whose ticket is on NODE.
win_tickets_on() {
	local v
	for v in $(win_attached); do [ "$(win_ticket "$v")" != "$1" ] || echo "$v"; done
}
# win_target NODE: the node after NODE (node-N, cyclic), where a moved workload goes.
win_target() { local i=${1#node-}; echo "node-$((i % NODES + 1))"; }
# win_ready_since N EPOCH: node-N Ready, its Ready condition's heartbeat no older than EPOCH (a
# node that comes back within the grace period never reads NotReady: the heartbeat says the
# kubelet is back).
win_ready_since() {
	local r hb
	r=$(value k get node "node-$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')
	hb=$(value k get node "node-$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}')
	[ "$r" = True ] && [ -n "$hb" ] && awk -v a="$(value epoch "$hb")" -v b="$2" 'BEGIN { exit !(a + 0 >= b) }'
}
# win_healthy_replica REPLICA: healthyAt set, no failedAt.
win_healthy_replica() { [[ "$(jp replicas.longhorn.io "$1" '{.spec.healthyAt}|{.spec.failedAt}')" =~ ^[^|]+\|$ ]]; }
win_all_healthy() {
	local v
	for v in $(win_attached); do vol_is "$v" attached/healthy || return 1; done
}
win_all_detached() {
	local v
	for v in $(win_names); do vol_detached "$v" || return 1; done
}

# win_setup: the volumes made, attached once, detached, written, the attached ones attached again.
win_setup() {
	local line v r node mib dirs d rep how
	: >"$WDIR/expected"
	for line in "${WINDOW_VOLUMES[@]}"; do
		read -r v r node mib <<<"$line"
		lh_volume "$v" "$r" "$WINDOW_SIZE" || fail "window: $v created"
	done
	for line in "${WINDOW_VOLUMES[@]}"; do
		read -r v r node mib <<<"$line"
		wait_for 60 vol_is "$v" detached/unknown || true
		lh_attach "$v" "$([ "$node" = - ] && echo node-1 || echo "$node")" || fail "window: $v attached once"
	done
	for v in $(win_names); do
		wait_for 180 vol_is "$v" attached/healthy || true
		check "window: $v attached once and healthy ($(vol_state "$v"))" vol_is "$v" attached/healthy
		lh_detach "$v" || fail "window: $v detached"
	done
	for v in $(win_names); do wait_for 180 vol_detached "$v" || fail "window: $v detached before its data is written ($(vol_state "$v"))"; done
	for line in "${WINDOW_VOLUMES[@]}"; do
		read -r v r node mib <<<"$line"
		dirs=()
		for rep in $(replicas "$v" | awk '{print $1}'); do
			d=$(replica_dir "$rep")
			if [ -f "$d/volume.meta" ]; then dirs+=("$d"); else fail "window: replica $rep of $v has a directory ('$d')"; fi
		done
		[ "${#dirs[@]}" -gt 0 ] || continue
		if python3 "$WINDOW_PY" write "$LONGHORN_BIN_DIR/longhorn" "$v" "$WINDOW_SIZE" "$v" "$mib" "$WINDOW_PORT" "${dirs[@]}" 2>>"$WDIR/write.log"; then
			how="Longhorn's engine (rest frontend), read back through it"
		elif python3 "$WINDOW_PY" write-heads "$v" "$mib" "${dirs[@]}" 2>>"$WDIR/write.log"; then
			how="the head files (the engine's write failed: $WDIR/write.log)"
		else
			fail "window: $mib MiB written into $v ($WDIR/write.log)"
			continue
		fi
		printf '%s %s\n' "$v" "$(value python3 "$WINDOW_PY" expected "$WINDOW_SIZE" "$v" "$mib")" >>"$WDIR/expected"
		printf '    %s: %s MiB into %s replicas through %s\n' "$v" "$mib" "${#dirs[@]}" "$how"
	done
	for line in "${WINDOW_VOLUMES[@]}"; do
		read -r v r node mib <<<"$line"
		[ "$node" = - ] || lh_attach "$v" "$node" || fail "window: $v attached on $node"
	done
	for v in $(win_attached); do
		wait_for 180 vol_is "$v" attached/healthy || true
		check "window: $v attached on $(win_ticket "$v") and healthy with its data ($(vol_state "$v"))" vol_is "$v" attached/healthy
	done
}

# win_move VOLUME FROM WHY: its ticket moved off FROM (detach, wait, attach on the next node).
win_move() {
	local v=$1 to
	to=$(win_target "$2")
	lh_detach "$v" || fail "window: $v's ticket on $2 removed"
	wait_for 180 vol_detached "$v" || fail "window: $v detached from $2 to follow its workload ($(vol_state "$v"))"
	lh_attach "$v" "$to" || fail "window: $v attached on $to"
	win_ev move "$v $2 $to $3"
	printf '    %s: %s moved to %s (%s)\n' "$(date +%T)" "$v" "$to" "$3"
}

# win_drain NODE PASS: cordon, drain (no time-out) moving tickets as the refusals ask; sets
# WIN_STUCK=1 when nothing moved for WINDOW_STUCK_S (the drain is stopped).
win_drain() {
	local x=$1 pass=$2 log pid seen=0 n new last=$SECONDS evicted=0 e v kind=refused rc alive
	log=$WDIR/drain-p$pass-$x.log
	[ "$pass" = 1 ] || kind=refused-p$pass
	WIN_STUCK=0
	k cordon "$x" >/dev/null 2>&1 || fail "window: kubectl cordon $x"
	win_ev cordon "$x"
	: >"$log"
	k drain "$x" --ignore-daemonsets --delete-emptydir-data --timeout=0s >"$log" 2>&1 &
	pid=$!
	# Each look reads the lines printed since the last; one more after kubectl has ended.
	while :; do
		alive=0
		if kill -0 "$pid" 2>/dev/null; then
			alive=1
			sleep 2
		fi
		n=$(wc -l <"$log")
		new=$(sed -n "$((seen + 1)),${n}p" "$log")
		seen=$n
		while IFS= read -r e; do [ -z "$e" ] || win_ev "$kind" "$x $e"; done < <(matching -E '^- [^:]+: ' <<<"$new")
		e=$(matching -c ' evicted$' <<<"$new")
		if [ "$e" -gt 0 ]; then
			evicted=$((evicted + e))
			last=$SECONDS
		fi
		# The volumes the guard asks to move or detach (read on fd 3: nothing in the loop reads
		# the list); "move that pod" ends the remedy for a volume Longhorn lists no pod for.
		while read -r v <&3; do
			if [ -n "$v" ] && [ "$(win_ticket "$v")" = "$x" ]; then
				win_move "$v" "$x" "the guard's 429"
				last=$SECONDS
			fi
		done 3< <(sed -nE "s/^- ([^: ]+): .*(move its workload( \\(PVC [^)]*\\))?|move that pod) off $x first.*/\\1/p" <<<"$new" | sort -u)
		if [ "$WINDOW_GUARD" = 0 ] && grep -q 'disruption budget' <<<"$new"; then
			for v in $(win_tickets_on "$x"); do
				win_move "$v" "$x" "Longhorn's budget refused"
				last=$SECONDS
			done
		fi
		[ "$alive" = 1 ] || break
		if [ $((SECONDS - last)) -ge "$WINDOW_STUCK_S" ]; then
			WIN_STUCK=1
			kill "$pid" 2>/dev/null || true
			break
		fi
	done
	wait "$pid" && rc=0 || rc=$?
	if [ "$WIN_STUCK" = 1 ]; then
		win_ev stuck "$x"
		printf '    %s: drain of %s STUCK: nothing evicted or moved for %s s; stopped, not rebooted\n' "$(date +%T)" "$x" "$WINDOW_STUCK_S"
		return 0
	fi
	win_ev drained "$x"
	printf '    %s: %s drained (kubectl exit %s, %s pods evicted)\n' "$(date +%T)" "$x" "$rc" "$evicted"
	for v in $(win_tickets_on "$x"); do win_move "$v" "$x" "still on the node once drained"; done
}

# win_reboot NODE: a hard reboot, then Ready and uncordoned.
win_reboot() {
	local x=$1 i=${1#node-} t
	win_ev down "$x"
	node_down "$i"
	sleep "$WINDOW_DOWN_S"
	t=$(date +%s)
	node_start "$i" || fail "window: $x's containerd started again"
	win_ev up "$x"
	if wait_for 300 win_ready_since "$i" "$t"; then
		win_ev ready "$x"
	else
		fail "window: $x Ready again within 300 s of its start"
		win_ev not-ready "$x"
	fi
	k uncordon "$x" >/dev/null 2>&1 || fail "window: kubectl uncordon $x"
	win_ev uncordon "$x"
	printf '    %s: %s rebooted and uncordoned\n' "$(date +%T)" "$x"
}

win_guard_off() {
	k -n "$GUARD_NS" scale deployment longhorn-guard --replicas=0 >/dev/null 2>&1 || fail "window: the guard scaled to 0"
	k delete validatingwebhookconfiguration longhorn-guard --ignore-not-found >/dev/null 2>&1 || true
	k delete mutatingwebhookconfiguration longhorn-guard --ignore-not-found >/dev/null 2>&1 || true
	wait_for 180 guard_gone || true
	# shellcheck disable=SC2016 # all evaluates each condition
	check "window: no guard pod and no webhook configuration of the guard" \
		all guard_gone '[ -z "$(value k get validatingwebhookconfiguration,mutatingwebhookconfiguration -o name | matching /longhorn-guard$)" ]'
}
win_guard_on() {
	# shellcheck disable=SC2153 # DIR: e2e/cluster.sh's; install_guard rendered the install there
	run k apply -f "$DIR/out/manifests.yaml"
	check "window: the guard's install applied again ($DIR/out/manifests.yaml)" rc_is 0
	run k -n "$GUARD_NS" rollout status deployment/longhorn-guard --timeout=300s
	check "window: the guard's replicas available again" rc_is 0
}

# win_verify: every healthy replica of every volume against the expected digest; detached first.
win_verify() {
	local v want rep d got n=0 ok=0 vn vok
	for v in $(win_names); do lh_detach "$v" 2>/dev/null || true; done
	wait_for 300 win_all_detached || fail "window: every volume detached for the data check"
	for v in $(win_names); do
		want=$(awk -v v="$v" '$1 == v {print $2}' "$WDIR/expected")
		vn=0
		vok=0
		for rep in $(replicas "$v" | awk '{print $1}'); do
			win_healthy_replica "$rep" || {
				printf '    %s: replica %s not healthy (%s), not checked\n' "$v" "$rep" "$(jp replicas.longhorn.io "$rep" '{.spec.failedAt}')"
				continue
			}
			d=$(replica_dir "$rep")
			got=$(value python3 "$WINDOW_PY" digest "$WINDOW_SIZE" "$d")
			vn=$((vn + 1))
			if [ -n "$want" ] && [ "$got" = "$want" ]; then vok=$((vok + 1)); fi
			printf '    %s: replica %s on %s: %s\n' "$v" "$rep" "$(jp replicas.longhorn.io "$rep" '{.spec.nodeID}')" \
				"$([ -n "$want" ] && [ "$got" = "$want" ] && echo 'data intact' || echo "DIFFERS (${got:-unreadable})")"
		done
		[ "$vn" -gt 0 ] || printf '    %s: NO healthy replica\n' "$v"
		n=$((n + vn))
		ok=$((ok + vok))
		WIN_DATA+=("$v $vok/$vn")
	done
	WIN_DATA_N=$n
	WIN_DATA_OK=$ok
}

# win_reasons: each distinct refusal kubectl printed in the window (progress and ages folded).
win_reasons() {
	sed -nE 's/^[0-9.]+ refused[-p0-9]* (node-[0-9]+) (.*)/\1 \2/p' "$WDIR/events" | sed -E 's/[0-9]+%/N%/g; s/[0-9]+s ago/Ns ago/g' |
		sort | uniq -c | sort -rn | cut -c1-300
	matching -h -c 'disruption budget' "$WDIR"/drain-*.log | awk '{s += $1} END {if (s) print "      " s " refusals by a disruption budget (no guard reason)"}'
}

win_one() {
	local policy=$1 setting p x t0 sampler rc_report reboots i rebooted stuck line v sampled
	case $policy in
	default) setting=block-if-contains-last-replica ;;
	always-allow) setting=always-allow ;;
	*)
		fail "window: E2E_WINDOW_POLICY=$policy: expected default or always-allow"
		return 0
		;;
	esac
	WDIR=$DIR/window-$policy-guard$WINDOW_GUARD-$(date +%H%M%S)
	mkdir -p "$WDIR"
	: >"$WDIR/events"
	WIN_DATA=()
	log "window ($policy, $([ "$WINDOW_GUARD" = 1 ] && echo with || echo WITHOUT) longhorn-guard): $WINDOW_PASSES passes over $NODES nodes, each drained and rebooted hard; $WDIR"
	lh_setting node-drain-policy "$setting" || fail "window: node-drain-policy $setting"
	printf '    node-drain-policy %s, replica-replenishment-wait-interval %s s\n' "$setting" \
		"$(jp settings.longhorn.io replica-replenishment-wait-interval '{.value}')"
	win_setup
	run "$GUARD_BIN" check drain --all
	printf '%s\n' "$OUT" >"$WDIR/plan.txt"
	value "$GUARD_BIN" check drain --all --output json >"$WDIR/plan.json"
	lh_snapshot "window-$policy-guard$WINDOW_GUARD-before" && cp "$DIR/snapshots/window-$policy-guard$WINDOW_GUARD-before.json" "$WDIR/" 2>/dev/null
	[ "$WINDOW_GUARD" = 1 ] || win_guard_off
	python3 "$WINDOW_PY" sample "$WDIR/samples" "$WDIR/stop" "$KUBECTL" --request-timeout=8s 2>>"$WDIR/sampler.log" &
	sampler=$!
	t0=$(now_s)
	win_ev window-start
	stuck=0
	for p in $(seq 1 "$WINDOW_PASSES"); do
		for i in $(seq 1 "$NODES"); do
			x=node-$i
			log "window pass $p: $x"
			win_drain "$x" "$p"
			if [ "$WIN_STUCK" = 1 ]; then
				stuck=$((stuck + 1))
				k uncordon "$x" >/dev/null 2>&1 || true
				continue
			fi
			win_reboot "$x"
			# The state a rolling window's next drain meets: node-2 just back, its replicas rebuilding.
			if [ "$p$i" = 12 ]; then
				lh_snapshot "window-$policy-guard$WINDOW_GUARD-p1-node-2-rebooted" &&
					cp "$DIR/snapshots/window-$policy-guard$WINDOW_GUARD-p1-node-2-rebooted.json" "$WDIR/" 2>/dev/null
			fi
		done
	done
	win_ev window-end
	figure "window ($policy, guard $WINDOW_GUARD): $WINDOW_PASSES passes in $(secs "$t0" "$(now_s)") s"
	t0=$(now_s)
	wait_for "$WINDOW_SETTLE_S" win_all_healthy || true
	figure "window ($policy, guard $WINDOW_GUARD): attached volumes healthy $(secs "$t0" "$(now_s)") s after the window: $(for v in $(win_attached); do printf '%s=%s ' "$v" "$(vol_state "$v")"; done)"
	touch "$WDIR/stop"
	wait "$sampler" || true
	[ "$WINDOW_GUARD" = 1 ] || win_guard_on
	win_verify
	log "window ($policy, guard $WINDOW_GUARD): figures"
	value python3 "$WINDOW_PY" report "$WDIR/samples" "$WDIR/events" >"$WDIR/report.txt"
	python3 "$WINDOW_PY" report "$WDIR/samples" "$WDIR/events" >/dev/null 2>&1 && rc_report=0 || rc_report=$?
	while IFS= read -r line; do figure "window ($policy, guard $WINDOW_GUARD): $line"; done <"$WDIR/report.txt"
	figure "window ($policy, guard $WINDOW_GUARD): data check $WIN_DATA_OK of $WIN_DATA_N healthy replicas intact: ${WIN_DATA[*]}"
	printf '    the 429 reasons kubectl printed (count, node, reason):\n'
	win_reasons | sed 's/^/      /'
	printf '    the plan before the window (check drain --all):\n'
	sed 's/^/      /' "$WDIR/plan.txt"
	printf '    the plan against what the first pass met:\n'
	value python3 "$WINDOW_PY" plan "$WDIR/plan.json" "$WDIR/events" | sed 's/^/      /'
	rebooted=0
	for i in $(seq 1 "$NODES"); do
		reboots=$(matching -c " ready node-$i\$" "$WDIR/events")
		[ "$reboots" != "$WINDOW_PASSES" ] || rebooted=$((rebooted + 1))
	done
	if [ "$WINDOW_GUARD" = 1 ]; then
		check "window ($policy): every node rebooted $WINDOW_PASSES times ($rebooted of $NODES)" test "$rebooted" = "$NODES"
		check "window ($policy): no drain stuck ($stuck)" test "$stuck" = 0
		sampled=$(awk 'NF == 6 {print $2}' "$WDIR/samples" 2>/dev/null | sort -u | wc -l)
		check "window ($policy): every volume sampled through the window ($sampled of ${#WINDOW_VOLUMES[@]})" test "$sampled" = "${#WINDOW_VOLUMES[@]}"
		check "window ($policy): no volume faulted (report exit $rc_report; $(matching '^faulted' "$WDIR/report.txt"))" test "$rc_report" = 0
		# shellcheck disable=SC2016 # all evaluates each condition
		check "window ($policy): every healthy replica's data intact ($WIN_DATA_OK of $WIN_DATA_N)" \
			all '[ "$WIN_DATA_N" -gt 0 ]' '[ "$WIN_DATA_OK" = "$WIN_DATA_N" ]' '[ "${#WIN_DATA[@]}" = "${#WINDOW_VOLUMES[@]}" ]'
		check "window ($policy): every volume has a healthy replica checked" test -z "$(printf '%s\n' "${WIN_DATA[@]}" | matching ' 0/')"
	else
		# Without the guard, what happened is the figure: nothing here is expected to hold.
		figure "window ($policy, WITHOUT the guard): nodes rebooted $WINDOW_PASSES times $rebooted of $NODES, stuck drains $stuck, report exit $rc_report"
	fi
	for v in $(win_names); do lh_delete_volume "$v"; done
	for v in $(win_names); do wait_for 180 vol_gone "$v" || fail "window: $v deleted"; done
	lh_setting node-drain-policy block-if-contains-last-replica || true
	wait_for 180 ims_running || fail "window: instance managers running at the end"
}

check_window() {
	local policy
	for policy in $WINDOW_POLICY; do win_one "$policy"; done
}
