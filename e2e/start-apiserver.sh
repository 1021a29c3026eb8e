#!/usr/bin/env bash
# Starts a throw-away control plane for the e2e suite's local mode: etcd + kube-apiserver
# on 127.0.0.1 only, no controller-manager, no scheduler, no kubelet.
#
#   KUBE_APISERVER=/path/to/kube-apiserver e2e/start-apiserver.sh start [DIR]
#   KUBECONFIG=DIR/kubeconfig make e2e
#   e2e/start-apiserver.sh stop [DIR]
#
# Needs: etcd (Debian: etcd-server), openssl, curl, and a kube-apiserver binary (v1.28+ for
# matchConditions) that you provide in $KUBE_APISERVER. This script never downloads anything.
# DIR (default ${TMPDIR:-/tmp}/longhorn-guard-apiserver) holds the certificates, the
# service-account key, etcd's data, the logs, the PIDs and an admin kubeconfig
# (client certificate in group system:masters).
set -euo pipefail

CMD=${1:-start}
DIR=${2:-${TMPDIR:-/tmp}/longhorn-guard-apiserver}
API_PORT=${E2E_APISERVER_PORT:-16443}
ETCD_PORT=${E2E_ETCD_PORT:-12379}
ETCD_PEER_PORT=${E2E_ETCD_PEER_PORT:-12380}

die() {
	printf 'start-apiserver: %s\n' "$*" >&2
	exit 2
}

stop() {
	local name pid
	for name in kube-apiserver etcd; do
		if [ -f "$DIR/$name.pid" ]; then
			pid=$(cat "$DIR/$name.pid")
			kill "$pid" 2>/dev/null || true
			for _ in $(seq 1 20); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.5
			done
			rm -f "$DIR/$name.pid"
		fi
	done
}

wait_for() { # SECONDS CMD...
	local deadline=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 1
	done
}

case $CMD in
stop)
	stop
	echo "stopped (state left in $DIR)"
	exit 0
	;;
start) ;;
*) die "usage: $0 start|stop [DIR]" ;;
esac

[ -n "${KUBE_APISERVER:-}" ] || die "set KUBE_APISERVER to a kube-apiserver binary"
[ -x "$KUBE_APISERVER" ] || die "$KUBE_APISERVER is not executable"
ETCD=${ETCD:-$(command -v etcd || true)}
[ -n "$ETCD" ] || die "etcd not found (Debian: apt-get install etcd-server)"
command -v openssl >/dev/null || die "openssl not found"

stop
rm -rf "$DIR/etcd"
mkdir -p "$DIR/pki"
PKI=$DIR/pki

# One CA for serving and client certificates; a service-account signing key.
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

"$ETCD" --name e2e --data-dir "$DIR/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster "e2e=http://127.0.0.1:$ETCD_PEER_PORT" >"$DIR/etcd.log" 2>&1 &
echo $! >"$DIR/etcd.pid"
wait_for 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health" || die "etcd did not start (see $DIR/etcd.log)"

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
	>"$DIR/kube-apiserver.log" 2>&1 &
echo $! >"$DIR/kube-apiserver.pid"

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

ready() {
	curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
		"https://127.0.0.1:$API_PORT/readyz" | grep -qx ok
}
if ! wait_for 120 ready; then
	tail -n 30 "$DIR/kube-apiserver.log" >&2
	stop
	die "kube-apiserver did not become ready within 120s (see $DIR/kube-apiserver.log)"
fi
echo "kube-apiserver ready on https://127.0.0.1:$API_PORT"
echo "export KUBECONFIG=$DIR/kubeconfig"
