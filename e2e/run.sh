#!/usr/bin/env bash
# End-to-end suite: drives the cluster that KUBECONFIG names with the real kubectl.
#
#   make e2e                         # = e2e/run.sh, "local" mode, the cluster KUBECONFIG names
#   KUBE_APISERVER=/path/to/kube-apiserver make e2e # local mode on an API server of its own
#   E2E_IMAGE=repo/longhorn-guard:tag e2e/run.sh    # "in-cluster" mode (kind/k3d)
#
# API server (E2E_APISERVER):
#   own: the suite starts etcd + kube-apiserver ($KUBE_APISERVER) with e2e/start-apiserver.sh in
#     its work directory, runs against it, and throws it away on exit. Only here can it stop
#     and restart the API server under a running `serve`: the watch-fault checks (view stale,
#     429 "could not confirm", 410 Gone after an etcd compaction, recovery) run in this mode.
#   external: the cluster KUBECONFIG names; the watch-fault checks are skipped.
#   Default: own when KUBE_APISERVER is set and KUBECONFIG is not, else external.
#
# local mode (default): works on a bare kube-apiserver with no kubelet. longhorn-guard runs as
#   a local process on 127.0.0.1:$E2E_PORT in watch mode, authenticated as its own
#   ServiceAccount (so the shipped RBAC is exercised); the webhook configurations come from
#   manifests/overlays/local (clientConfig.url + the generated CA).
# in-cluster mode: installs manifests/overlays/dev-certs with $E2E_IMAGE and a fresh CA,
#   waits for the Deployment; the outage is simulated by scaling it to 0.
#
# It creates Longhorn CRDs (if missing), namespace longhorn-system, core Nodes node-1..3 and a
# small Longhorn state (e2e/state), all labelled longhorn-guard-e2e=true, and removes all of it
# on exit. It refuses to run where a real Longhorn or real node-1..3 exist.
# Prints "N passed, N failed"; exits 1 if any check failed, 2 if it could not run.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
E2E="$ROOT/e2e"
KUBECTL=${KUBECTL:-kubectl}
BIN=${LONGHORN_GUARD_BIN:-$ROOT/target/debug/longhorn-guard}
IMAGE=${E2E_IMAGE:-}
MODE=${E2E_MODE:-$([ -n "$IMAGE" ] && echo in-cluster || echo local)}
if [ -n "${KUBE_APISERVER:-}" ] && [ -z "${KUBECONFIG:-}" ]; then
	APISERVER=${E2E_APISERVER:-own}
else
	APISERVER=${E2E_APISERVER:-external}
fi
CRDS=${E2E_CRDS:-$ROOT/../shared/fixtures/crds/longhorn-crds.yaml}
# LH_NS, GUARD_NS, LABEL, IM1..IM3: e2e/lib.sh (the names of e2e/state).

PASSED=0
FAILED=0
FAILURES=()
WORK=$(mktemp -d "${TMPDIR:-/tmp}/longhorn-guard-e2e.XXXXXX")
SERVER_PID=
CREATED_CRDS=0
CREATED_LH_NS=0
APISERVER_DIR=$WORK/apiserver

SCRIPT_NAME=e2e
# shellcheck source=e2e/lib.sh
. "$E2E/lib.sh"
# The server's port and, for the deny-mode server (e2e/replicas-deny.sh), the next one: the
# first free pair from 18443, so that runs side by side do not collide.
PORT=${E2E_PORT:-$(free_port 18443 2)}
# shellcheck source=e2e/faults.sh
. "$E2E/faults.sh"
# shellcheck source=e2e/check-cluster.sh
. "$E2E/check-cluster.sh"
# shellcheck source=e2e/replicas-deny.sh
. "$E2E/replicas-deny.sh"
# shellcheck source=e2e/doctor.sh
. "$E2E/doctor.sh"
# shellcheck source=e2e/gate-policy.sh
. "$E2E/gate-policy.sh"

