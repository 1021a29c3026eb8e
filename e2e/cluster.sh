#!/usr/bin/env bash
# make e2e-cluster: a throw-away real cluster on this machine (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy, and E2E_CLUSTER_NODES (2) kubelets,
# each with its own containerd), longhorn-guard installed into it exactly as README says, a
# Longhorn stand-in with real instance-manager pods, and the checks of e2e/TESTING.md
# ("Real-kubelet suite"). Downloads nothing.
#
#   e2e/cluster.sh [run]   # up, install, checks, down (always, by trap); "N passed, N failed"
#   e2e/cluster.sh up      # only the cluster (KUBECONFIG=$E2E_CLUSTER_DIR/kubeconfig)
#   e2e/cluster.sh down    # stop and remove everything `up` made
#   e2e/cluster.sh checks FN...  # on a cluster `up` made: only these steps of run_checks, in
#                                # order (e.g. longhorn_standin install_guard check_rollout)
#
# Needs (root): KUBE_BIN_DIR (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy), ETCD (etcd 3.5+), CONTAINERD_BIN_DIR (containerd 1.7+, containerd-shim-runc-v2,
# ctr), RUNC, CNI_PLUGIN_DIR (bridge, host-local, loopback), BUSYBOX (a static busybox),
# kubectl, openssl, curl, iptables, ip, python3. Ports 33xxx on 127.0.0.1 and the harness's
# bridges, networks 10.233.0.0/16 and SVC_CIDR (10.97.0.0/16), all created and removed here.
# E2E_CLUSTER_EXTRA: scripts run after the checks as SCRIPT KUBECONFIG IMAGE (e.g.
# e2e/cluster-helm.sh). E2E_CLUSTER_KEEP=1 leaves the cluster up after `run`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
E2E=$ROOT/e2e
CMD=${1:-run}
DIR=${E2E_CLUSTER_DIR:-/tmp/longhorn-guard-cluster}
NODES=${E2E_CLUSTER_NODES:-2}
KUBECTL=${KUBECTL:-kubectl}
KUBE_BIN_DIR=${KUBE_BIN_DIR:-}
ETCD=${ETCD:-$(command -v etcd || true)}
CONTAINERD_BIN_DIR=${CONTAINERD_BIN_DIR:-$(dirname "$(command -v containerd || echo /usr/bin/containerd)")}
RUNC=${RUNC:-$(command -v runc || echo /usr/sbin/runc)}
CNI_PLUGIN_DIR=${CNI_PLUGIN_DIR:-/usr/lib/cni}
BUSYBOX=${BUSYBOX:-/bin/busybox}
GUARD_IMAGE=${GUARD_IMAGE:-ghcr.io/longhorn-guard/longhorn-guard:0.1.0}
GUARD_IMAGE_TAR=${GUARD_IMAGE_TAR:-$ROOT/_out/images/longhorn-guard.tar}
# check drain (live) reads the guard's view as an operator would; make certs builds it.
GUARD_BIN=${GUARD_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/longhorn-guard}
SVC_CIDR=10.97.0.0/16
SVC_IP=10.97.0.1
SVC_LAST=10.97.255.254
API_PORT=33443
ETCD_PORT=33379
ETCD_PEER_PORT=33380
ETCD_METRICS_PORT=33381
CM_PORT=33257
SCHED_PORT=33259
PROXY_METRICS_PORT=33249
PROXY_HEALTHZ_PORT=33256
OWNER="longhorn-guard e2e-cluster"
LH_NS=longhorn-system
GUARD_NS=longhorn-guard
SCRIPT_NAME=e2e-cluster
CRDS=${E2E_CRDS:-$ROOT/../shared/fixtures/crds/longhorn-crds.yaml}
# E2E_CLUSTER_SUITE: standin (the Longhorn stand-in, e2e/cluster/checks.sh) or longhorn (real
# Longhorn built from source, e2e/longhorn/; make e2e-longhorn). A suite may replace the hooks
# below and ALLOW_PRIVILEGED before anything starts.
# `down` and `checks` on a cluster `up` made take the suite and node count it recorded.
SUITE=${E2E_CLUSTER_SUITE:-$(cat "$DIR/suite" 2>/dev/null || echo standin)}
[ -n "${E2E_CLUSTER_NODES:-}" ] || [ ! -f "$DIR/nodes" ] || NODES=$(cat "$DIR/nodes")
ALLOW_PRIVILEGED=false
suite_preflight() { :; }
suite_host_up() { :; }
suite_images() { :; }
suite_host_down() { :; }
CHECKS=$E2E/cluster/checks.sh
export KUBECONFIG=$DIR/kubeconfig

# shellcheck source=e2e/lib.sh
. "$E2E/lib.sh"
for f in net control node images; do
	# shellcheck source=/dev/null
	. "$E2E/cluster/$f.sh"
done
case $SUITE in
standin) ;;
# shellcheck source=e2e/longhorn/suite.sh
longhorn) . "$E2E/longhorn/suite.sh" ;;
*) die "E2E_CLUSTER_SUITE=$SUITE: expected standin or longhorn" ;;
esac

in_use() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

