# Real Multus (the thin plugin, built from source by e2e/longhorn/build.sh) and a storage network
# on the real-Longhorn cluster: `make e2e-longhorn-multus`. Sourced by e2e/longhorn/suite.sh when
# E2E_MULTUS is set; e2e/longhorn/seedrace.sh plays the seed's race on it.
#
#   E2E_MULTUS    v3.9.3 (writes network-status and networks-status, CNI <= 0.4.0) or v4.2.4
#                 (network-status only)
#   MULTUS_SRC    the multus-cni tree of that version (its deployments/ has the
#                 NetworkAttachmentDefinition CRD)
#
# Multus is each node's CNI entry point: 00-multus.conf sorts before the node's own
# 10-lg-node-N.conflist (containerd loads one file and reloads on every change of the directory),
# with that node network inline as its delegate. The harness writes and removes 00-multus.conf
# as Multus's DaemonSet does (it writes the file when its pod starts, and removes it on exit with
# cleanup-config-on-exit), so that a node's "reboot" can come up before it.
#
# The storage network: the bridge lgstor0 (no address on the host), 10.233.100.0/24 from
# host-local (one data directory: every node shares this host, so addresses stay unique),
# NetworkAttachmentDefinition longhorn-system/storage, and Longhorn's storage-network setting
# naming it. The host routes that subnet to a blackhole: a pod without the storage interface
# reaches no storage address, and no packet for one leaves the machine.

E2E_MULTUS=${E2E_MULTUS:-}
MULTUS_SRC=${MULTUS_SRC:-}
STOR_BR=lgstor0
STOR_NET=10.233.100.0/24
STOR_NAD=storage
STOR_IF=lhnet1
NETWORK_STATUS=k8s.v1.cni.cncf.io/network-status
NETWORKS_STATUS=k8s.v1.cni.cncf.io/networks-status

multus_preflight() {
	case $E2E_MULTUS in v3.9.3 | v4.2.4) ;; *) die "E2E_MULTUS=$E2E_MULTUS: expected v3.9.3 or v4.2.4" ;; esac
	[ -x "$LONGHORN_BIN_DIR/multus-$E2E_MULTUS" ] || die "$LONGHORN_BIN_DIR/multus-$E2E_MULTUS missing (e2e/longhorn/build.sh with MULTUS_V3_SRC/MULTUS_V4_SRC)"
	[ -f "$MULTUS_SRC/deployments/multus-daemonset.yml" ] || die "set MULTUS_SRC to multus-cni at $E2E_MULTUS (deployments/multus-daemonset.yml)"
	ip link show "$STOR_BR" >/dev/null 2>&1 && die "interface $STOR_BR exists and this harness did not create it"
	[ -z "$(ip route show "$STOR_NET")" ] || die "a route for $STOR_NET exists already: refusing to run"
	return 0
}

multus_host_up() {
	ip link add "$STOR_BR" type bridge
	ip link set "$STOR_BR" up
	ip route add blackhole "$STOR_NET"
	printf '    storage bridge %s for %s; host route: %s\n' "$STOR_BR" "$STOR_NET" "$(ip route show "$STOR_NET")"
}
multus_host_down() {
	cut_pod_network off
	ip route del blackhole "$STOR_NET" 2>/dev/null || true
	ip link del "$STOR_BR" 2>/dev/null || true
}

# node_net NODE: the node's own network, CNI 0.4.0 (what v3.9.3 speaks): bridge + host-local,
# routes to the cluster's networks only. It replaces net.sh's conflist (no Multus stand-in).
node_net() {
	local i=$1
	cat <<-EOF
		{"cniVersion": "0.4.0", "name": "lg-node-$i", "plugins": [{
		  "type": "bridge", "bridge": "$(node_br "$i")", "isGateway": true, "ipMasq": false, "hairpinMode": true,
		  "ipam": {"type": "host-local", "dataDir": "$DIR/node-$i/ipam",
		    "ranges": [[{"subnet": "$(node_subnet "$i")", "rangeStart": "10.233.$i.10", "gateway": "$(node_ip "$i")"}]],
		    "routes": [{"dst": "$POD_NET"}, {"dst": "$SVC_CIDR"}]}}]}
	EOF
}
cni_conf() { node_net "$1"; }

multus_conf_path() { echo "$(node_dir "$1")/cni/00-multus.conf"; }
# multus_conf_write NODE: Multus with the node network as its delegate, written atomically.
multus_conf_write() {
	local i=$1 f
	f=$(multus_conf_path "$i")
	cat >"$f.tmp" <<-EOF
		{"cniVersion": "0.4.0", "name": "multus-cni-network", "type": "multus",
		 "kubeconfig": "$DIR/pki/multus.kubeconfig", "binDir": "$DIR/cni-bin",
		 "cniDir": "$DIR/node-$i/multus-cache", "logFile": "$DIR/node-$i/multus.log", "logLevel": "verbose",
		 "delegates": [$(node_net "$i")]}
	EOF
	mv "$f.tmp" "$f"
}
multus_conf_remove() { rm -f "$(multus_conf_path "$1")"; }

