# Check s5 of the real-Multus suite (make e2e-longhorn-multus, after the seed's race), the other
# way of racing: Multus's status write made late. Multus's calls to the API server from node-3 go through e2e/longhorn/slow_proxy.py, which
# holds every chunk it sends for SLOW_S seconds, and node-3's instance manager is made again.
# The thin plugin writes the status inside its CNI ADD, so the sandbox, and every container
# after it, waits for the write: the pod starts with the annotation and Longhorn uses the
# storage IP. Sourced.

SLOW_S=${SLOW_S:-3}
SLOW_HOLD_S=${SLOW_HOLD_S:-45}
SLOW_PORT=${SLOW_PORT:-33991}

# status_write_time POD: when the pod's network-status annotation was last written (the
# managedFields entry of the status subresource that holds it).
status_write_time() {
	value lhk get pod "$1" -o json --show-managed-fields | python3 -c '
import json, sys
try:
    p = json.load(sys.stdin)
except ValueError:
    p = {"metadata": {}}  # no such pod
t = [m["time"] for m in p["metadata"].get("managedFields", [])
     if m.get("subresource") == "status" and "k8s.v1.cni.cncf.io/network-status" in json.dumps(m.get("fieldsV1", {}))]
print(t[-1] if t else "")'
}
before() { awk -v a="$(epoch "$1")" -v b="$(epoch "$2")" 'BEGIN { exit !(a <= b) }'; }

check_late_status() {
	local x=node-3 i=3 p uid t_ann t_sb t_start sip ip bad=0 fails msg
	SCEN=late-$E2E_MULTUS
	T0=$(now_s)
	: >"$DIR/timeline-$SCEN"
	log "s5. a late Multus status write (Multus $E2E_MULTUS): its API path from $x slowed by $SLOW_S s per chunk for $SLOW_HOLD_S s, $x's instance manager made again"
	start_bg slow-proxy python3 "$E2E/longhorn/slow_proxy.py" "$SLOW_PORT" "$CTL_IP" "$API_PORT" "$SLOW_S"
	sed "s#https://$CTL_IP:$API_PORT#https://127.0.0.1:$SLOW_PORT#" "$DIR/pki/multus.kubeconfig" >"$DIR/pki/multus-slow.kubeconfig"
	multus_conf_write "$i"
	sed -i "s#$DIR/pki/multus.kubeconfig#$DIR/pki/multus-slow.kubeconfig#" "$(multus_conf_path "$i")"
	p=$(im_pod_of "$x")
	if [ -z "$p" ]; then
		fail "s5: $x has an instance-manager pod to make again"
		multus_conf_write "$i"
		stop_named slow-proxy
		return 0
	fi
	uid=$(pod_uid "$p")
	lhk delete pod "$p" --wait=false >/dev/null
	tl "$p deleted; Multus on $x reaches the API server through the slow path"
	wait_for 60 new_pod "$p" "$uid" || true
	tl "Longhorn made $p again"
	# Each second: never an instance manager running without the Multus status.
	for _ in $(seq 1 "$SLOW_HOLD_S"); do
		ip=$(pod_ip "$p")
		if im_running "$p" && [ "$(storage_ip "$p")" = - ]; then bad=$((bad + 1)); fi
		sleep 1
	done
	# The list may be empty (it was with Multus v3.9.3): no index into it.
	fails=$(value lhk get events --field-selector "involvedObject.name=$p,reason=FailedCreatePodSandBox" --no-headers | wc -l)
	msg=$(value lhk get events --field-selector "involvedObject.name=$p,reason=FailedCreatePodSandBox" \
		-o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | tail -n1 | sed 's/.*failed (add): //' | cut -c1-200)
	tl "after $SLOW_HOLD_S s of the slow path: pod IP '${ip:-}', storage IP $(storage_ip "$p"), instance manager $(im_state "$p"); $fails failed sandbox events${msg:+: $msg}"
	check "s5: while Multus's status path was slow, the instance manager never ran without its storage IP ($bad seconds did)" test "$bad" = 0
	multus_conf_write "$i"
	tl "Multus's API path fast again (00-multus.conf with the direct kubeconfig)"
	wait_for 180 im_running "$p" || true
	t_ann=$(status_write_time "$p")
	t_sb=$(value lhk get pod "$p" -o json | python3 -c '
import json, sys
try:
    status = json.load(sys.stdin)["status"]
except ValueError:
    status = {}  # no such pod
c = [c for c in status.get("conditions", []) if c["type"] == "PodReadyToStartContainers" and c["status"] == "True"]
print(c[0]["lastTransitionTime"] if c else "")')
	t_start=$(value lhk get pod "$p" -o jsonpath='{.status.containerStatuses[*].state.running.startedAt}' | awk '{print $1}')
	sip=$(storage_ip "$p")
	tl "status written $t_ann; sandbox ready $t_sb; instance manager started $t_start; storage IP $sip"
	printf '    slow path: %s connections from Multus\n' "$(grep -c connection "$DIR/log/slow-proxy.log" || true)"
	check "s5: the sandbox and the instance manager came after the status write (written $t_ann, started $t_start)" \
		all '[ -n "$t_ann" ]' '[ -n "$t_sb" ]' '[ -n "$t_start" ]' 'before "$t_ann" "$t_sb"' 'before "$t_ann" "$t_start"'
	check "s5: the instance manager runs with its storage IP ($sip)" grep -q '^10\.233\.100\.' <<<"$sip"
	figure "s5 ($E2E_MULTUS) a slow Multus status path ($SLOW_S s per chunk, $SLOW_HOLD_S s): $fails failed sandbox events${msg:+ ($msg)}, $bad s with an instance manager running without its storage IP; then status written $t_ann, sandbox $t_sb, started $t_start, storage IP $sip"
	stop_named slow-proxy
}