cleanup() {
	set +e
	log "cleanup"
	stop_webhook
	replicas_deny_cleanup
	doctor_cleanup
	if [ "$APISERVER" = own ]; then
		# The whole control plane is thrown away: nothing to delete object by object.
		"$E2E/start-apiserver.sh" stop "$APISERVER_DIR"
		rm -rf "$WORK"
		return
	fi
	# Webhook configurations first: with the server gone, Fail policies would block deletes.
	k delete validatingwebhookconfiguration longhorn-guard --ignore-not-found
	k delete mutatingwebhookconfiguration longhorn-guard --ignore-not-found
	k delete mutatingadmissionpolicybinding,mutatingadmissionpolicy -l "$LABEL" --ignore-not-found 2>/dev/null
	k delete mutatingadmissionpolicybinding,mutatingadmissionpolicy longhorn-guard-gate --ignore-not-found 2>/dev/null
	k delete validatingadmissionpolicybinding,validatingadmissionpolicy longhorn-guard-replicas --ignore-not-found 2>/dev/null
	k delete pods -A -l "$LABEL" --grace-period=0 --force --ignore-not-found 2>&1 | grep -v 'Immediate deletion' | sed 's/^/    /'
	k delete storageclass -l "$LABEL" --ignore-not-found
	if k get crd volumes.longhorn.io >/dev/null 2>&1; then
		k -n "$LH_NS" delete volumes.longhorn.io,replicas.longhorn.io,engines.longhorn.io,nodes.longhorn.io,settings.longhorn.io,instancemanagers.longhorn.io -l "$LABEL" --ignore-not-found --wait=false
	fi
	k delete nodes -l "$LABEL" --ignore-not-found
	check_cluster_cleanup
	if [ "$MODE" = in-cluster ]; then
		k delete -f "$WORK/install.yaml" --ignore-not-found --wait=false
	else
		k delete -f "$ROOT/manifests/base/rbac.yaml" --ignore-not-found
		delete_ns "$GUARD_NS"
	fi
	k -n "$LH_NS" delete serviceaccount -l "$LABEL" --ignore-not-found
	k -n default delete serviceaccount -l "$LABEL" --ignore-not-found
	[ "$CREATED_CRDS" = 1 ] && k delete -f "$CRDS" --ignore-not-found --wait=false
	[ "$CREATED_LH_NS" = 1 ] && delete_ns "$LH_NS"
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
say_where_stopped

stop_webhook() {
	if [ "$MODE" = in-cluster ]; then
		k -n "$GUARD_NS" scale deployment longhorn-guard --replicas=0 >/dev/null 2>&1 || true
		wait_for 60 no_endpoints || true
	elif [ -n "$SERVER_PID" ]; then
		stop_pid "$SERVER_PID"
		SERVER_PID=
	fi
}
no_endpoints() {
	[ -z "$(k -n "$GUARD_NS" get endpoints longhorn-guard -o jsonpath='{.subsets[*].addresses[*].ip}' 2>/dev/null)" ]
}

# ---------------------------------------------------------------- preflight
case $APISERVER in
own)
	[ "$MODE" = local ] || die "E2E_APISERVER=own needs local mode (in-cluster mode needs a real cluster)"
	[ -n "${KUBE_APISERVER:-}" ] || die "E2E_APISERVER=own needs KUBE_APISERVER (a kube-apiserver binary)"
	[ -n "$(etcdctl_path)" ] || die "E2E_APISERVER=own needs etcdctl for the watch-fault checks (Debian: etcd-client; or ETCDCTL, or one beside \$ETCD)"
	log "an API server of its own: etcd + $KUBE_APISERVER in $APISERVER_DIR"
	# Free ports near the defaults unless given, so that parallel runs do not collide.
	export E2E_APISERVER_PORT=${E2E_APISERVER_PORT:-$(free_port 16443)}
	export E2E_ETCD_PORT=${E2E_ETCD_PORT:-$(free_port 12379)}
	export E2E_ETCD_PEER_PORT=${E2E_ETCD_PEER_PORT:-$(free_port $((E2E_ETCD_PORT + 1)))}
	if ! "$E2E/start-apiserver.sh" start "$APISERVER_DIR" 2>&1 | sed 's/^/    /'; then
		die "could not start an API server (see above)"
	fi
	export KUBECONFIG=$APISERVER_DIR/kubeconfig
	;;
