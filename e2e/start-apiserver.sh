#!/usr/bin/env bash
# Starts a throw-away control plane for the e2e suite's local mode: etcd + kube-apiserver
# on 127.0.0.1 only, no controller-manager, no scheduler, no kubelet.
#
#   KUBE_APISERVER=/path/to/kube-apiserver e2e/start-apiserver.sh start [DIR]
#   KUBECONFIG=DIR/kubeconfig make e2e
#   e2e/start-apiserver.sh stop [DIR]
#
# `KUBE_APISERVER=... make e2e` (E2E_APISERVER=own) runs `start` and `stop` itself, and in
# between, for the watch-fault checks, these (etcd, its data and the certificates stay):
#
#   e2e/start-apiserver.sh apiserver-stop [DIR]    # kube-apiserver only, SIGKILL (a crash)
#   e2e/start-apiserver.sh compact [DIR]           # etcd: a write outside /registry, then
#                                                  # compaction at the current revision (printed)
#   e2e/start-apiserver.sh apiserver-start [DIR]   # kube-apiserver again; waits for /readyz
#   e2e/start-apiserver.sh pki [DIR]               # only the certificates, in DIR/pki
#                                                  # (e2e/faults-cluster.sh uses them)
#
# Needs: etcd and etcdctl (Debian: etcd-server, etcd-client; ETCD and ETCDCTL pick others, and an
# etcdctl beside $ETCD is taken before the one on PATH), openssl, curl, and a
# kube-apiserver binary (v1.33+, the project's floor) that you provide in $KUBE_APISERVER. This
# script never downloads anything. DIR (default ${TMPDIR:-/tmp}/longhorn-guard-apiserver) holds
# the certificates, the service-account key, etcd's data, the logs, the PIDs, the ports
# (ports.env) and an admin kubeconfig (client certificate in group system:masters).
# Ports: E2E_APISERVER_PORT (16443), E2E_ETCD_PORT (12379), E2E_ETCD_PEER_PORT (12380).
# E2E_APISERVER_FLAGS: more kube-apiserver flags, split at spaces (e.g. a beta API:
# "--runtime-config=admissionregistration.k8s.io/v1beta1=true --feature-gates=MutatingAdmissionPolicy=true").
set -euo pipefail

CMD=${1:-start}
DIR=${2:-${TMPDIR:-/tmp}/longhorn-guard-apiserver}
API_PORT=${E2E_APISERVER_PORT:-16443}
ETCD_PORT=${E2E_ETCD_PORT:-12379}
ETCD_PEER_PORT=${E2E_ETCD_PEER_PORT:-12380}
APISERVER_FLAGS=${E2E_APISERVER_FLAGS:-}
PKI=$DIR/pki
# `start` records the ports and the binary here; the other commands read them back.
if [ "$CMD" != start ] && [ -f "$DIR/ports.env" ]; then
	# shellcheck source=/dev/null
	. "$DIR/ports.env"
fi

SCRIPT_NAME=start-apiserver
# shellcheck source=e2e/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # die, wait_for, stop_pid

# stop_one NAME [SIGNAL]: stops the process DIR/NAME.pid names (SIGTERM by default), with
# SIGKILL if it is still there after 10s: a kube-apiserver in graceful shutdown keeps its open
# watches for a minute or more.
stop_one() {
	[ -f "$DIR/$1.pid" ] || return 0
	stop_pid "$(cat "$DIR/$1.pid")" "${2:-TERM}" 10
	rm -f "$DIR/$1.pid"
}

stop() {
	stop_one kube-apiserver
	stop_one etcd
}

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

ready() {
	curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
		"https://127.0.0.1:$API_PORT/readyz" | grep -qx ok
}

# start_apiserver: kube-apiserver with the certificates in $PKI against etcd on $ETCD_PORT;
# waits until /readyz says ok (returns 1, with the log's tail, if it does not within 120s).
start_apiserver() {
	in_use "$API_PORT" && die "port $API_PORT is in use (set E2E_APISERVER_PORT)"
	local extra
	read -ra extra <<<"${APISERVER_FLAGS:-}"
	# Admission plugins: the defaults (incl. ServiceAccount, MutatingAdmissionWebhook,
	# ValidatingAdmissionWebhook). The service CIDR is only a setting: nothing is routed.
	"$KUBE_APISERVER" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" \
		--service-account-issuer=https://kubernetes.default.svc \
		--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
		--authorization-mode=RBAC \
		--service-cluster-ip-range=10.96.0.0/24 \
		--allow-privileged=true \
		--endpoint-reconciler-type=none \
		--profiling=false \
		"${extra[@]}" \
		>>"$DIR/kube-apiserver.log" 2>&1 &
	echo $! >"$DIR/kube-apiserver.pid"
	if ! wait_for 120 ready; then
		tail -n 30 "$DIR/kube-apiserver.log" >&2
		stop_one kube-apiserver
		printf 'start-apiserver: kube-apiserver did not become ready within 120s (see %s)\n' \
			"$DIR/kube-apiserver.log" >&2
		return 1
	fi
}

