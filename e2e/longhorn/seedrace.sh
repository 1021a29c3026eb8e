# The seed's failure for real (make e2e-longhorn-multus): Multus $E2E_MULTUS as each node's CNI
# entry point, Longhorn's storage network on lgstor0, and the pod network cut between nodes for
# the replica and engine ports (e2e/longhorn/multus.sh). A node "reboots" and its instance
# manager's sandbox comes up before Multus's config is back: the way that lasts on Longhorn
# v1.12.1, which re-reads the pod's Multus status on every instance sync (a pod made without
# Multus never gets one; a late status write holds the sandbox back instead: s5,
# latestatus.sh). A replica of vol-f (with
# data) is then rebuilt onto that node:
#   s1. without the guard's gate: the storage IP Longhorn chose, the engine's replica addresses,
#       F_STALL_S seconds of rebuild samples, check cluster's finding; then the pod deleted by
#       hand, as the remedy says, and the rebuild done;
#   s2. with the gate from the mutating webhook, s3. from the MutatingAdmissionPolicy with no
#       guard pod running: the gate fails the raced pod, Longhorn makes it again with the
#       storage network, the rebuild completes;
#   s4. the gate reading networks-status alone (v3.9.3: the real Multus's own old key).
# Each prints its timeline (seconds from the scenario's start). Sourced.

F_STALL_S=${F_STALL_S:-300}
F_DATA_MB=${F_DATA_MB:-256}
MULTUS_LATE_S=${MULTUS_LATE_S:-1}
F_RATE=${F_RATE:-48mbit}