external) ;;
*) die "E2E_APISERVER must be own or external, got '$APISERVER'" ;;
esac
log "preflight ($MODE mode, $APISERVER API server)"
preflight_api
if [ "$MODE" = local ]; then
	[ -x "$BIN" ] || die "longhorn-guard binary not found at $BIN (cargo build, or set LONGHORN_GUARD_BIN)"
fi
# Refuse to touch a real Longhorn or real nodes.
refuse_real_longhorn longhorn-guard-e2e node-1 node-2 node-3

# ---------------------------------------------------------------- Longhorn state
log "Longhorn CRDs, namespace and state"
ensure_longhorn longhorn-guard-e2e
load_state
k get nodes -l "$LABEL"
k -n "$LH_NS" get volumes.longhorn.io,replicas.longhorn.io,pods -l "$LABEL" \
	-o custom-columns=KIND:.kind,NAME:.metadata.name,NODE:.spec.nodeID,PODNODE:.spec.nodeName,STATE:.status.state,ROBUSTNESS:.status.robustness,HEALTHY_AT:.spec.healthyAt

# ---------------------------------------------------------------- check cluster (e2e/check-cluster.sh)
check_cluster_checks

# ---------------------------------------------------------------- check drain's doctor (e2e/doctor.sh)
doctor_checks

# ---------------------------------------------------------------- webhook
if [ "$MODE" = local ]; then
	log "longhorn-guard as a local process on 127.0.0.1:$PORT (ServiceAccount $GUARD_NS/longhorn-guard)"
	[ -x "$BIN" ] || die "no binary at $BIN"
	"$BIN" certs --out "$WORK/certs" --ip 127.0.0.1 >/dev/null || die "longhorn-guard certs failed"
	guard_kubeconfig "$WORK/sa.kubeconfig"
	# --shutdown-idle-wait 0s: the harness stops it (an outage, the cleanup) without waiting for
	# the API server's idle connections, which it would otherwise leave open for up to 95 s.
	KUBECONFIG="$WORK/sa.kubeconfig" "$BIN" serve --tls-dir "$WORK/certs" --listen "127.0.0.1:$PORT" \
		--policy "$ROOT/manifests/base/policy.yaml" --shutdown-idle-wait 0s >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	if ! wait_for 60 curl -sf --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:$PORT/readyz"; then
		sed 's/^/    /' "$WORK/server.log"
		die "longhorn-guard did not become ready on https://127.0.0.1:$PORT/readyz within 60s"
	fi
	curl -s --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:$PORT/readyz" | sed 's/^/    readyz: /'
	echo
	ca_bundle=$(base64 -w0 <"$WORK/certs/ca.crt")
	"$KUBECTL" kustomize "$ROOT/manifests/overlays/local" |
		sed -e "s|__URL__|https://127.0.0.1:$PORT|" -e "s|__CA_BUNDLE__|$ca_bundle|" >"$WORK/webhooks.yaml"
	k apply -f "$WORK/webhooks.yaml"
	log "serve's periodic check cluster, on /metrics"
	check_cluster_metrics