preflight() {
	local b
	[ "$(id -u)" = 0 ] || die "needs root (bridges, routes, iptables, containerd)"
	[ -n "$KUBE_BIN_DIR" ] || die "set KUBE_BIN_DIR to the directory with kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy"
	for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy; do
		[ -x "$KUBE_BIN_DIR/$b" ] || die "$KUBE_BIN_DIR/$b missing"
	done
	[ -x "$ETCD" ] || die "etcd not found (set ETCD)"
	for b in containerd containerd-shim-runc-v2 ctr; do
		[ -x "$CONTAINERD_BIN_DIR/$b" ] || die "$CONTAINERD_BIN_DIR/$b missing (set CONTAINERD_BIN_DIR)"
	done
	[ -x "$RUNC" ] || die "runc not found (set RUNC)"
	for b in bridge host-local loopback; do [ -x "$CNI_PLUGIN_DIR/$b" ] || die "CNI plugin $CNI_PLUGIN_DIR/$b missing (set CNI_PLUGIN_DIR)"; done
	[ -x "$BUSYBOX" ] || die "busybox not found at $BUSYBOX (Debian: busybox-static)"
	for b in "$KUBECTL" openssl curl iptables ip python3; do command -v "$b" >/dev/null || die "$b not found"; done
	[ -f "$CRDS" ] || die "Longhorn CRDs not found at $CRDS (set E2E_CRDS)"
	suite_preflight
}

# refuse: nothing of another cluster may be here. Leftovers of our own (DIR/owner) are
# removed first; anything else holding our ports, names or routes stops the run.
refuse() {
	local p
	if [ -f "$DIR/owner" ]; then
		echo "    leftovers of an earlier run in $DIR: removing them first"
		down
	fi
	[ ! -e "$DIR" ] || [ -z "$(ls -A "$DIR")" ] || die "$DIR exists and was not made by this harness (no $DIR/owner): refusing to run"
	for p in $ETCD_PORT $ETCD_PEER_PORT $ETCD_METRICS_PORT $CM_PORT $SCHED_PORT $PROXY_METRICS_PORT $PROXY_HEALTHZ_PORT; do
		in_use 127.0.0.1 "$p" && die "port $p on 127.0.0.1 is in use: refusing to run over a cluster this harness did not create"
	done
	for p in $(seq 1 "$NODES"); do
		[ -d "/sys/fs/cgroup/memory/lg-node-$p" ] && die "cgroup lg-node-$p exists and this harness did not create it"
	done
	net_refuse
}

up() {
	local i t0=$SECONDS
	log "cluster up: $NODES nodes in $DIR"
	refuse
	mkdir -p "$DIR/log" "$DIR/pids" "$DIR/images"
	echo "$OWNER" >"$DIR/owner"
	echo "$SUITE" >"$DIR/suite"
	echo "$NODES" >"$DIR/nodes"
	: >"$DIR/state.env"
	: >"$DIR/resolv.conf"
	ls -d /run/netns/cni-* 2>/dev/null >"$DIR/netns.before" || true
	# The network rule first: Service CIDR routed to our bridge, checked, before any component.
	net_up
	suite_host_up
	images_build
	suite_images
	cni_bin
	pki_up
	control_up
	for i in $(seq 1 "$NODES"); do node_up "$i"; done
	for i in $(seq 1 "$NODES"); do
		wait_for 120 node_ready "$i" || {
			tail -n 30 "$DIR/log/kubelet-$i.log" >&2
			die "node-$i did not become Ready within 120 s"
		}
	done
	wait_for 60 k -n default get serviceaccount default || die "no default ServiceAccount (controller-manager?)"
	net_check
	k get nodes -o wide | sed 's/^/    /'
	printf '    cluster up in %s s\n' $((SECONDS - t0))
}

down() {
	local i
	set +e # every step runs, whatever failed before it
	log "cluster down: $DIR"
	[ -f "$DIR/owner" ] || {
		echo "    nothing to do: $DIR has no owner file of this harness"
		return 0
	}
	# shellcheck source=/dev/null
	[ -f "$DIR/state.env" ] && . "$DIR/state.env"
	for i in $(seq 1 "$NODES"); do node_down "$i"; done
	for n in kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_named "$n"; done
	proxy_cleanup
	suite_host_down
	net_down
	umount_under "$DIR"
	rm -rf "$DIR"
	echo "    removed bridges, routes, iptables rules, cgroups, mounts and $DIR"
	set -e
}

say_where_stopped

# stopped_summary: a step that stopped the script (set -e; say_where_stopped names it) after
# the checks began and before their summary counts as one failed check, and the summary is
# printed all the same: a run ends with its "N passed, N failed" line whatever stopped it.
stopped_summary() {
	[ -n "${CHECKS_STARTED:-}" ] && [ -z "${SUMMARY_PRINTED:-}" ] || return 0
	fail "the run stopped before its end (the 'stopped:' line above says where)"
	summary || true
}

# One run at a time on this machine: a second one would find (and remove) the first's cluster.
exec 9>"$DIR.lock"
flock -n 9 || die "another e2e/cluster.sh holds the lock: wait for it to finish"

case $CMD in
up)
	preflight
	up
	echo "export KUBECONFIG=$DIR/kubeconfig"
	;;
down) down ;;
checks)
	[ -f "$DIR/owner" ] || die "no cluster of this harness in $DIR: run $0 up first"
	shift
	[ $# -gt 0 ] || die "usage: $0 checks FN... (the steps of run_checks in e2e/cluster/checks.sh)"
	# shellcheck source=/dev/null
	. "$CHECKS"
	trap stopped_summary EXIT
	CHECKS_STARTED=1
	for fn in "$@"; do
		[ "$(type -t "$fn")" = function ] || die "no step $fn in $CHECKS"
		"$fn"
	done
	summary
	;;
run)
	preflight
	trap 'rc=$?; stopped_summary; [ "${E2E_CLUSTER_KEEP:-0}" = 1 ] || down; exit $rc' EXIT
	trap 'exit 2' INT TERM
	up
	# shellcheck source=/dev/null
	. "$CHECKS"
	CHECKS_STARTED=1
	run_checks
	;;
*) die "usage: $0 [run|up|down|checks FN...]" ;;
esac
