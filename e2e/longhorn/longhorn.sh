# Real Longhorn (LH_VERSION, suite.sh) on the real-kubelet cluster, and scenario a: Longhorn up, the guard
# reading it (e2e/longhorn/checks.sh). Sourced. Longhorn is installed from its own
# deploy/longhorn.yaml (e2e/longhorn/lh.py says what is cut and why); every Longhorn object
# after that is made by Longhorn itself, from Volumes and attachment tickets made here.

LH_FIGURES=()
lhk() { k -n "$LH_NS" "$@"; }
figure() { LH_FIGURES+=("$1"); printf '    %s\n' "$1"; }
jp() { value lhk get "$1" "$2" -o jsonpath="$3"; }
lh_setting() { lhk patch settings.longhorn.io "$1" --type merge -p "{\"value\":\"$2\"}" >/dev/null; }
managers_ready() { [ "$(lhk get ds longhorn-manager -o jsonpath='{.status.numberReady}')" = "$NODES" ]; }
lh_nodes_ready() {
	[ "$(lhk get nodes.longhorn.io -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
def ok(n):
    c = {x["type"]: x["status"] for x in n.get("status", {}).get("conditions", [])}
    disks = n.get("status", {}).get("diskStatus") or {}
    return c.get("Ready") == "True" and c.get("Schedulable") == "True" and disks and all(
        {x["type"]: x["status"] for x in d.get("conditions", [])}.get("Schedulable") == "True" for d in disks.values())
print(sum(ok(n) for n in items))')" = "$NODES" ]
}
engine_image_deployed() { [ "$(value lhk get engineimages.longhorn.io -o jsonpath='{.items[*].status.state}' | awk '{print $1}')" = deployed ]; }
ims_running() { [ "$(lhk get instancemanagers.longhorn.io -o jsonpath='{range .items[*]}{.status.currentState}{"\n"}{end}' | grep -c '^running$')" -ge "$NODES" ]; }

# lh_volume NAME REPLICAS [SIZE]: a v1 Volume; Longhorn's webhook fills in the rest.
lh_volume() {
	k apply -f - >/dev/null <<-EOF
		apiVersion: longhorn.io/v1beta2
		kind: Volume
		metadata: {name: $1, namespace: $LH_NS}
		spec: {numberOfReplicas: $2, size: "${3:-1073741824}", frontend: blockdev, dataEngine: v1, accessMode: rwo}
	EOF
}
# lh_attach VOLUME NODE / lh_detach VOLUME: a longhorn-api ticket with no frontend (no SCSI
# on this kernel; the engine starts with --frontend "").
lh_attach() {
	lhk patch volumeattachments.longhorn.io "$1" --type merge -p \
		"{\"spec\":{\"attachmentTickets\":{\"e2e\":{\"id\":\"e2e\",\"type\":\"longhorn-api\",\"nodeID\":\"$2\",\"parameters\":{\"disableFrontend\":\"true\"}}}}}" >/dev/null
}
lh_detach() { lhk patch volumeattachments.longhorn.io "$1" --type merge -p '{"spec":{"attachmentTickets":{"e2e":null}}}' >/dev/null; }
vol_is() { [ "$(jp volumes.longhorn.io "$1" '{.status.state}/{.status.robustness}')" = "$2" ]; }
vol_state() { jp volumes.longhorn.io "$1" '{.status.state}/{.status.robustness}'; }
# replicas VOLUME: "name node state" per replica.
replicas() { value lhk get replicas.longhorn.io -l "longhornvolume=$1" -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeID} {.status.currentState}{"\n"}{end}'; }
replica_nodes() { replicas "$1" | awk '{print $2}' | sort -u; }
lh_delete_volume() { lhk delete volumes.longhorn.io "$1" --wait=false >/dev/null 2>&1 || true; }
vol_gone() { ! lhk get volumes.longhorn.io "$1" >/dev/null 2>&1; }
# longhorn_procs: replica and engine processes the instance managers run (host's ps): the
# engine binary copied by the engine-image DaemonSet, run as `... replica DIR` or `... controller VOLUME`.
longhorn_procs() { ps -eo args | sed -nE 's#^(/host/var/lib/longhorn|)/engine-binaries/[^ ]*/longhorn .* (replica|controller) .*#\2#p' | sort | uniq -c | tr -s ' \n' ' '; }

longhorn_up() {
	local i t0 t_mgr t_nodes t_im
	log "Longhorn $LH_VERSION from its own deploy/longhorn.yaml, images built from source"
	for i in $(seq 1 "$NODES"); do
		k label node "node-$i" node.longhorn.io/create-default-disk=config --overwrite >/dev/null
		k annotate node "node-$i" --overwrite node.longhorn.io/default-disks-config="[{\"path\":\"$(node_disk "$i")\",\"allowScheduling\":true}]" >/dev/null
	done
	t0=$(now_s)
	python3 "$LH" manifest "$LONGHORN_SRC" "$LH_MANAGER_IMAGE" "$LH_ENGINE_IMAGE" "$LH_IM_IMAGE" "$LH_WEBHOOK_IP" >"$DIR/longhorn.yaml"
	run k apply --server-side -f "$DIR/longhorn.yaml"
	check "kubectl apply of Longhorn's manifest" rc_is 0
	wait_for 300 managers_ready || { lhk get pods -o wide; lhk logs ds/longhorn-manager --tail=30; }
	t_mgr=$(now_s)
	check "longhorn-manager Ready on all $NODES nodes" managers_ready
	wait_for 300 engine_image_deployed || true
	check "engine image deployed" engine_image_deployed
	wait_for 300 lh_nodes_ready || true
	t_nodes=$(now_s)
	check "every Longhorn node Ready and Schedulable, each with its own disk" lh_nodes_ready
	wait_for 300 ims_running || true
	t_im=$(now_s)
	check "an instance manager running on every node" ims_running
	lhk get pods -o wide | sed 's/^/    /'
	lhk get nodes.longhorn.io,instancemanagers.longhorn.io,engineimages.longhorn.io | sed 's/^/    /'
	k get validatingwebhookconfigurations,mutatingwebhookconfigurations | sed 's/^/    /'
	figure "Longhorn up (s from apply): managers Ready $(secs "$t0" "$t_mgr"), nodes Ready+Schedulable $(secs "$t0" "$t_nodes"), instance managers running $(secs "$t0" "$t_im")"
}

# lh_snapshot NAME: the live cluster as one v1 List in $DIR/snapshots/NAME.json, the form
# `check drain --state` reads (tests/data/longhorn-v1.12.1/ keeps some: its README); a kind
# the API server does not answer is left out, never a stop.
lh_snapshot() {
	mkdir -p "$DIR/snapshots"
	{ value k get nodes,storageclasses -o json; value lhk get pods,poddisruptionbudgets,volumes.longhorn.io,replicas.longhorn.io,engines.longhorn.io,nodes.longhorn.io,settings.longhorn.io,instancemanagers.longhorn.io -o json; } |
		python3 -c '
import json, sys
dec, text, i, items = json.JSONDecoder(), sys.stdin.read(), 0, []
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    obj, i = dec.raw_decode(text, i)
    items += obj["items"]
for o in items:
    o["metadata"].pop("managedFields", None)
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(sys.argv[1], "w"), indent=1, sort_keys=True)' "$DIR/snapshots/$1.json"
	printf '    snapshot %s: %s\n' "$1" "$DIR/snapshots/$1.json"
}