else
	log "longhorn-guard in-cluster, image $IMAGE"
	[ -n "$IMAGE" ] || die "in-cluster mode needs E2E_IMAGE (an image the cluster can pull or has loaded)"
	cp -r "$ROOT/manifests" "$WORK/manifests"
	mkdir -p "$WORK/manifests/overlays/dev-certs/tls" "$WORK/manifests/overlays/e2e"
	"$BIN" certs --out "$WORK/manifests/overlays/dev-certs/tls" >/dev/null || die "longhorn-guard certs failed"
	sed "s|^  image: .*|  image: $IMAGE|" "$ROOT/manifests/base/policy.yaml" >"$WORK/manifests/overlays/e2e/policy.yaml"
	cat >"$WORK/manifests/overlays/e2e/kustomization.yaml" <<-EOF
		apiVersion: kustomize.config.k8s.io/v1beta1
		kind: Kustomization
		resources: [../dev-certs]
		images: [{name: ghcr.io/longhorn-guard/longhorn-guard, newName: "${IMAGE%:*}", newTag: "${IMAGE##*:}"}]
		configMapGenerator: [{name: longhorn-guard-policy, namespace: $GUARD_NS, behavior: replace, files: [policy.yaml]}]
	EOF
	"$KUBECTL" kustomize "$WORK/manifests/overlays/e2e" >"$WORK/install.yaml"
	k apply -f "$WORK/install.yaml"
	k -n "$GUARD_NS" rollout status deployment/longhorn-guard --timeout=180s || die "the Deployment did not become ready"
fi
# The API server picks up new webhook configurations asynchronously.
sleep 3

# ---------------------------------------------------------------- checks
DRAIN=(drain --ignore-daemonsets --delete-emptydir-data --grace-period=0)

log "cordon of a node holding the last healthy replica of vol-degraded: allowed, with warnings"
run k cordon node-1
check "cordon node-1 succeeds" rc_is 0
check "cordon node-1 prints longhorn-guard's warning naming vol-degraded" all warned 'has vol-degraded'

log "drain of that node: denied with 429, kubectl retries"
run k "${DRAIN[@]}" node-1 --timeout=12s
check "drain node-1 fails while vol-degraded has its last healthy replica there" rc_not 0
check "drain node-1 shows the denial with 'will retry after 5s'" \
	all 'has "(will retry after 5s)"' 'has "admission webhook \"drain-eviction.longhorn-guard.io\" denied the request"' 'has vol-degraded'
check "the instance-manager pod on node-1 was not evicted" k -n "$LH_NS" get pod "$IM1"

log "delete of that node: denied"
run k delete node node-1 --wait=false
check "delete node node-1 is denied by node-delete.longhorn-guard.io" \
	all 'rc_not 0' 'has "admission webhook \"node-delete.longhorn-guard.io\" denied the request"'
check "node-1 still exists" k get node node-1

log "drain of a safe node (node-3: vol-healthy keeps healthy replicas elsewhere)"
run k "${DRAIN[@]}" node-3 --timeout=30s
check "drain node-3 succeeds" all 'rc_is 0' 'has "node/node-3 drained"'
check "the instance-manager pod on node-3 is gone" gone -n "$LH_NS" get pod "$IM3"

log "make node-1 safe: vol-degraded's workload moves to node-2, where its replica finishes rebuilding"
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
lh() { k -n "$LH_NS" "$@" >/dev/null || die "setup step failed: $*"; }
lh patch replicas.longhorn.io vol-degraded-r-7d8e9f0a --type=merge \
	-p "{\"spec\":{\"healthyAt\":\"$now\",\"lastHealthyAt\":\"$now\",\"failedAt\":\"\"}}"
lh patch engines.longhorn.io vol-degraded-e-0 --type=merge \
	-p '{"metadata":{"labels":{"longhornnode":"node-2"}},"spec":{"nodeID":"node-2"}}'
lh patch engines.longhorn.io vol-degraded-e-0 --subresource=status --type=merge \
	-p "{\"status\":{\"ownerID\":\"node-2\",\"instanceManagerName\":\"$IM2\",\"replicaModeMap\":{\"vol-degraded-r-7d8e9f0a\":\"RW\"},\"rebuildStatus\":null}}"
engine_entry=$(k -n "$LH_NS" get instancemanagers.longhorn.io "$IM1" -o jsonpath='{.status.instanceEngines.vol-degraded-e-0}')
lh patch instancemanagers.longhorn.io "$IM1" --subresource=status --type=json \
	-p '[{"op":"remove","path":"/status/instanceEngines/vol-degraded-e-0"}]'
