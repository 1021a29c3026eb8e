# Check s5 of the real-Multus suite (make e2e-longhorn-multus, after the seed's race), the other
# way of racing: Multus's status write made late. Multus's calls to the API server from node-3 go through e2e/longhorn/slow_proxy.py, which
# holds every chunk it sends for SLOW_S seconds, and node-3's instance manager is made again.
# The thin plugin writes the status inside its CNI ADD, so the sandbox, and every container
# after it, waits for the write: the pod starts with the annotation and Longhorn uses the
# storage IP. Sourced.

SLOW_S=${SLOW_S:-3}
SLOW_PORT=${SLOW_PORT:-33991}

# status_write_time POD: when the pod's network-status annotation was last written (the
# managedFields entry of the status subresource that holds it).
status_write_time() {
	lhk get pod "$1" -o json --show-managed-fields | python3 -c '
import json, sys
p = json.load(sys.stdin)
t = [m["time"] for m in p["metadata"].get("managedFields", [])
     if m.get("subresource") == "status" and "k8s.v1.cni.cncf.io/network-status" in json.dumps(m.get("fieldsV1", {}))]
print(t[-1] if t else "")'
}
before() { awk -v a="$(epoch "$1")" -v b="$(epoch "$2")" 'BEGIN { exit !(a <= b) }'; }

check_late_status() {
	local x=node-3 i=3 p uid created t_ann t_sb t_start sip fallbacks
	SCEN=late-$E2E_MULTUS
	T0=$(now_s)
	: >"$DIR/timeline-$SCEN"
	log "s5. a late Multus status write (Multus $E2E_MULTUS): its API path from $x slowed by $SLOW_S s per chunk, $x's instance manager made again"
	start_bg slow-proxy python3 "$E2E/longhorn/slow_proxy.py" "$SLOW_PORT" "$CTL_IP" "$API_PORT" "$SLOW_S"
	sed "s#https://$CTL_IP:$API_PORT#https://127.0.0.1:$SLOW_PORT#" "$DIR/pki/multus.kubeconfig" >"$DIR/pki/multus-slow.kubeconfig"
	multus_conf_write "$i"
	sed -i "s#$DIR/pki/multus.kubeconfig#$DIR/pki/multus-slow.kubeconfig#" "$(multus_conf_path "$i")"
	p=$(im_pod_of "$x")
	uid=$(pod_uid "$p")
	lhk delete pod "$p" --wait=false >/dev/null
	tl "$p deleted; Multus on $x now reaches the API server through the slow path"
	wait_for 60 new_pod "$p" "$uid" || true
	tl "Longhorn made $p again"
	wait_for 300 im_running "$p" || true
	created=$(lhk get pod "$p" -o jsonpath='{.metadata.creationTimestamp}')
	t_ann=$(status_write_time "$p")
	t_sb=$(lhk get pod "$p" -o jsonpath='{.status.conditions[?(@.type=="PodReadyToStartContainers")].lastTransitionTime}')
	t_start=$(lhk get pod "$p" -o jsonpath='{.status.containerStatuses[0].state.running.startedAt}')
	sip=$(storage_ip "$p")
	tl "pod created $created; Multus status written $t_ann; sandbox ready $t_sb; instance manager started $t_start; storage IP $sip"
	printf '    slow path: %s connections\n' "$(grep -c connection "$DIR/log/slow-proxy.log" || true)"
	check "s5: the status write was late (at least $SLOW_S s after the pod was made)" \
		awk -v a="$(epoch "$created")" -v b="$(epoch "${t_ann:-$created}")" -v s="$SLOW_S" 'BEGIN { exit !(b - a >= s) }'
	check "s5: the sandbox and the instance manager waited for it (written $t_ann, started $t_start)" \
		all '[ -n "$t_ann" ]' 'before "$t_ann" "$t_sb"' 'before "$t_ann" "$t_start"'
	check "s5: the instance manager runs with its storage IP ($sip)" grep -q '^10\.233\.100\.' <<<"$sip"
	fallbacks=$(lhk logs -l app=longhorn-manager --since=5m --tail=-1 2>/dev/null | grep -cF "use pod IP $(pod_ip "$p")" || true)
	check "s5: Longhorn never fell back to its pod IP ($fallbacks warnings)" test "$fallbacks" = 0
	figure "s5 ($E2E_MULTUS) a late status write, $SLOW_S s per chunk: pod made $created, status written $t_ann, sandbox ready $t_sb, instance manager started $t_start, storage IP $sip, pod-IP fallbacks $fallbacks"
	multus_conf_write "$i"
	stop_named slow-proxy
}
