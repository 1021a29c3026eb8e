# The nodes of the real-kubelet cluster (e2e/cluster.sh): each node-N has its own containerd
# (root, state, socket, CNI configuration, stream port) and its own kubelet (root dir, ports,
# cgroup root, pod log dir). A kubelet removes sandboxes it does not know, so two kubelets on
# one containerd would destroy each other's pods. Sourced.

PAUSE_IMAGE=localhost/longhorn-guard-e2e/pause:1

node_dir() { echo "$DIR/node-$1"; }
node_sock() { echo "$DIR/node-$1/containerd.sock"; }
kubelet_port() { echo $((33200 + 10 * $1)); }
ctr_() { # NODE ARGS...: ctr against node NODE's containerd, namespace k8s.io
	local i=$1
	shift
	"$CONTAINERD_BIN_DIR/ctr" -a "$(node_sock "$i")" -n k8s.io "$@"
}

# cgroup_roots ACTION NODE: mkdir or remove (depth-first, after killing what is left in them)
# /lg-node-N in every cgroup v1 hierarchy (the kubelet's cgroupRoot must exist).
cgroup_roots() {
	local c d p
	for c in /sys/fs/cgroup/*; do
		[ -d "$c" ] && [ ! -L "$c" ] && [ "${c##*/}" != unified ] || continue
		d=$c/lg-node-$2
		if [ "$1" = mkdir ]; then
			mkdir -p "$d"
		elif [ -d "$d" ]; then
			for p in $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
			find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
		fi
	done
}

containerd_conf() {
	local i=$1 nd
	nd=$(node_dir "$i")
	cat <<-EOF
		version = 2
		root = "$nd/containerd/root"
		state = "$nd/containerd/state"
		disabled_plugins = ["io.containerd.grpc.v1.cri.v1alpha2", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
		[grpc]
		  address = "$(node_sock "$i")"
		[ttrpc]
		  address = "$(node_sock "$i").ttrpc"
		[debug]
		  address = ""
		[metrics]
		  address = ""
		[plugins."io.containerd.internal.v1.opt"]
		  path = "$nd/containerd/opt"
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "$PAUSE_IMAGE"
		  # No CAP_SYS_RESOURCE on this VM: nothing may lower an OOM score below 0.
		  restrict_oom_score_adj = true
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "$(($(kubelet_port "$i") + 2))"
		  enable_selinux = false
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        BinaryName = "$RUNC"
		        SystemdCgroup = false
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "$DIR/cni-bin"
		    conf_dir = "$nd/cni"
		    max_conf_num = 1
	EOF
}

kubelet_conf() {
	local i=$1 nd port
	nd=$(node_dir "$i")
	port=$(kubelet_port "$i")
	cat <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		address: "$(node_ip "$i")"
		port: $port
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		healthzPort: $((port + 1))
		containerRuntimeEndpoint: "unix://$(node_sock "$i")"
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: true}
		  x509: {clientCAFile: "$PKI/ca.crt"}
		authorization: {mode: Webhook}
		# cgroup v1, no systemd (a 1.36 kubelet refuses v1 unless told).
		cgroupDriver: cgroupfs
		failCgroupV1: false
		cgroupRoot: /lg-node-$i
		# No CAP_SYS_RESOURCE: not below 0.
		oomScoreAdj: 0
		resolvConf: "$DIR/resolv.conf"
		clusterDomain: cluster.local
		podLogsDir: "$nd/pod-logs"
		serializeImagePulls: false
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard: {memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%"}
		maxPods: 40
		nodeStatusUpdateFrequency: 5s
		shutdownGracePeriod: 0s
	EOF
}

node_up() {
	local i=$1 nd
	nd=$(node_dir "$i")
	mkdir -p "$nd/cni" "$nd/ipam" "$nd/kubelet" "$nd/pod-logs" "$nd/containerd"
	cgroup_roots mkdir "$i"
	containerd_conf "$i" >"$nd/containerd.toml"
	cni_conf "$i" >"$nd/cni/10-lg-node-$i.conflist"
	containerd_start "$i" || die "containerd of node-$i did not start (see $DIR/log/containerd-$i.log)"
	for img in "$DIR"/images/*.tar; do
		ctr_ "$i" images import "$img" >/dev/null || die "ctr import $img into node-$i failed"
	done
	kubelet_conf "$i" >"$nd/kubelet.yaml"
	kubelet_start "$i"
}

# containerd_start NODE: node-N's containerd, waited for; status 1 if it does not answer in 30 s.
containerd_start() {
	start_bg "containerd-$1" env PATH="$CONTAINERD_BIN_DIR:$PATH" "$CONTAINERD_BIN_DIR/containerd" --config "$(node_dir "$1")/containerd.toml"
	wait_for 30 ctr_ "$1" version
}

# node_start NODE: node-N up again after node_down (a hard reboot): its cgroup roots, its
# containerd (images and containers kept in its root), its kubelet. Status 1, and no kubelet,
# if containerd does not answer.
node_start() {
	cgroup_roots mkdir "$1"
	containerd_start "$1" || return 1
	kubelet_start "$1"
}

# kubelet_start NODE: node-N's kubelet (again, after `stop_named kubelet-N`: a node's reboot).
kubelet_start() {
	local i=$1 nd
	nd=$(node_dir "$i")
	start_bg "kubelet-$i" "$KUBE_BIN_DIR/kubelet" --config="$nd/kubelet.yaml" \
		--kubeconfig="$PKI/node-$i.kubeconfig" --root-dir="$nd/kubelet" --cert-dir="$nd/kubelet/pki" \
		--hostname-override="node-$i" --node-ip="$(node_ip "$i")" \
		--node-labels="longhorn-guard-e2e-cluster=true"
}

# node_down NODE: kubelet first (so nothing restarts), then every task of its containerd,
# containerd, the shims it left, whatever still runs in the node's cgroups, its mounts.
node_down() {
	local i=$1 nd sock t pid
	nd=$(node_dir "$i")
	sock=$(node_sock "$i")
	stop_named "kubelet-$i"
	if [ -S "$sock" ] && ctr_ "$i" version >/dev/null 2>&1; then
		for t in $(ctr_ "$i" tasks ls -q 2>/dev/null); do ctr_ "$i" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
		sleep 1
		for t in $(ctr_ "$i" tasks ls -q 2>/dev/null); do ctr_ "$i" tasks delete -f "$t" >/dev/null 2>&1 || true; done
	fi
	stop_named "containerd-$i"
	# Shims outlive containerd: end those started for this node's socket (by pid, from /proc).
	for pid in $(grep -lsF -- "$sock" /proc/[0-9]*/cmdline | cut -d/ -f3); do kill -9 "$pid" 2>/dev/null || true; done
	cgroup_roots remove "$i"
	umount_under "$nd"
}

# umount_under PATH: every mount below PATH, deepest first (lazy: a busy one goes when freed).
umount_under() {
	local m
	for m in $(awk -v p="$1/" 'index($2, p) == 1 {print $2}' /proc/mounts | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
}

node_ready() { [ "$(k get node "node-$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