lh patch instancemanagers.longhorn.io "$IM2" --subresource=status --type=json \
	-p "[{\"op\":\"add\",\"path\":\"/status/instanceEngines/vol-degraded-e-0\",\"value\":$engine_entry}]"
lh patch volumes.longhorn.io vol-degraded --type=merge -p '{"spec":{"nodeID":"node-2"}}'
lh patch volumes.longhorn.io vol-degraded --subresource=status --type=merge \
	-p '{"status":{"currentNodeID":"node-2","ownerID":"node-2","robustness":"healthy"}}'
run k -n "$LH_NS" get volumes.longhorn.io,engines.longhorn.io,replicas.longhorn.io -l longhornvolume=vol-degraded \
	-o custom-columns=KIND:.kind,NAME:.metadata.name,NODE:.spec.nodeID,STATE:.status.state,ROBUSTNESS:.status.robustness,HEALTHY_AT:.spec.healthyAt,MODES:.status.replicaModeMap
sleep 2 # watch propagation to the webhook's view
run k "${DRAIN[@]}" node-1 --timeout=60s
check "drain node-1 succeeds once the state is safe" all 'rc_is 0' 'has "node/node-1 drained"'

log "replica-count warnings on kubectl apply"
run k apply -f - <<-EOF
	apiVersion: longhorn.io/v1beta2
	kind: Setting
	metadata: {name: default-replica-count, namespace: $LH_NS, labels: {longhorn-guard-e2e: "true"}}
	value: '{"v1":"1","v2":"1"}'
EOF
check "apply of Setting default-replica-count=1 prints a Warning" all 'rc_is 0' warned
run k apply -f - <<-EOF
	apiVersion: longhorn.io/v1beta2
	kind: Volume
	metadata: {name: vol-e2e-one, namespace: $LH_NS, labels: {longhorn-guard-e2e: "true"}}
	spec: {numberOfReplicas: 1, size: "1073741824", frontend: blockdev, dataEngine: v1, accessMode: rwo}
EOF
check "apply of a Volume with numberOfReplicas 1 prints a Warning" all 'rc_is 0' warned
run k apply -f - <<-EOF
	apiVersion: storage.k8s.io/v1
	kind: StorageClass
	metadata: {name: longhorn-e2e-1-replica, labels: {longhorn-guard-e2e: "true"}}
	provisioner: driver.longhorn.io
	parameters: {numberOfReplicas: "1", staleReplicaTimeout: "30"}
EOF
check "apply of a Longhorn StorageClass with numberOfReplicas \"1\" prints a Warning" \
	all 'rc_is 0' warned
replicas_deny_checks

log "init gate on instance-manager pods that request the storage network"
im_pod() { # NAME NODE ANNOTATE(yes|no)
	local ann=""
	[ "$3" = yes ] && ann='annotations: {k8s.v1.cni.cncf.io/networks: "[{\"namespace\": \"kube-system\", \"name\": \"storage-net\", \"interface\": \"lhnet1\"}]"}'
	cat <<-EOF
		apiVersion: v1
		kind: Pod
		metadata:
		  name: $1
		  namespace: $LH_NS
		  labels: {longhorn-guard-e2e: "true", longhorn.io/component: instance-manager, longhorn.io/node: $2, longhorn.io/managed-by: longhorn-manager}
		  $ann
		spec:
		  nodeName: $2
		  restartPolicy: Never
		  serviceAccountName: longhorn-service-account
		  containers: [{name: instance-manager, image: longhornio/longhorn-instance-manager:v1.12.1, args: [instance-manager, --debug, daemon, --listen, ":8500"]}]
	EOF
}
run k create -f - <<<"$(im_pod instance-manager-e2e00000000000000000000000000001 node-3 yes)"
run k -n "$LH_NS" get pod instance-manager-e2e00000000000000000000000000001 -o jsonpath='{.spec.initContainers[*].name}{"\n"}{.spec.containers[0].name}'
check "an instance-manager pod with the networks annotation carries the init container longhorn-guard-gate" \
	all 'has longhorn-guard-gate'
