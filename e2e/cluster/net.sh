# Host networking of the real-kubelet cluster (e2e/cluster.sh). Sourced, not run.
#
# Everything lives on bridges this harness creates, in 10.233.0.0/16, plus the Service CIDR
# routed onto its control bridge before any component starts:
#   lgctl0  10.233.0.1/32  the API server's address; route SVC_CIDR dev lgctl0 src 10.233.0.1
#   lgcniN  10.233.N.1/24  node-N's node IP (gateway) and its CNI bridge (pods 10.233.N.0/24)
# Pods get routes to 10.233.0.0/16 and SVC_CIDR only (no default route), and a FORWARD rule
# drops anything from 10.233.0.0/16 to an address outside it: no packet of the cluster leaves
# the machine, even if a Service has no rule yet.

CTL_BR=lgctl0
CTL_IP=10.233.0.1
POD_NET=10.233.0.0/16
FWD_TAG=longhorn-guard-e2e-cluster

node_br() { echo "lgcni$1"; }
node_ip() { echo "10.233.$1.1"; }
node_subnet() { echo "10.233.$1.0/24"; }

# net_refuse: dies if something this run did not create already holds a name or route.
net_refuse() {
	local i br
	for br in "$CTL_BR" $(for i in $(seq 1 "$NODES"); do node_br "$i"; done); do
		if ip link show "$br" >/dev/null 2>&1; then die "interface $br exists and this harness did not create it (no $DIR/owner): refusing to run"; fi
	done
	if [ -n "$(ip route show "$SVC_CIDR")" ] || [ -n "$(ip route show "$POD_NET")" ]; then
		die "a route for $SVC_CIDR or $POD_NET exists already: refusing to run over a cluster this harness did not create"
	fi
	if iptables -S FORWARD | grep -q "$FWD_TAG"; then die "iptables already has $FWD_TAG rules: refusing to run"; fi
}

# net_up: bridges, addresses, the Service CIDR route, ip_forward, the FORWARD guard.
net_up() {
	local i
	echo "IP_FORWARD_BEFORE=$(cat /proc/sys/net/ipv4/ip_forward)" >>"$DIR/state.env"
	ip link add "$CTL_BR" type bridge
	ip addr add "$CTL_IP/32" dev "$CTL_BR"
	ip link set "$CTL_BR" up
	ip route add "$SVC_CIDR" dev "$CTL_BR" src "$CTL_IP"
	for i in $(seq 1 "$NODES"); do
		# A fixed MAC: a bridge without one takes the lowest of its ports' MACs, so it changes
		# as pods come and go, and pods' ARP entries for their gateway go stale (their packets
		# reach the bridge addressed to the old MAC and are dropped: connections stall for
		# many seconds, as webhook calls did during a rollout before this).
		ip link add "$(node_br "$i")" address "$(printf '02:4c:47:00:%02x:01' "$i")" type bridge
		ip addr add "$(node_ip "$i")/24" dev "$(node_br "$i")"
		ip link set "$(node_br "$i")" up
	done
	iptables -I FORWARD 1 -s "$POD_NET" ! -d "$POD_NET" -m comment --comment "$FWD_TAG" -j DROP
	echo 1 >/proc/sys/net/ipv4/ip_forward
	net_check
}

# net_check: the Service CIDR (first and last address) and every node subnet route to our own
# bridges, never to the default route. Dies otherwise.
net_check() {
	local addr dev i
	for addr in "${SVC_CIDR%/*}" "$SVC_IP" "$SVC_LAST"; do
		dev=$(ip -o route get "$addr" | sed -n 's/.* dev \([^ ]*\).*/\1/p')
		[ "$dev" = "$CTL_BR" ] || die "ip route get $addr goes to '$dev', not $CTL_BR: refusing to start (network rule)"
	done
	for i in $(seq 1 "$NODES"); do
		dev=$(ip -o route get "10.233.$i.200" | sed -n 's/.* dev \([^ ]*\).*/\1/p')
		[ "$dev" = "$(node_br "$i")" ] || die "ip route get 10.233.$i.200 goes to '$dev', not $(node_br "$i")"
	done
	printf '    ip route get %s: %s\n' "$SVC_IP" "$(ip -o route get "$SVC_IP" | head -1 | sed 's/  */ /g')"
}

# net_down: everything net_up and the CNI plugins left (bridges, routes, the FORWARD rule,
# the stand-in Multus' veths, network namespaces created during this run), ip_forward back.
net_down() {
	local i ns br
	while iptables -D FORWARD -s "$POD_NET" ! -d "$POD_NET" -m comment --comment "$FWD_TAG" -j DROP 2>/dev/null; do :; done
	ip route del "$SVC_CIDR" dev "$CTL_BR" 2>/dev/null || true
	for br in $(ip -o link show | sed -n 's/^[0-9]*: \(lgm[0-9a-f]*\)@.*/\1/p'); do ip link del "$br" 2>/dev/null || true; done
	for i in $(seq 1 "$NODES"); do ip link del "$(node_br "$i")" 2>/dev/null || true; done
	ip link del "$CTL_BR" 2>/dev/null || true
	if [ -f "$DIR/netns.before" ] && [ -d /run/netns ]; then
		for ns in /run/netns/cni-*; do
			[ -e "$ns" ] || continue
			grep -qxF "$ns" "$DIR/netns.before" && continue
			umount "$ns" 2>/dev/null || true
			rm -f "$ns"
		done
	fi
	if [ -n "${IP_FORWARD_BEFORE:-}" ]; then echo "$IP_FORWARD_BEFORE" >/proc/sys/net/ipv4/ip_forward; fi
}

# cni_conf NODE_INDEX: the node's CNI chain: bridge + host-local (routes to the cluster's
# networks only), then the Multus stand-in (e2e/cluster/multus-standin), which does nothing
# for pods that ask for no network.
cni_conf() {
	local i=$1
	cat <<-EOF
		{
		  "cniVersion": "1.0.0",
		  "name": "lg-node-$i",
		  "plugins": [
		    {
		      "type": "bridge", "bridge": "$(node_br "$i")", "isGateway": true, "ipMasq": false, "hairpinMode": true,
		      "ipam": {
		        "type": "host-local", "dataDir": "$DIR/node-$i/ipam",
		        "ranges": [[{"subnet": "$(node_subnet "$i")", "rangeStart": "10.233.$i.10", "gateway": "$(node_ip "$i")"}]],
		        "routes": [{"dst": "$POD_NET"}, {"dst": "$SVC_CIDR"}]
		      }
		    },
		    {"type": "lg-multus-standin", "kubeconfig": "$DIR/pki/multus.kubeconfig", "kubectl": "$(command -v "$KUBECTL")", "log": "$DIR/node-$i/multus.log"}
		  ]
		}
	EOF
}