tl() { # EVENT...: one timeline line, seconds from T0, kept for the summary in $DIR/timeline-$SCEN
	local line
	line=$(printf '%8s s  %s' "$(secs "$T0" "$(now_s)")" "$*")
	printf '%s\n' "$line" >>"$DIR/timeline-$SCEN"
	printf '    %s\n' "$line"
}
not() { ! "$@"; }
has_flat() { tr -s ' \n' '  ' <<<"$OUT" | grep -qF -- "$1"; }
pod_uid() { value lhk get pod "$1" -o jsonpath='{.metadata.uid}'; }
pod_ip() { value lhk get pod "$1" -o jsonpath='{.status.podIP}'; }
new_pod() { local u; u=$(pod_uid "$1"); [ -n "$u" ] && [ "$u" != "$2" ]; }
has_sandbox() { [ -n "$(pod_ip "$1")" ]; }
im_state() { value lhk get instancemanagers.longhorn.io "$1" -o jsonpath='{.status.currentState}'; }
im_running() { [ "$(im_state "$1")" = running ] && [ "$(lhk get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; }
lh_node_sched() { lhk patch nodes.longhorn.io "$1" --type merge -p "{\"spec\":{\"allowScheduling\":$2}}" >/dev/null; }
gate_exit() { value lhk get pod "$1" -o jsonpath='{.status.initContainerStatuses[?(@.name=="longhorn-guard-gate")].state.terminated.exitCode}'; }
gate_done() { [ -n "$(gate_exit "$1")" ]; }
gate_msg() { value lhk logs "$1" -c longhorn-guard-gate | matching "${2:-.}" | tail -1 | sed 's/.*longhorn_guard::gate: //' | cut -c1-200; }
keys_are() { [ "$(status_keys "$1")" = "$2" ]; }
guard_gone() { [ -z "$(k -n "$GUARD_NS" get pods -l "$GUARD_SEL" -o name 2>/dev/null)" ]; }
has_gate() { lhk get pod "$1" -o jsonpath='{.spec.initContainers[*].name}' 2>/dev/null | grep -qw longhorn-guard-gate; }

# replica_table: each replica of vol-f: name, node, state, status.ip, status.storageIP.
replica_table() {
	lhk get replicas.longhorn.io -l longhornvolume=vol-f -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeID} {.status.currentState} ip={.status.ip} storageIP={.status.storageIP}{"\n"}{end}'
}
# replica_on NODE REGEX: a replica of vol-f on NODE whose storageIP matches REGEX.
replica_on() { grep -q " $1 .*storageIP=$2" <<<"$(replica_table)"; }
# engine_addrs: the replica addresses vol-f's engine dials, and its storage IP.
engine_addrs() {
	value lhk get engines.longhorn.io -l longhornvolume=vol-f -o json | python3 -c '
import json, sys
try:
    items = json.load(sys.stdin)["items"]
except ValueError:
    items = []  # the API server did not answer this time
e = items[0] if items else {"spec": {}, "status": {}}
print("engine storageIP=%s replicas: %s" % (e["status"].get("storageIP") or "-",
      " ".join("%s=%s" % kv for kv in sorted((e["spec"].get("replicaAddressMap") or {}).items())) or "-"))'
}

# f_volume OTHER: vol-f, 2 replicas on node-1 and OTHER (the other nodes unschedulable),
# attached on node-1 with no frontend, F_DATA_MB MiB written into each replica's head.
f_volume() {
	local other=$1 n r head
	lh_setting replica-replenishment-wait-interval 0
	for n in $(seq 2 "$NODES"); do [ "node-$n" = "$other" ] || lh_node_sched "node-$n" false; done
	lh_volume vol-f 2 2147483648
	wait_for 60 vol_is vol-f detached/unknown || true
	lh_attach vol-f node-1
	wait_for 180 vol_is vol-f attached/healthy || true
	check "vol-f attached on node-1 and healthy ($(vol_state vol-f))" vol_is vol-f attached/healthy
	head -c "$((F_DATA_MB * 1024 * 1024))" /dev/urandom >"$DIR/vol-f.data"
	for r in $(replicas vol-f | awk '{print $1}'); do
		head=$(value ls "$(replica_dir "$r")"/volume-head-*.img | tail -n1)
		[ -n "$head" ] || {
			fail "s0: replica $r of vol-f has a head file to write into"
			continue
		}
		dd if="$DIR/vol-f.data" of="$head" bs=1M conv=notrunc,fsync status=none
	done
	rm -f "$DIR/vol-f.data"
	replica_table | sed 's/^/    vol-f replica: /'
	engine_addrs | sed 's/^/    /'
	printf '    %s MiB written into each replica head\n' "$F_DATA_MB"
}

# trigger_rebuild X OTHER: OTHER's replica deleted, X the only node Longhorn may rebuild it on.
trigger_rebuild() {
	local r
	lh_node_sched "$1" true
	lh_node_sched "$2" false
	r=$(replicas vol-f | awk -v o="$2" '$2 == o {print $1; exit}')
	if [ -z "$r" ]; then
		fail "vol-f has a replica on $2 to delete"
		return 0
	fi
	lhk delete replicas.longhorn.io "$r" --wait=false >/dev/null
	tl "replica $r on $2 deleted: Longhorn must rebuild vol-f onto $1"
}

# pace_storage on|off: the storage network's traffic into each pod paced at F_RATE (tc on the
# host side of every lgstor0 port), so that a rebuild lasts long enough to be seen in progress.
pace_storage() {
	local dev
	for dev in $(ip -o link show master "$STOR_BR" | awk -F': ' '{print $2}' | cut -d@ -f1); do
		if [ "$1" = on ]; then
			tc qdisc replace dev "$dev" root tbf rate "$F_RATE" burst 256kb latency 2s
		else
			tc qdisc del dev "$dev" root 2>/dev/null || true
		fi
	done
}

# sample_rebuild SECONDS [until-done]: the engine's rebuild status each second into
# $DIR/rebuild-$SCEN.log; with until-done, stops once both replicas are RW (returns 0 then).
sample_rebuild() {
	local end=$((SECONDS + $1)) line t_first="" mid=0
	: >"$DIR/rebuild-$SCEN.log"
	while [ "$SECONDS" -lt "$end" ]; do
		line=$(rebuild_sample vol-f)
		printf '+%ss %s\n' "$(secs "$T0" "$(now_s)")" "$line" >>"$DIR/rebuild-$SCEN.log"
		if [ "$mid" = 0 ] && grep -q '=WO' <<<"$line"; then mid=1; fi
		if [ "${2:-}" = until-done ] && [ "$mid" = 1 ] && rebuilt "$line"; then return 0; fi
		sleep 1
	done
	return 1
}
# rebuild_log: one line per change of the engine's status (time, modes | rebuild status).
rebuild_log() { awk '{k = $0; sub(/^[^ ]+ /, "", k); if (k != last) print; last = k}' "$DIR/rebuild-$SCEN.log" | sed 's/^/    engine: /'; }
progress_seen() { grep -oE ':[0-9]+% rebuilding' "$DIR/rebuild-$SCEN.log" | uniq | tr -d ':' | tr '\n' ' '; }

# reboot_node X: X "reboots": its kubelet stops and Multus's config goes with Multus's pod
# (cleanup-config-on-exit); the instance manager's processes die and its pod is gone. Longhorn
# makes the pod again; the kubelet comes back and makes its sandbox while the CNI directory
# holds the node network alone; Multus's config is back MULTUS_LATE_S after that sandbox.
# RACED_POD is the pod, or empty (a failed check) when X has no instance-manager pod.
reboot_node() {
	local x=$1 i=${1#node-} p uid c
	RACED_POD=
	p=$(im_pod_of "$x")
	if [ -z "$p" ]; then
		fail "$x has an instance-manager pod to race"
		return 0
	fi
	uid=$(pod_uid "$p")
	multus_conf_remove "$i"
	stop_named "kubelet-$i"
	tl "$x reboots: kubelet stopped, 00-multus.conf removed"
	for c in $(ctr_ "$i" containers ls -q "labels.\"io.kubernetes.pod.uid\"==$uid" 2>/dev/null); do
		ctr_ "$i" tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
	done
	lhk delete pod "$p" --grace-period=0 --force >/dev/null 2>&1 || true
	tl "$x: the processes of $p killed, the pod deleted"
	wait_for 120 new_pod "$p" "$uid" || fail "Longhorn made $p again"
	tl "$x: Longhorn made $p again"
	kubelet_start "$i"
	tl "$x: kubelet started"
	wait_for 120 has_sandbox "$p" || fail "the sandbox of $p came up"
	tl "$x: sandbox of $p up with pod IP $(pod_ip "$p"); Multus status keys: $(status_keys "$p")"
	sleep "$MULTUS_LATE_S"
	multus_conf_write "$i"
	tl "$x: 00-multus.conf written again (Multus's DaemonSet pod started)"
	RACED_POD=$p
	RACED_UID=$(pod_uid "$p")
}

# keep_snapshot NAME: lh_snapshot, copied to $ROOT/_out/e2e-snapshots (the cluster's directory
# goes at the end of the run; tests/data/multus-*/ keeps some, read by `make test`).
keep_snapshot() {
	lh_snapshot "$1"
	mkdir -p "$ROOT/_out/e2e-snapshots"
	cp "$DIR/snapshots/$1.json" "$ROOT/_out/e2e-snapshots/"
}

# network_finding: check cluster's finding for POD on NODE.
network_finding() { has_flat "$1 on $2 has no IP on storage network $LH_NS/$STOR_NAD"; }

race_without() {
	local x=$1 other=$2 p sip pip
	SCEN=without-$E2E_MULTUS
	T0=$(now_s)
	: >"$DIR/timeline-$SCEN"
	log "s1. the seed's race WITHOUT the gate (Multus $E2E_MULTUS): $x reboots, its instance manager comes up before Multus; vol-f is rebuilt onto $x"
	k delete mutatingwebhookconfiguration longhorn-guard --ignore-not-found >/dev/null
	tl "longhorn-guard's mutating webhook deleted: no gate"
	reboot_node "$x"
	p=$RACED_POD
	[ -n "$p" ] || return 0
	wait_for 180 im_running "$p" || true
	pip=$(pod_ip "$p")
	sip=$(storage_ip "$p")
	tl "$x: instance manager $p running: pod IP $pip, storage IP $sip, Multus status keys: $(status_keys "$p")"
	check "s1: $x's instance manager runs" im_running "$p"
	check "s1: the raced pod has no storage IP (no Multus status on it): $sip" test "$sip" = -
	check "s1: no $STOR_IF in the raced pod" not lhk exec "$p" -- ls "/sys/class/net/$STOR_IF"
	im_table
	run "$GUARD_BIN" check cluster
	check "s1: check cluster flags $p on $x without a storage-network IP" network_finding "$p" "$x"
	keep_snapshot "seedrace-raced-$E2E_MULTUS"
	trigger_rebuild "$x" "$other"
	wait_for 90 replica_on "$x" '[0-9]' || true
	replica_table | sed 's/^/    vol-f replica: /'
	engine_addrs | sed 's/^/    /'
	check "s1: Longhorn gave the new replica on $x the pod IP as its storage IP ($pip)" \
		replica_on "$x" "${pip//./\\.}\$"
	tl "sampling the rebuild for $F_STALL_S s"
	sample_rebuild "$F_STALL_S" || true
	rebuild_log
	tl "after $F_STALL_S s: $(tail -1 "$DIR/rebuild-$SCEN.log" | cut -d' ' -f2-)"
	check "s1: no rebuild progress above 0% in $F_STALL_S s (seen: $(progress_seen))" not grep -qE ':[1-9][0-9]*% rebuilding' "$DIR/rebuild-$SCEN.log"
	check "s1: vol-f not rebuilt after $F_STALL_S s" not rebuilt "$(rebuild_sample vol-f)"
	# Why, from Longhorn's own logs: the managers fell back to the pod IP, and the engine on
	# node-1 adds the replica at that address, fails, removes it, and tries again.
	OUT=$(lhk logs -l app=longhorn-manager --since=10m --tail=-1 2>/dev/null | grep -F "annotation, use pod IP $pip" || true)
	matching -m1 . <<<"$OUT" | cut -c1-300 | sed 's/^/    manager: /'
	STALL_FALLBACKS=$(grep -c . <<<"$OUT" || true)
	OUT=$(lhk logs "$(im_pod_of node-1)" --since=10m 2>/dev/null | grep -F "replicaAddress=\"tcp://$pip:" || true)
	STALL_ADDS=$(grep -c 'Adding replica' <<<"$OUT" || true)
	STALL_REMOVES=$(grep -c 'Removing replica' <<<"$OUT" || true)
	matching -m1 'Adding replica' <<<"$OUT" | cut -c1-300 | sed 's/^/    node-1 engine: /'
	matching -m1 'Removing replica' <<<"$OUT" | cut -c1-300 | sed 's/^/    node-1 engine: /'
	tl "Longhorn's logs: $STALL_FALLBACKS manager warnings 'Missing ... annotation, use pod IP $pip'; node-1's engine added a replica at tcp://$pip $STALL_ADDS times and removed it $STALL_REMOVES times"
	check "s1: the engine on node-1 tried the replica at the pod IP and dropped it (adds $STALL_ADDS, removes $STALL_REMOVES)" \
		all '[ "$STALL_ADDS" -ge 1 ]' '[ "$STALL_REMOVES" -ge 1 ]'
	figure "s1 ($E2E_MULTUS, no gate): $p on $x pod IP $pip, storage IP $sip; new replica storageIP $(replica_table | awk -v x="$x" '$2 == x {sub("storageIP=", "", $5); print $5; exit}'); $(engine_addrs); rebuild after $F_STALL_S s: $(tail -1 "$DIR/rebuild-$SCEN.log" | cut -d' ' -f2-) (progress seen: $(progress_seen)); engine add/remove of the pod-IP replica: $STALL_ADDS/$STALL_REMOVES"
	# The remedy check cluster gives: delete the pod; Longhorn makes it again, now with Multus.
	mv "$DIR/rebuild-$SCEN.log" "$DIR/rebuild-$SCEN-stall.log"
	lhk delete pod "$p" --wait=false >/dev/null
	tl "remedy: pod $p deleted by hand"
	wait_for 180 new_pod "$p" "$RACED_UID" || true
	wait_for 180 im_running "$p" || true
	tl "$x: instance manager $p running again: pod IP $(pod_ip "$p"), storage IP $(storage_ip "$p")"
	pace_storage on
	sample_rebuild 600 until-done && tl "vol-f rebuilt: $(rebuild_sample vol-f)" || tl "vol-f NOT rebuilt"
	pace_storage off
	rebuild_log
	figure "s1 ($E2E_MULTUS) after the remedy, rebuild progress samples: $(progress_seen)"
	check "s1: after the remedy, $p has a storage IP ($(storage_ip "$p"))" grep -q '^10\.233\.100\.' <<<"$(storage_ip "$p")"
	check "s1: after the remedy, the rebuild completes" rebuilt "$(rebuild_sample vol-f)"
	run "$GUARD_BIN" check cluster
	check "s1: check cluster is clean of storage-network findings after" lacks "has no IP on storage network"
	keep_snapshot "seedrace-remedied-$E2E_MULTUS"
	figure "s1 ($E2E_MULTUS) timeline: $(tr -s ' ' <"$DIR/timeline-$SCEN" | sed 's/^ //' | paste -sd ';' | cut -c1-1500)"
}

# race_with X OTHER webhook|policy: the same race with the gate injected by the guard's
# mutating webhook, or by the MutatingAdmissionPolicy while no guard pod runs.
race_with() {
	local x=$1 other=$2 via=$3 p first t_fail code
	SCEN=with-$via-$E2E_MULTUS
	T0=$(now_s)
	: >"$DIR/timeline-$SCEN"
	log "s$([ "$via" = webhook ] && echo 2 || echo 3). the seed's race WITH the gate from the $via (Multus $E2E_MULTUS): $x reboots; vol-f is rebuilt onto $x"
	if [ "$via" = webhook ]; then
		k apply -f "$DIR/out/manifests.yaml" >/dev/null
		k -n "$GUARD_NS" rollout status deployment/longhorn-guard --timeout=120s >/dev/null || fail "s-$via: the guard Ready again"
		tl "longhorn-guard's mutating webhook in place (failurePolicy Ignore), guard Ready"
	else
		k -n "$GUARD_NS" scale deployment longhorn-guard --replicas=0 >/dev/null
		# Both configurations go, as with no guard at all: the validating one's pod-delete entry
		# (failurePolicy Fail) would refuse the "reboot"'s delete of the instance-manager pod.
		k delete mutatingwebhookconfiguration,validatingwebhookconfiguration longhorn-guard >/dev/null 2>&1 || true
		k apply -f "$ROOT/manifests/components/gate-policy/gate-policy.yaml" >/dev/null
		wait_for 60 guard_gone || true
		sleep 3
		tl "guard scaled to 0, webhooks deleted, MutatingAdmissionPolicy longhorn-guard-gate applied"
	fi
	reboot_node "$x"
	p=$RACED_POD
	if [ -z "$p" ]; then
		[ "$via" = webhook ] || guard_back
		return 0
	fi
	first=$RACED_UID
	check "s-$via: the raced pod has the gate init container" has_gate "$p"
	wait_for 150 gate_done "$p" || true
	code=$(gate_exit "$p")
	t_fail=$(value lhk get pod "$p" -o jsonpath='{.status.initContainerStatuses[?(@.name=="longhorn-guard-gate")].state.terminated.finishedAt}')
	tl "gate of the raced pod exited $code at $t_fail: $(gate_msg "$p")"
	check "s-$via: the gate failed the raced pod (exit 1) instead of letting it start on the pod IP" test "$code" = 1
	check "s-$via: the raced pod's instance manager never started" test -z \
		"$(lhk get pod "$p" -o jsonpath='{.status.containerStatuses[0].state.running}{.status.containerStatuses[0].state.terminated.startedAt}' 2>/dev/null)"
	wait_for 180 new_pod "$p" "$first" || true
	tl "Longhorn made $p again"
	wait_for 180 im_running "$p" || true
	tl "$x: instance manager running, pod IP $(pod_ip "$p"), storage IP $(storage_ip "$p"); gate exit $(gate_exit "$p"): $(gate_msg "$p" 'storage network ready')"
	check "s-$via: the new pod's gate passed (exit 0) and the instance manager runs" all '[ "$(gate_exit "$p")" = 0 ]' 'im_running "$p"'
	check "s-$via: the new pod has a storage IP ($(storage_ip "$p"))" grep -q '^10\.233\.100\.' <<<"$(storage_ip "$p")"
	im_table
	pace_storage on
	trigger_rebuild "$x" "$other"
	sample_rebuild 600 until-done && tl "vol-f rebuilt: $(rebuild_sample vol-f)" || tl "vol-f NOT rebuilt"
	pace_storage off
	rebuild_log
	replica_table | sed 's/^/    vol-f replica: /'
	engine_addrs | sed 's/^/    /'
	check "s-$via: the rebuild onto $x completes" rebuilt "$(rebuild_sample vol-f)"
	check "s-$via: the new replica on $x has a storage-network address" replica_on "$x" '10\.233\.100\.'
	run "$GUARD_BIN" check cluster
	check "s-$via: check cluster has no storage-network finding" lacks "has no IP on storage network"
	figure "s-$via ($E2E_MULTUS) rebuild progress samples: $(progress_seen)"
	figure "s-$via ($E2E_MULTUS) timeline: $(tr -s ' ' <"$DIR/timeline-$SCEN" | sed 's/^ //' | paste -sd ';' | cut -c1-1500)"
	[ "$via" = webhook ] || guard_back
}

# guard_back: after race_with policy, the policy swapped back for the guard's webhook, 2 replicas.
guard_back() {
	k delete -f "$ROOT/manifests/components/gate-policy/gate-policy.yaml" >/dev/null
	k apply -f "$DIR/out/manifests.yaml" >/dev/null
	k -n "$GUARD_NS" scale deployment longhorn-guard --replicas=2 >/dev/null
	k -n "$GUARD_NS" rollout status deployment/longhorn-guard --timeout=120s >/dev/null || fail "the guard back at 2 replicas after s3"
}

# old_key: the gate must also pass on networks-status alone. Multus v3.9.3 writes both keys; with
# v4.2.4 the harness copies network-status to the old key, as Multus v3.0-v3.4 wrote it.
# A pod asks for the storage network; its first init container sleeps while the harness
# removes network-status, then the gate (the injected container's spec, copied from node-2's
# instance manager, which the webhook made in s2) reads the pod.
old_key() {
	log "s4. the gate on networks-status alone (Multus $E2E_MULTUS; network-status removed)"
	value lhk get pod "$(im_pod_of node-2)" -o json | python3 -c '
import json, sys
pod = json.load(sys.stdin)
gate = [c for c in pod["spec"]["initContainers"] if c["name"] == "longhorn-guard-gate"][0]
vols = [v for v in pod["spec"]["volumes"] if v["name"] in {m["name"] for m in gate.get("volumeMounts", [])}]
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "gate-old-key", "namespace": pod["metadata"]["namespace"],
               "annotations": {"k8s.v1.cni.cncf.io/networks": pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]}},
  "spec": {"nodeName": "node-1", "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
           "serviceAccountName": pod["spec"]["serviceAccountName"], "volumes": vols,
           "initContainers": [{"name": "wait", "image": sys.argv[1], "imagePullPolicy": "Never",
                               "command": ["sleep", "15"]}, gate],
           "containers": [{"name": "main", "image": sys.argv[1], "imagePullPolicy": "Never",
                           "command": ["sleep", "1"]}]}}))' "$LH_IM_IMAGE" >"$DIR/gate-old-key.json" || {
		fail "s4: node-2's instance manager has the gate to copy (s2)"
		return 0
	}
	lhk delete pod gate-old-key --ignore-not-found >/dev/null
	k apply -f "$DIR/gate-old-key.json" >/dev/null
	if [ "$E2E_MULTUS" = v3.9.3 ]; then
		wait_for 60 keys_are gate-old-key "network-status networks-status" || true
		check "s4: Multus $E2E_MULTUS wrote both keys ($(status_keys gate-old-key))" keys_are gate-old-key "network-status networks-status"
	else
		# v4 writes network-status only: its value goes under the old key, as v3.0-v3.4 wrote it.
		wait_for 60 keys_are gate-old-key network-status || true
		check "s4: Multus $E2E_MULTUS wrote network-status only ($(status_keys gate-old-key))" keys_are gate-old-key network-status
		lhk annotate pod gate-old-key "$NETWORKS_STATUS=$(jp pod gate-old-key '{.metadata.annotations.k8s\.v1\.cni\.cncf\.io/network-status}')" >/dev/null || true
	fi
	lhk annotate pod gate-old-key "$NETWORK_STATUS-" >/dev/null || true
	check "s4: network-status removed ($(status_keys gate-old-key))" test "$(status_keys gate-old-key)" = networks-status
	wait_for 90 gate_done gate-old-key || true
	OUT=$(lhk logs gate-old-key -c longhorn-guard-gate 2>&1)
	printf '    gate: %s\n' "$(grep 'storage network' <<<"$OUT" | tail -1 | cut -c1-240)"
	check "s4: the gate passed on networks-status alone, read from the API server" \
		all '[ "$(gate_exit gate-old-key)" = 0 ]' 'has "from $NETWORKS_STATUS, read from the API server"'
	lhk delete pod gate-old-key --wait=false >/dev/null
}

check_seed_race() {
	cut_pod_network on
	printf '    pod network cut between nodes for tcp 10000-30000: %s rules\n' "$(iptables -S FORWARD | grep -c "$FWD_TAG-cut")"
	log "s0. vol-f: 2 replicas with data, attached on node-1"
	f_volume node-2
	race_without node-3 node-2
	race_with node-2 node-3 webhook
	race_with node-3 node-2 policy
	old_key
	lh_detach vol-f
	lh_delete_volume vol-f
	for n in $(seq 1 "$NODES"); do lh_node_sched "node-$n" true; done
}