check "its first container is still instance-manager" all 'has instance-manager'
gate_image=$(sed -n 's/^  image: *//p' "$ROOT/manifests/base/policy.yaml")
[ "$MODE" = in-cluster ] && gate_image=$IMAGE
run k -n "$LH_NS" get pod instance-manager-e2e00000000000000000000000000001 \
	-o jsonpath='{.spec.initContainers[0].image} {.spec.initContainers[0].command[0]} {.spec.initContainers[0].args[0]}'
check "the gate runs 'longhorn-guard gate' from the policy's gate.image ($gate_image)" \
	has "$gate_image /usr/local/bin/longhorn-guard gate"
run k create -f - <<<"$(im_pod instance-manager-e2e00000000000000000000000000002 node-3 no)"
run k -n "$LH_NS" get pod instance-manager-e2e00000000000000000000000000002 -o jsonpath='{.spec.initContainers[*].name}'
check "an instance-manager pod without the annotation is left alone" all 'rc_is 0' 'lacks longhorn-guard-gate'
gate_policy_prepare

# ---------------------------------------------------------------- watch faults (e2e/faults.sh)
if [ "$APISERVER" = own ]; then
	watch_fault_checks
else
	log "watch faults: skipped (they stop and restart the API server: E2E_APISERVER=own only)"
fi

log "webhook outage: each failurePolicy as promised"
stop_webhook
sleep 1
run k "${DRAIN[@]}" node-2 --timeout=20s
check "Fail: eviction of an instance-manager pod fails with a webhook call error" \
	all 'rc_not 0' 'has "failed calling webhook \"drain-eviction.longhorn-guard.io\""'
check "the instance-manager pod on node-2 was not evicted" k -n "$LH_NS" get pod "$IM2"
run k delete node node-2 --wait=false
check "Fail: node deletion fails with a webhook call error" \
	all 'rc_not 0' 'has "failed calling webhook \"node-delete.longhorn-guard.io\""'
run k uncordon node-2
run k cordon node-2
check "Ignore: cordon still works" all 'rc_is 0' 'has "node/node-2 cordoned"'
run k create -f - <<<"$(im_pod instance-manager-e2e00000000000000000000000000003 node-3 yes)"
check "Ignore: instance-manager pod creation still works (without the gate)" rc_is 0
gate_policy_checks
replicas_policy_checks
run k -n "$LH_NS" patch settings.longhorn.io default-replica-count --type=merge -p '{"value":"{\"v1\":\"2\",\"v2\":\"2\"}"}'
check "Ignore: Setting updates still work" rc_is 0
run k -n default run e2e-web --image=registry.invalid/none --restart=Never --labels="$LABEL" --overrides='{"spec":{"nodeName":"node-2"}}'
run k -n "$LH_NS" run longhorn-ui-e2e --image=registry.invalid/none --restart=Never --labels="$LABEL" --overrides='{"spec":{"nodeName":"node-2"}}'
run k "${DRAIN[@]}" node-2 --pod-selector=longhorn-guard-e2e=true,longhorn.io/component!=instance-manager --force --timeout=20s
check "evictions of other pods (default, and non-instance-manager in longhorn-system) are not affected" \
	all 'rc_is 0' 'has "pod/e2e-web evicted"' 'has "pod/longhorn-ui-e2e evicted"' 'has "node/node-2 drained"'

# ---------------------------------------------------------------- summary
echo
if [ "$MODE" = local ] && [ -f "$WORK/server.log" ]; then
	log "longhorn-guard log (last 20 lines)"
	tail -n 20 "$WORK/server.log" | sed 's/^/    /'
fi
for f in "${FAILURES[@]}"; do printf 'failed: %s\n' "$f"; done
printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
[ "$FAILED" -eq 0 ]