# make_pki: one CA for serving and client certificates (kube-apiserver's, an admin's in
# group system:masters), a service-account signing key; in $PKI.
make_pki() {
	mkdir -p "$PKI"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=e2e-ca" \
		-keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null
	issue() { # NAME SUBJECT [SAN]
		openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$PKI/$1.key" -out "$PKI/$1.csr" 2>/dev/null
		if [ -n "${3:-}" ]; then
			printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$3" >"$PKI/$1.ext"
		else
			printf 'extendedKeyUsage=clientAuth\n' >"$PKI/$1.ext"
		fi
		openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
			-days 2 -extfile "$PKI/$1.ext" -out "$PKI/$1.crt" 2>/dev/null
	}
	issue apiserver "/CN=kube-apiserver" "IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc"
	issue admin "/O=system:masters/CN=e2e-admin"
	openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
	openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
}

etcdctl_() { ETCDCTL_API=3 "$ETCDCTL" --endpoints="http://127.0.0.1:$ETCD_PORT" "$@"; }

need_started() { [ -f "$DIR/ports.env" ] || die "no $DIR/ports.env: run '$0 start $DIR' first"; }

case $CMD in
stop)
	stop
	echo "stopped (state left in $DIR)"
	exit 0
	;;
apiserver-stop)
	need_started
	stop_one kube-apiserver KILL
	echo "kube-apiserver stopped (etcd still runs)"
	exit 0
	;;
apiserver-start)
	need_started
	[ -x "$KUBE_APISERVER" ] || die "$KUBE_APISERVER is not executable"
	start_apiserver || exit 2
	echo "kube-apiserver ready on https://127.0.0.1:$API_PORT"
	exit 0
	;;
compact)
	need_started
	[ -n "${ETCDCTL:-}" ] || die "etcdctl not found (Debian: apt-get install etcd-client; or set ETCDCTL)"
	# A write outside the API server's keys moves the revision past every resource version a
	# client holds; compacting there makes a watch from any of them "too old" (410 Gone).
	etcdctl_ put /longhorn-guard-e2e/bump "$(date +%s)" >/dev/null || die "etcd put failed"
	etcdctl_ del /longhorn-guard-e2e/bump >/dev/null || die "etcd delete failed"
	# The header of any read carries the current revision.
	rev=$(etcdctl_ get /longhorn-guard-e2e/bump -w json | { grep -o '"revision":[0-9]*' || true; } | sed -n 1p | cut -d: -f2)
	[ -n "$rev" ] || die "cannot read etcd's revision"
	etcdctl_ compact "$rev" >/dev/null || die "etcd compaction at revision $rev failed"
	echo "$rev"
	exit 0
	;;
pki)
	command -v openssl >/dev/null || die "openssl not found"
	make_pki
	exit 0
	;;
start) ;;
*) die "usage: $0 start|stop|apiserver-stop|apiserver-start|compact|pki [DIR]" ;;
esac

[ -n "${KUBE_APISERVER:-}" ] || die "set KUBE_APISERVER to a kube-apiserver binary"
[ -x "$KUBE_APISERVER" ] || die "$KUBE_APISERVER is not executable"
ETCD=${ETCD:-$(command -v etcd || true)}
[ -n "$ETCD" ] || die "etcd not found (Debian: apt-get install etcd-server)"
command -v openssl >/dev/null || die "openssl not found"

stop
in_use "$ETCD_PORT" && die "port $ETCD_PORT is in use (set E2E_ETCD_PORT)"
in_use "$ETCD_PEER_PORT" && die "port $ETCD_PEER_PORT is in use (set E2E_ETCD_PEER_PORT)"
in_use "$API_PORT" && die "port $API_PORT is in use (set E2E_APISERVER_PORT)"
rm -rf "$DIR/etcd" "$DIR/kube-apiserver.log"
mkdir -p "$PKI"
printf 'API_PORT=%q\nETCD_PORT=%q\nETCD_PEER_PORT=%q\nKUBE_APISERVER=%q\nETCDCTL=%q\nAPISERVER_FLAGS=%q\n' \
	"$API_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT" "$(realpath "$KUBE_APISERVER")" "$(etcdctl_path)" "$APISERVER_FLAGS" >"$DIR/ports.env"

make_pki

"$ETCD" --name e2e --data-dir "$DIR/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster "e2e=http://127.0.0.1:$ETCD_PEER_PORT" >"$DIR/etcd.log" 2>&1 &
echo $! >"$DIR/etcd.pid"
wait_for 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health" || die "etcd did not start (see $DIR/etcd.log)"

start_apiserver || {
	stop
	exit 2
}

cat >"$DIR/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: e2e-admin
  user:
    client-certificate: $PKI/admin.crt
    client-key: $PKI/admin.key
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e-admin}
current-context: e2e
EOF

echo "kube-apiserver ready on https://127.0.0.1:$API_PORT"
echo "export KUBECONFIG=$DIR/kubeconfig"