# multus_up: the binary in the plugin directory and every node's config, before Longhorn.
multus_up() {
	local i
	log "Multus $E2E_MULTUS (thin plugin, built from source) as every node's CNI entry point"
	ln -sf "$LONGHORN_BIN_DIR/multus-$E2E_MULTUS" "$DIR/cni-bin/multus"
	for i in $(seq 1 "$NODES"); do multus_conf_write "$i"; done
	printf '    %s: %s\n' "$(multus_conf_path 1)" "$(tr -d '\n\t' <"$(multus_conf_path 1)" | cut -c1-200)..."
	check "multus binary runs ($("$DIR/cni-bin/multus" -version 2>&1 | head -1 | cut -c1-80))" "$DIR/cni-bin/multus" -version
}

# storage_network_up: the CRD, the NetworkAttachmentDefinition, Longhorn's setting (no volume
# attached), then every instance manager made again with the storage interface.
storage_network_up() {
	local i
	log "storage network: NetworkAttachmentDefinition $LH_NS/$STOR_NAD on $STOR_BR, Longhorn's storage-network setting"
	python3 -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "CustomResourceDefinition":
        print("---\n" + yaml.safe_dump(d))' "$MULTUS_SRC/deployments/multus-daemonset.yml" | k apply -f - >/dev/null
	k wait --for=condition=Established --timeout=60s crd/network-attachment-definitions.k8s.cni.cncf.io >/dev/null
	k apply -f - >/dev/null <<-EOF
		apiVersion: k8s.cni.cncf.io/v1
		kind: NetworkAttachmentDefinition
		metadata: {name: $STOR_NAD, namespace: $LH_NS}
		spec:
		  config: '{"cniVersion":"0.4.0","name":"$STOR_NAD","type":"bridge","bridge":"$STOR_BR","ipam":{"type":"host-local","dataDir":"$DIR/storage-ipam","ranges":[[{"subnet":"$STOR_NET","rangeStart":"10.233.100.10"}]]}}'
	EOF
	lh_setting storage-network "$LH_NS/$STOR_NAD"
	wait_for 240 ims_on_storage || true
	im_table
	check "every instance manager runs with an IP on $STOR_NET, the one Longhorn uses" ims_on_storage
}

# im_pod_of NODE: the name of the instance-manager pod on NODE, or nothing (drains.sh).
im_pod_of() { im_pod_on "$1"; }
# storage_ip POD: its storage interface's IP from the Multus status Longhorn reads (network-status,
# else networks-status), "-" if neither has it.
storage_ip() {
	value lhk get pod "$1" -o json | python3 -c '
import json, sys
try:
    a = json.load(sys.stdin)["metadata"].get("annotations", {})
except ValueError:
    a = {}  # no such pod
raw = a.get("k8s.v1.cni.cncf.io/network-status") or a.get("k8s.v1.cni.cncf.io/networks-status") or "[]"
ips = [ip for n in json.loads(raw) if n.get("interface") == sys.argv[1] for ip in n.get("ips", [])]
print(ips[0] if ips else "-")' "$STOR_IF"
}
# status_keys POD: which of the two Multus status keys the pod carries.
status_keys() {
	value lhk get pod "$1" -o json | python3 -c '
import json, sys
try:
    a = json.load(sys.stdin)["metadata"].get("annotations", {})
except ValueError:
    a = {}  # no such pod
print(" ".join(k.split("/")[1] for k in sys.argv[1:] if k in a) or "none")' "$NETWORK_STATUS" "$NETWORKS_STATUS"
}
# im_table: node, pod, pod IP, storage IP, status keys, state of each instance manager.
im_table() {
	local n p
	for n in $(seq 1 "$NODES"); do
		p=$(im_pod_of "node-$n")
		printf '    node-%s %s pod IP %s storage IP %s (keys: %s) %s\n' "$n" "${p:--}" \
			"$(lhk get pod "$p" -o jsonpath='{.status.podIP}' 2>/dev/null)" "$(storage_ip "$p")" "$(status_keys "$p")" \
			"$(lhk get pod "$p" -o jsonpath='{.status.phase}' 2>/dev/null)"
	done
}
ims_on_storage() {
	local n p
	ims_running || return 1
	for n in $(seq 1 "$NODES"); do
		p=$(im_pod_of "node-$n")
		[ "$(lhk get pod "$p" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ] || return 1
		[[ $(storage_ip "$p") == 10.233.100.* ]] || return 1
	done
}

# cut_pod_network on|off: replica and engine ports (10000-30000, the instance managers'
# process ranges) dropped between node subnets, so that replica traffic must take the storage
# network, as a separate storage network is in production.
cut_pod_network() {
	local i j op=-I
	[ "$1" = on ] || op=-D
	for i in $(seq 1 "$NODES"); do
		for j in $(seq 1 "$NODES"); do
			[ "$i" = "$j" ] && continue
			while iptables -D FORWARD -s "$(node_subnet "$i")" -d "$(node_subnet "$j")" -p tcp --dport 10000:30000 \
				-m comment --comment "$FWD_TAG-cut" -j DROP 2>/dev/null; do :; done
			[ "$op" = -I ] || continue
			iptables -I FORWARD 1 -s "$(node_subnet "$i")" -d "$(node_subnet "$j")" -p tcp --dport 10000:30000 \
				-m comment --comment "$FWD_TAG-cut" -j DROP
		done
	done
}