# view_counts: the guard's longhorn_guard_cluster_view_objects against kubectl get, per kind:
# the view holds namespaced kinds of longhorn-system only (pods, budgets, Longhorn's kinds), and
# `kubectl get -n` ignores the namespace for cluster-scoped kinds (nodes, StorageClasses).
view_counts() {
	local kind n want bad=0
	OUT=$(svc_curl /metrics)
	while read -r kind n; do
		want=$(k get "$kind" -n "$LH_NS" --no-headers 2>/dev/null | wc -l)
		[ "$n" = "$want" ] || bad=1
		printf '    %-36s view %-4s kubectl %s\n' "$kind" "$n" "$want"
	done < <(sed -n 's/^longhorn_guard_cluster_view_objects{kind="\([^"]*\)"} \([0-9]*\).*/\1 \2/p' <<<"$OUT")
	return "$bad"
}

check_guard_reads_longhorn() {
	local t0 v n
	log "a. Longhorn up, the guard reading it: volumes of 2 and 3 replicas attached with no frontend"
	t0=$(now_s)
	lh_volume vol-a2 2
	lh_volume vol-a3 3
	wait_for 60 vol_is vol-a2 detached/unknown || true
	lh_attach vol-a2 node-1
	lh_attach vol-a3 node-2
	for v in vol-a2 vol-a3; do
		wait_for 180 vol_is "$v" attached/healthy || true
		check "$v attached and healthy ($(vol_state "$v"))" vol_is "$v" attached/healthy
		replicas "$v" | sed "s/^/    $v replica: /"
	done
	lh_snapshot attached
	figure "a. two volumes attached and healthy $(secs "$t0" "$(now_s)") s after creation; processes: $(longhorn_procs)"
	n=$(longhorn_procs | sed -nE 's/.* ([0-9]+) replica.*/\1/p')
	check "replica processes really run (5 expected, $n found)" test "$n" -ge 5
	wait_for 30 view_counts >/dev/null || true
	check "the guard's view counts equal kubectl get for every kind" view_counts
	run "$GUARD_BIN" check cluster
	check "check cluster on real Longhorn: exit 0 or 1, nothing unreadable" \
		all 'rc_not 2' 'lacks unreadable' 'lacks "cannot read"' 'lacks "not readable"'
	for n in $(seq 1 "$NODES"); do
		run "$GUARD_BIN" check drain "node-$n"
		check "check drain node-$n on real Longhorn: exit 0 or 1, nothing unreadable" \
			all 'rc_not 2' 'lacks unreadable' 'lacks "cannot read"'
	done
	for v in vol-a2 vol-a3; do lh_detach "$v"; done
	wait_for 120 vol_is vol-a3 detached/unknown || true
	lh_snapshot detached
	# The scenarios after this one start from no volume.
	for v in vol-a2 vol-a3; do lh_delete_volume "$v"; done
	for v in vol-a2 vol-a3; do wait_for 120 vol_gone "$v" || fail "$v deleted"; done
}
