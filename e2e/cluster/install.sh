# The install checks of the real-kubelet suite (e2e/cluster.sh run): Longhorn stand-in
# first (the RBAC has a Role in longhorn-system), then longhorn-guard exactly as README says:
#   make certs manifests && kubectl apply -f _out/manifests.yaml && kubectl rollout status
# with the image from `make image-oci` already in every node's containerd under the name the
# manifests use (imagePullPolicy IfNotPresent). Sourced.

LONGHORN=$E2E/cluster/longhorn.py
GUARD_SEL=app.kubernetes.io/name=longhorn-guard,app.kubernetes.io/component=webhook
GUARD_CERTS=$DIR/certs

lh() { KUBECTL=$KUBECTL python3 "$LONGHORN" "$@"; }
im_of() { printf 'instance-manager-%s' "$(printf '%s' "$1" | md5sum | cut -c1-32)"; }
epoch() { date -d "$1" +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
guard_pods() { k -n "$GUARD_NS" get pods -l "$GUARD_SEL" -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.spec.nodeName}{" "}{.status.podIP}{"\n"}{end}'; }
svc_ip() { k -n "$GUARD_NS" get svc longhorn-guard -o jsonpath='{.spec.clusterIP}'; }
svc_curl() { # PATH [PORT IP]: HTTPS with the install's CA, by the Service's name
	local ip=${3:-$(svc_ip)} port=${2:-443}
	curl -s --max-time 3 --cacert "$GUARD_CERTS/ca.crt" --resolve "longhorn-guard.longhorn-guard.svc:$port:$ip" \
		"https://longhorn-guard.longhorn-guard.svc:$port$1"
}

longhorn_standin() {
	log "Longhorn stand-in: CRDs, namespace, Settings, Nodes, one InstanceManager and real instance-manager pod per node"
	k apply -f "$CRDS" -f "$E2E/crds/longhorn-extra-crds.yaml" >/dev/null
	k wait --for=condition=Established --timeout=60s -f "$CRDS" >/dev/null
	k create namespace "$LH_NS" >/dev/null
	k -n "$LH_NS" create serviceaccount longhorn-service-account >/dev/null
	# Longhorn's ClusterRole grants its ServiceAccount get/list/watch on pods; the gate needs get.
	k create clusterrole longhorn-e2e-standin --verb=get,list,watch --resource=pods >/dev/null
	k create clusterrolebinding longhorn-e2e-standin --clusterrole=longhorn-e2e-standin \
		--serviceaccount="$LH_NS:longhorn-service-account" >/dev/null
	lh base "$NODES" "$IM_IMAGE" | sed 's/^/    created pod /'
	wait_for 90 im_pods_running "$NODES" || die "instance-manager pods did not run"
	k -n "$LH_NS" get pods -o wide | sed 's/^/    /'
}
im_pods_running() {
	[ "$(k -n "$LH_NS" get pods -l longhorn.io/component=instance-manager --field-selector=status.phase=Running -o name | wc -l)" -ge "$1" ]
}

install_guard() {
	local t0 out pod node ip started ready
	log "install longhorn-guard as README says (make certs manifests; kubectl apply; rollout status)"
	run make -s -C "$ROOT" certs manifests CERT_DIR="$GUARD_CERTS" OUT_DIR="$DIR/out"
	check "make certs manifests" rc_is 0
	t0=$(date +%s.%N)
	run k apply -f "$DIR/out/manifests.yaml"
	check "kubectl apply -f _out/manifests.yaml: exit 0" rc_is 0
	check "kubectl apply: no warning (Pod Security restricted, deprecations)" all '! warned'
	run k -n "$GUARD_NS" rollout status deployment/longhorn-guard --timeout=180s
	check "rollout status: both replicas available" rc_is 0
	printf '    apply to rollout complete: %s s\n' "$(secs "$t0" "$(date +%s.%N)")"
	check "2 replicas Ready" test "$(k -n "$GUARD_NS" get deployment longhorn-guard -o jsonpath='{.status.readyReplicas}')" = 2
	guard_pods | sed 's/^/    pod node ip: /'
	check "replicas on different nodes (preferred anti-affinity)" test "$(guard_pods | awk '{print $2}' | sort -u | wc -l)" = 2
	for pod in $(guard_pods | awk '{print $1}'); do
		started=$(value k -n "$GUARD_NS" get pod "$pod" -o jsonpath='{.status.containerStatuses[*].state.running.startedAt}')
		ready=$(value k -n "$GUARD_NS" get pod "$pod" -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastTransitionTime}')
		printf '    %s: container started %s, Ready %s (%s s; probe period 5 s)\n' "$pod" "$started" "$ready" "$(secs "$(epoch "$started")" "$(epoch "$ready")")"
	done
	run k label --dry-run=server --overwrite namespace "$GUARD_NS" pod-security.kubernetes.io/enforce=restricted
	check "namespace enforces restricted, and its pods pass it with no warning" all 'rc_is 0' '! warned'
	check "webhooks are called through the Service (clientConfig.service, no url)" test \
		"$(k get validatingwebhookconfiguration longhorn-guard -o jsonpath='{range .webhooks[*]}{.clientConfig.service.name}{.clientConfig.url}{" "}{end}')" \
		= "$(printf 'longhorn-guard %.0s' 1 2 3 4 5 6 7)"
	ip=$(value svc_ip)
	printf '    Service ClusterIP %s: %s\n' "$ip" "$(ip -o route get "$ip" | head -1 | sed 's/  */ /g')"
	# kube-proxy programs the Service's rules a moment after the endpoints turn ready, so a
	# first connection can be refused: up to 15 tries, each answer kept for the check.
	metrics_synced() { OUT=$(value svc_curl /metrics) && has "longhorn_guard_cluster_view_synced 1"; }
	local tries=0
	until metrics_synced || [ "$tries" -ge 15 ]; do tries=$((tries + 1)); sleep 1; done
	[ "$tries" -eq 0 ] || printf '    /metrics through the Service answered synced after %s retries\n' "$tries"
	check "/metrics through the Service ($ip:443): view synced" has "longhorn_guard_cluster_view_synced 1"
	ready_timing
}

# ready_timing: one replica replaced; from its first log line (the kubelet's timestamp) to the
# first /readyz 200 on the pod's IP, polled every 50 ms from the host.
ready_timing() {
	local before old new= ip= t_ready first
	before=$(guard_pods | awk '{print $1}')
	old=$(sed -n 1p <<<"$before")
	[ -n "$old" ] || {
		fail "a guard replica to replace"
		return
	}
	k -n "$GUARD_NS" delete pod "$old" --wait=false >/dev/null
	for _ in $(seq 1 600); do
		read -r new ip < <(guard_pods | awk '$3 != "" {print $1, $3}' | grep -vwF -f <(printf '%s\n' "$before")) || true
		[ -n "$ip" ] && break
		sleep 0.1
	done
	[ -n "$ip" ] || {
		fail "a replacement pod got an IP"
		return
	}
	for _ in $(seq 1 1200); do
		[ "$(svc_curl /readyz 8443 "$ip")" = ok ] && break
		sleep 0.05
	done
	t_ready=$(date +%s.%N)
	# awk reads the whole log: `head -1` would leave kubectl writing into a closed pipe
	# (SIGPIPE, exit 141), which pipefail turns into a stop once the log outgrows a pipe buffer.
	first=$(value k -n "$GUARD_NS" logs --timestamps "$new" | awk 'NR == 1 {print $1}')
	READY_SECONDS=$(secs "$(epoch "$first")" "$t_ready")
	printf '    %s: first log line %s, /readyz 200 after %s s\n' "$new" "$first" "$READY_SECONDS"
	k -n "$GUARD_NS" rollout status deployment/longhorn-guard --timeout=120s >/dev/null || true
	check "replacement replica: container start to /readyz 200 in $READY_SECONDS s" test "$(svc_curl /readyz 8443 "$ip")" = ok
}
