# Certificates and the control plane of the real-kubelet cluster (e2e/cluster.sh). Sourced.
# etcd on 127.0.0.1, kube-apiserver on the control bridge's address (pods reach it through
# the `kubernetes` Service), controller-manager and scheduler on 127.0.0.1, one kube-proxy
# (iptables mode) for all nodes, since they share this host's network namespace.

PKI=$DIR/pki

# start_bg NAME CMD...: runs CMD in the background, output to DIR/log/NAME.log, pid in
# DIR/pids/NAME.pid (stop_all stops exactly these).
start_bg() {
	local name=$1
	shift
	# 9>&-: the run's lock (e2e/cluster.sh) stays with the run, not with the cluster's daemons.
	"$@" >>"$DIR/log/$name.log" 2>&1 9>&- &
	echo $! >"$DIR/pids/$name.pid"
}

# stop_named NAME: the pid this harness recorded, by lib.sh's stop_pid (SIGTERM, SIGKILL after 30 s).
stop_named() {
	local f=$DIR/pids/$1.pid
	[ -f "$f" ] || return 0
	stop_pid "$(cat "$f")"
	rm -f "$f"
}

issue() { # NAME SUBJECT [SAN]: an EC key and a certificate the cluster CA signs, in one step
	local san=()
	[ -z "${3:-}" ] || san=(-addext "subjectAltName=$3")
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "$2" \
		-CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -keyout "$PKI/$1.key" -out "$PKI/$1.crt" \
		-addext "basicConstraints=critical,CA:FALSE" -addext "extendedKeyUsage=serverAuth,clientAuth" "${san[@]}" 2>/dev/null
}

kubeconfig_for() { # NAME: DIR/pki/NAME.kubeconfig with NAME's client certificate
	cat >"$PKI/$1.kubeconfig" <<-EOF
		apiVersion: v1
		kind: Config
		clusters: [{name: lg, cluster: {server: "https://$CTL_IP:$API_PORT", certificate-authority: "$PKI/ca.crt"}}]
		users: [{name: $1, user: {client-certificate: "$PKI/$1.crt", client-key: "$PKI/$1.key"}}]
		contexts: [{name: lg, context: {cluster: lg, user: $1}}]
		current-context: lg
	EOF
}

pki_up() {
	local i
	mkdir -p "$PKI"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-subj "/CN=longhorn-guard-e2e-cluster-ca" -keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null
	issue apiserver "/CN=kube-apiserver" \
		"IP:$CTL_IP,IP:$SVC_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	issue admin "/O=system:masters/CN=e2e-cluster-admin"
	issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
	issue controller-manager "/CN=system:kube-controller-manager"
	issue scheduler "/CN=system:kube-scheduler"
	issue proxy "/CN=system:kube-proxy"
	# The Multus stand-in writes network-status onto pods, as Multus does with its own account.
	issue multus "/O=system:masters/CN=e2e-multus-standin"
	for i in $(seq 1 "$NODES"); do
		issue "node-$i" "/O=system:nodes/CN=system:node:node-$i"
		kubeconfig_for "node-$i"
	done
	openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
	openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	for n in admin controller-manager scheduler proxy multus; do kubeconfig_for "$n"; done
	cp "$PKI/admin.kubeconfig" "$DIR/kubeconfig"
}

api_ready() {
	curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
		"https://$CTL_IP:$API_PORT/readyz" | grep -qx ok
}

control_up() {
	start_bg etcd "$ETCD" --name lg-e2e --data-dir "$DIR/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "lg-e2e=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "http://127.0.0.1:$ETCD_METRICS_PORT"
	wait_for 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health" || die "etcd did not start (see $DIR/log/etcd.log)"
	# Webhooks are reached through their Service's ClusterIP (kube-proxy), as in most clusters:
	# no --enable-aggregator-routing. SVC_CIDR is routed to lgctl0 before this starts.
	start_bg kube-apiserver "$KUBE_BIN_DIR/kube-apiserver" \
		--bind-address="$CTL_IP" --advertise-address="$CTL_IP" --secure-port="$API_PORT" \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" \
		--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types=InternalIP \
		--service-account-issuer=https://kubernetes.default.svc \
		--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
		--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
		--service-cluster-ip-range="$SVC_CIDR" --allow-privileged="$ALLOW_PRIVILEGED" --profiling=false
	wait_for 120 api_ready || {
		tail -n 20 "$DIR/log/kube-apiserver.log" >&2
		die "kube-apiserver did not become ready within 120 s"
	}
	start_bg kube-controller-manager "$KUBE_BIN_DIR/kube-controller-manager" \
		--kubeconfig="$PKI/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$PKI/controller-manager.kubeconfig" --authorization-kubeconfig="$PKI/controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$CM_PORT" --leader-elect=false \
		--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
		--use-service-account-credentials=true --service-cluster-ip-range="$SVC_CIDR" \
		--cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
		--node-monitor-grace-period=20s --profiling=false
	start_bg kube-scheduler "$KUBE_BIN_DIR/kube-scheduler" \
		--kubeconfig="$PKI/scheduler.kubeconfig" \
		--authentication-kubeconfig="$PKI/scheduler.kubeconfig" --authorization-kubeconfig="$PKI/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --leader-elect=false --profiling=false
	cat >"$DIR/kube-proxy.yaml" <<-EOF
		apiVersion: kubeproxy.config.k8s.io/v1alpha1
		kind: KubeProxyConfiguration
		clientConnection: {kubeconfig: "$PKI/proxy.kubeconfig"}
		mode: iptables
		clusterCIDR: "$POD_NET"
		hostnameOverride: node-1
		bindAddress: 127.0.0.1
		healthzBindAddress: "127.0.0.1:$PROXY_HEALTHZ_PORT"
		metricsBindAddress: "127.0.0.1:$PROXY_METRICS_PORT"
		nodePortAddresses: ["$POD_NET"]
		conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
		iptables: {syncPeriod: 10s, minSyncPeriod: 0s}
	EOF
	start_bg kube-proxy "$KUBE_BIN_DIR/kube-proxy" --config="$DIR/kube-proxy.yaml"
}

# proxy_cleanup: kube-proxy's chains (its --cleanup mode), then what the kubelets left
# (KUBE-FIREWALL, KUBE-KUBELET-CANARY, ...): every KUBE-* chain and each jump to one, IPv4 and
# IPv6. Only this harness runs a kube-proxy or kubelet here (refuse() checked).
proxy_cleanup() {
	local ipt t rule chain
	[ -x "$KUBE_BIN_DIR/kube-proxy" ] && "$KUBE_BIN_DIR/kube-proxy" --cleanup >/dev/null 2>&1 || true
	for ipt in iptables ip6tables; do
		for t in filter nat mangle; do
			for rule in "$("$ipt" -t "$t" -S 2>/dev/null | grep -E '^-A [^K][^ ]* .*-j KUBE-' || true)"; do
				[ -n "$rule" ] || continue
				while read -r line; do eval "$ipt -t $t -D ${line#-A }" 2>/dev/null || true; done <<<"$rule"
			done
			for chain in $("$ipt" -t "$t" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p'); do "$ipt" -t "$t" -F "$chain" 2>/dev/null || true; done
			for chain in $("$ipt" -t "$t" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p'); do "$ipt" -t "$t" -X "$chain" 2>/dev/null || true; done
		done
	done
}
