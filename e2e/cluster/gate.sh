# Check d of the real-kubelet suite: the init gate as an init container on a real kubelet,
# with the Multus stand-in (e2e/cluster/multus-standin) chained after the bridge writing
# network-status through the API server 1 s / 30 s / never after the sandbox's CNI ADD, or
# only the legacy networks-status key. Also the kubelet's downward-API refresh. Sourced.

STORAGE_NET='[{"namespace":"kube-system","name":"storage-net","interface":"lhnet1"}]'
GATE_NODE=node-2

log_time() { # POD CONTAINER PATTERN: the kubelet's timestamp of the first log line matching
	value k -n "$LH_NS" logs --timestamps "$1" -c "$2" | matching -m1 -- "$3" | cut -d' ' -f1
}
multus_time() { # POD WORD: the stand-in's time of its "ADD" or "annotated" line for POD
	matching -h "^$2 $LH_NS/$1 " "$DIR"/node-*/multus.log 2>/dev/null | tail -1 | awk '{print $NF}'
}
pod_phase() { k -n "$LH_NS" get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
phase_is() { [ "$(pod_phase "$1")" = "$2" ]; }

gate_pod() { # NAME DELAY [STATUS_KEY]
	lh im-pod "$GATE_NODE" "$IM_IMAGE" --name "$1" --networks "$STORAGE_NET" --delay "$2" ${3:+--status-key "$3"} >/dev/null
}

# gate_ready_case POD WHAT: the gate let the main container start only after the annotation
# was written and the interface was there; prints the delays.
gate_ready_case() {
	local pod=$1 what=$2 t_add t_ann t_gate t_main msg
	wait_for 120 phase_is "$pod" Running || true
	check "$what: the pod runs" phase_is "$pod" Running
	msg=$(k -n "$LH_NS" logs "$pod" -c longhorn-guard-gate 2>&1 | grep 'storage network ready' || true)
	printf '    gate: %s\n' "${msg:-<no ready line>}" | cut -c1-260
	check "$what: the gate saw kube-system/storage-net on lhnet1, read from the API server" \
		all 'grep -q "kube-system/storage-net on lhnet1" <<<"$msg"' 'grep -q "read from the API server" <<<"$msg"'
	t_add=$(multus_time "$pod" ADD)
	t_ann=$(multus_time "$pod" annotated)
	t_gate=$(epoch "$(log_time "$pod" longhorn-guard-gate 'storage network ready')")
	t_main=$(epoch "$(log_time "$pod" instance-manager 'instance-manager started')")
	printf '    %s: CNI ADD -> annotation written %s s; annotation -> gate ready %s s; annotation -> main container start %s s\n' \
		"$what" "$(secs "$t_add" "$t_ann")" "$(secs "$t_ann" "$t_gate")" "$(secs "$t_ann" "$t_main")"
	GATE_FIGURES+=("$what: annotation -> main start $(secs "$t_ann" "$t_main") s (written $(secs "$t_add" "$t_ann") s after CNI ADD)")
	check "$what: the main container started after the annotation was written" \
		awk -v a="$t_ann" -v m="$t_main" 'BEGIN { exit !(m > a) }'
	check "$what: lhnet1 is in the pod" k -n "$LH_NS" exec "$pod" -c instance-manager -- ls /sys/class/net/lhnet1
}

gate_never_case() { # POD [WHAT]
	local pod=$1 w=${2:-never} out started finished
	wait_for 120 phase_is "$pod" Failed || true
	check "$w: the pod failed (restartPolicy Never: Longhorn recreates it)" phase_is "$pod" Failed
	started=$(value k -n "$LH_NS" get pod "$pod" -o jsonpath='{.status.initContainerStatuses[*].state.terminated.startedAt}' | awk '{print $1}')
	finished=$(value k -n "$LH_NS" get pod "$pod" -o jsonpath='{.status.initContainerStatuses[*].state.terminated.finishedAt}' | awk '{print $1}')
	printf '    %s: the gate ran %s s (gate.timeout 60s)\n' "$w" "$(secs "$(epoch "$started")" "$(epoch "$finished")")"
	GATE_FIGURES+=("$w: failed after $(secs "$(epoch "$started")" "$(epoch "$finished")") s")
	check "$w: the main container never started (no pod-IP-only instance manager)" test -z \
		"$(k -n "$LH_NS" get pod "$pod" -o jsonpath='{.status.containerStatuses[0].state.running}{.status.containerStatuses[0].state.terminated.startedAt}')"
	out=$(value k -n "$LH_NS" describe pod "$pod")
	matching -m1 'storage network' <<<"$out" | sed 's/^ */    describe: /' | cut -c1-300
	check "$w: kubectl describe names the storage network and the remedy" \
		all 'grep -q "kube-system/storage-net" <<<"$out"' 'grep -q "Longhorn recreates it" <<<"$out"'
	out=$(k -n "$LH_NS" logs "$pod" -c longhorn-guard-gate 2>&1 || true)
	check "$w: the gate's log names the network and the missing annotation" \
		all 'grep -q "kube-system/storage-net" <<<"$out"' 'grep -q "network-status is absent" <<<"$out"'
}

# downward_refresh: how long the kubelet takes to refresh a downward-API annotations file,
# during an init container and in a regular one (each polls its file every 0.1 s and logs
# the change; the kubelet's log timestamps against the annotate's return).
downward_refresh() {
	local t1 t2 s1 s2
	k apply -f - >/dev/null <<-EOF
		apiVersion: v1
		kind: Pod
		metadata: {name: downward-probe, namespace: default}
		spec:
		  nodeName: $GATE_NODE
		  terminationGracePeriodSeconds: 1
		  volumes: [{name: info, downwardAPI: {items: [{path: annotations, fieldRef: {fieldPath: metadata.annotations}}]}}]
		  initContainers:
		  - {name: init, image: "$IM_IMAGE", imagePullPolicy: Never, volumeMounts: [{name: info, mountPath: /info}],
		     command: [/bin/sh, -c, 'echo waiting; until grep -q "probe=\"1\"" /info/annotations; do sleep 0.1; done; echo seen 1']}
		  containers:
		  - {name: main, image: "$IM_IMAGE", imagePullPolicy: Never, volumeMounts: [{name: info, mountPath: /info}],
		     command: [/bin/sh, -c, 'echo running; until grep -q "probe=\"2\"" /info/annotations; do sleep 0.1; done; echo seen 2; sleep 3600']}
	EOF
	wait_for 60 eval '[ -n "$(k -n default logs downward-probe -c init 2>/dev/null)" ]' || true
	sleep 1
	k -n default annotate pod downward-probe probe=1 >/dev/null
	t1=$(now_s)
	wait_for 120 eval '[ "$(k -n default get pod downward-probe -o jsonpath={.status.phase})" = Running ]' || true
	wait_for 30 eval 'k -n default logs downward-probe -c main 2>/dev/null | grep -q running' || true
	sleep 1
	k -n default annotate --overwrite pod downward-probe probe=2 >/dev/null
	t2=$(now_s)
	wait_for 120 eval 'k -n default logs downward-probe -c main 2>/dev/null | grep -q "seen 2"' || true
	s1=$(value k -n default logs --timestamps downward-probe -c init | matching -m1 'seen 1' | cut -d' ' -f1)
	s2=$(value k -n default logs --timestamps downward-probe -c main | matching -m1 'seen 2' | cut -d' ' -f1)
	check "downward API file refreshed during an init container and a regular one" all '[ -n "$s1" ]' '[ -n "$s2" ]'
	DOWNWARD="init container $(secs "$t1" "$(epoch "$s1")") s, regular container $(secs "$t2" "$(epoch "$s2")") s"
	printf '    downward-API refresh after kubectl annotate: %s\n' "$DOWNWARD"
	k -n default delete pod downward-probe --wait=false >/dev/null
}

check_gate() {
	local p
	log "d. the init gate on a real kubelet, Multus stand-in writing network-status after 1 s / 30 s / never / legacy key"
	GATE_FIGURES=()
	gate_pod instance-manager-gate-1s 1s
	gate_pod instance-manager-gate-30s 30s
	gate_pod instance-manager-gate-never never
	gate_pod instance-manager-gate-legacy 1s networks-status
	check "the mutating webhook added the gate to the instance-manager pod" test \
		"$(k -n "$LH_NS" get pod instance-manager-gate-1s -o jsonpath='{.spec.initContainers[0].name}')" = longhorn-guard-gate
	gate_ready_case instance-manager-gate-1s "1 s"
	gate_ready_case instance-manager-gate-30s "30 s"
	gate_ready_case instance-manager-gate-legacy "legacy networks-status"
	gate_never_case instance-manager-gate-never
	downward_refresh
	# These pods carry the instance-manager label on node GATE_NODE: their deletion is answered as
	# a drain of it (pod-delete webhook), which holds nothing that needs them by now.
	for p in 1s 30s never legacy; do
		wait_for 60 k -n "$LH_NS" delete pod "instance-manager-gate-$p" --wait=false || fail "gate pod $p deleted"
	done
}

# check_gate_policy: the gate injected by the API server itself (MutatingAdmissionPolicy,
# manifests/components/gate-policy) while no longhorn-guard pod runs: the Deployment scaled to 0
# and the mutating webhook swapped for the policy, as the component does. Then both put back.
check_gate_policy() {
	local p
	log "d2. the init gate as a MutatingAdmissionPolicy, longhorn-guard scaled to 0: Multus stand-in writing after 1 s / never"
	if ! k get --raw /apis/admissionregistration.k8s.io/v1 2>/dev/null | grep -q '"kind":"MutatingAdmissionPolicy"'; then
		printf '    skipped: the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy\n'
		return
	fi
	run k -n "$GUARD_NS" scale deployment longhorn-guard --replicas=0
	wait_for 90 eval '[ -z "$(guard_pods)" ]' || true
	check "no longhorn-guard pod runs" test -z "$(guard_pods)"
	run k apply -f "$ROOT/manifests/components/gate-policy/gate-policy.yaml"
	check "the shipped MutatingAdmissionPolicy and binding apply" rc_is 0
	run k delete mutatingwebhookconfiguration longhorn-guard
	sleep 3 # the API server loads admission policies asynchronously
	gate_pod instance-manager-policy-1s 1s
	gate_pod instance-manager-policy-never never
	printf '    %s\n' "$(k -n "$LH_NS" get pod instance-manager-policy-1s -o jsonpath='{.metadata.creationTimestamp} created; init containers: {.spec.initContainers[*].name}; gate args: {.spec.initContainers[0].args}')"
	check "the API server added the gate with no guard running" test \
		"$(k -n "$LH_NS" get pod instance-manager-policy-1s -o jsonpath='{.spec.initContainers[0].name}')" = longhorn-guard-gate
	gate_ready_case instance-manager-policy-1s "policy, 1 s"
	gate_never_case instance-manager-policy-never "policy, never"
	k delete -f "$ROOT/manifests/components/gate-policy/gate-policy.yaml" >/dev/null
	k apply -f "$DIR/out/manifests.yaml" >/dev/null
	run k -n "$GUARD_NS" scale deployment longhorn-guard --replicas=2
	run k -n "$GUARD_NS" rollout status deployment/longhorn-guard --timeout=180s
	check "longhorn-guard back at 2 replicas, webhook restored" rc_is 0
	# Only now: deleting a pod with the instance-manager label waits for the guard
	# (pod-delete.longhorn-guard.io, failurePolicy Fail), which was scaled to 0 above.
	for p in 1s never; do
		wait_for 60 k -n "$LH_NS" delete pod "instance-manager-policy-$p" --wait=false || fail "policy pod $p deleted"
	done
}
