# Real Longhorn on the real-kubelet cluster: `make e2e-longhorn` runs e2e/cluster.sh with
# E2E_CLUSTER_SUITE=longhorn, which sources this file after e2e/cluster/*.sh. It replaces the
# suite hooks of e2e/cluster.sh: preflight, host set-up and clean-up, images, and the checks
# (e2e/longhorn/checks.sh). e2e/TESTING.md ("Real Longhorn") says what each setting is.
#
# Settings: LONGHORN_BIN_DIR (longhorn-manager, longhorn, longhorn-instance-manager and the
# instance-manager script, as e2e/longhorn/build.sh leaves them), LONGHORN_SRC (longhorn/longhorn
# at the same version: its deploy/longhorn.yaml is the install), BASH_STATIC (Debian bash-static).
# The Longhorn version is the install's: deploy/longhorn.yaml's longhorn-manager image tag
# (v1.10.x, v1.11.x, v1.12.x run). The binaries must be that version (preflight compares).

LONGHORN_BIN_DIR=${LONGHORN_BIN_DIR:-}
LONGHORN_SRC=${LONGHORN_SRC:-}
BASH_STATIC=${BASH_STATIC:-/bin/bash-static}
NSENTER=${NSENTER:-/usr/bin/nsenter}
# The instance manager's liveness probe runs `nc -z`, which busybox's nc lacks.
NC=${NC:-/bin/nc.openbsd}
# lh_version_of_src: the longhorn-manager image tag of $LONGHORN_SRC/deploy/longhorn.yaml, or nothing.
lh_version_of_src() {
	[ -f "${LONGHORN_SRC:-}/deploy/longhorn.yaml" ] || return 0
	sed -n 's|^ *image: *\(docker.io/\)\{0,1\}longhornio/longhorn-manager:\(v[0-9][0-9.]*\)$|\2|p' \
		"$LONGHORN_SRC/deploy/longhorn.yaml" 2>/dev/null | head -n 1
}
# lh_version_of_bin: the version longhorn-manager in $LONGHORN_BIN_DIR was built as, or nothing.
lh_version_of_bin() {
	if [ -f "$LONGHORN_BIN_DIR/.longhorn-version" ]; then
		cat "$LONGHORN_BIN_DIR/.longhorn-version"
	else
		"$LONGHORN_BIN_DIR/longhorn-manager" --version 2>/dev/null | awk '/version/ {print $NF; exit}'
	fi
}
LH_VERSION=$(lh_version_of_src)
LH_VERSION=${LH_VERSION:-unknown}
LH_MANAGER_IMAGE=localhost/longhorn-e2e/longhorn-manager:$LH_VERSION
LH_ENGINE_IMAGE=localhost/longhorn-e2e/longhorn-engine:$LH_VERSION
LH_IM_IMAGE=localhost/longhorn-e2e/longhorn-instance-manager:$LH_VERSION
# The manager dials its webhook by the Service's DNS name and there is no cluster DNS: the
# Service gets this fixed ClusterIP and the DaemonSet a hostAliases entry for it.
LH_WEBHOOK_IP=10.97.0.50
# Longhorn's hostPath. Each node's default disk is a directory of its own below it
# (create-default-disk-labeled-nodes), since every node here shares this host's filesystem.
LH_HOST_DIR=/var/lib/longhorn
LH_MARK=$LH_HOST_DIR/.longhorn-guard-e2e
ALLOW_PRIVILEGED=true
[ -n "${E2E_CLUSTER_NODES:-}" ] || [ -f "$DIR/nodes" ] || NODES=3
CHECKS=$E2E/longhorn/checks.sh
LH=$E2E/longhorn/lh.py

node_disk() { echo "$LH_HOST_DIR/lg-e2e-node-$1"; }

# E2E_MULTUS (make e2e-longhorn-multus): real Multus and the storage network
# (e2e/longhorn/multus.sh), and the seed's race in place of scenarios a-e. `down` and `checks`
# on a cluster `up` made take the version it recorded.
E2E_MULTUS=${E2E_MULTUS:-$(cat "$DIR/multus" 2>/dev/null || true)}
if [ -n "$E2E_MULTUS" ]; then
	# shellcheck source=e2e/longhorn/multus.sh
	. "$E2E/longhorn/multus.sh"
fi
multus_on() { [ -n "$E2E_MULTUS" ]; }

suite_preflight() {
	local b
	[ -n "$LONGHORN_BIN_DIR" ] || die "set LONGHORN_BIN_DIR to e2e/longhorn/build.sh's output directory"
	for b in longhorn-manager longhorn longhorn-instance-manager instance-manager grpc_health_probe; do
		[ -x "$LONGHORN_BIN_DIR/$b" ] || die "$LONGHORN_BIN_DIR/$b missing (e2e/longhorn/build.sh)"
	done
	[ -f "$LONGHORN_SRC/deploy/longhorn.yaml" ] || die "set LONGHORN_SRC to a longhorn/longhorn tree (deploy/longhorn.yaml)"
	[ "$LH_VERSION" != unknown ] || die "$LONGHORN_SRC/deploy/longhorn.yaml names no longhornio/longhorn-manager image: cannot tell its Longhorn version"
	case $LH_VERSION in
	v1.10.* | v1.11.* | v1.12.*) ;;
	*) die "Longhorn $LH_VERSION: this suite runs v1.10.x, v1.11.x and v1.12.x" ;;
	esac
	local bin_version
	bin_version=$(lh_version_of_bin)
	[ "$bin_version" = "$LH_VERSION" ] || die "LONGHORN_BIN_DIR holds Longhorn ${bin_version:-of no known version}, LONGHORN_SRC installs $LH_VERSION: build the binaries from the same version (e2e/longhorn/build.sh)"
	[ -x "$BASH_STATIC" ] || die "no static bash at $BASH_STATIC (Debian bash-static; set BASH_STATIC)"
	[ -x "$NSENTER" ] || die "no util-linux nsenter at $NSENTER (the manager calls nsenter -V)"
	[ -x "$NC" ] || die "no nc with -z at $NC (Debian netcat-openbsd; set NC): the instance manager's liveness probe"
	command -v iscsiadm >/dev/null || die "iscsiadm not found: Longhorn's manager refuses to start without it (Debian open-iscsi)"
	command -v tc >/dev/null || die "tc not found (iproute2): the rebuild scenario paces replica traffic"
	python3 -c 'import yaml' 2>/dev/null || die "python3 yaml missing (Debian python3-yaml)"
	if [ -e "$LH_HOST_DIR" ] && [ ! -f "$LH_MARK" ]; then
		die "$LH_HOST_DIR exists and this harness did not create it: refusing to run over another Longhorn"
	fi
	! multus_on || multus_preflight
}

# suite_host_up: shared mount propagation on / (the manager's Bidirectional hostPath), the
# disk directories, and a process named iscsid: the manager enters the namespaces of the
# host's iscsid to run iscsiadm --version and exits if there is none; this kernel has no iSCSI,
# so the real iscsid cannot start (NETLINK_ISCSI unsupported).
suite_host_up() {
	local i
	echo "ROOT_PROPAGATION_BEFORE=$(findmnt -no PROPAGATION /)" >>"$DIR/state.env"
	mount --make-rshared /
	mkdir -p "$LH_HOST_DIR"
	touch "$LH_MARK"
	for i in $(seq 1 "$NODES"); do mkdir -p "$(node_disk "$i")"; done
	mkdir -p "$DIR/bin"
	cp "$(command -v sleep)" "$DIR/bin/iscsid"
	start_bg iscsid "$DIR/bin/iscsid" infinity
	if multus_on; then
		echo "$E2E_MULTUS" >"$DIR/multus"
		multus_host_up
	fi
	printf '    / propagation: %s; disks: %s; iscsid stand-in pid %s\n' "$(findmnt -no PROPAGATION /)" \
		"$(for i in $(seq 1 "$NODES"); do printf '%s ' "$(node_disk "$i")"; done)" "$(cat "$DIR/pids/iscsid.pid")"
}

suite_host_down() {
	stop_named iscsid
	! multus_on || multus_host_down
	umount_under "$LH_HOST_DIR"
	[ -f "$LH_MARK" ] && rm -rf "$LH_HOST_DIR"
	if [ "${ROOT_PROPAGATION_BEFORE:-}" = private ]; then mount --make-rprivate /; fi
}

# lib_args BIN: --file arguments for BIN's shared libraries and loader (ldd), at their paths.
lib_args() {
	ldd "$1" | awk '/=> \// {print $3} /^\t\/lib/ {print $1}' | while read -r l; do
		printf -- '--file\n%s:%s:0755\n' "$(readlink -f "$l")" "$l"
	done
}

# lh_image NAME TAR ARGS...: busybox (the tools each Longhorn image's Dockerfile brings), a
# static bash as /bin/bash and /bin/sh (busybox's sh runs its own applets before PATH, so the
# liveness probe's `nc -z` would reach busybox's nc, which has no -z), util-linux nsenter and netcat-openbsd's nc (with their libraries),
# plus ARGS (the Longhorn binaries).
lh_image() {
	local name=$1 tar=$2 a
	shift 2
	local links=()
	for a in ash cp diff sleep ls cat rm mkdir mount umount tee sync ln mv grep sed awk ps kill touch chmod ip head tail date; do
		links+=(--link "/bin/$a:busybox")
	done
	mapfile -t libs < <({ lib_args "$NSENTER"; lib_args "$NC"; } | paste - - | sort -u | tr '\t' '\n')
	python3 "$OCI_IMAGE" --out "$tar" --name "$name" --file "$BUSYBOX:/bin/busybox:0755" "${links[@]}" \
		--file "$BASH_STATIC:/bin/bash:0755" --link /bin/sh:bash --file "$NSENTER:/usr/bin/nsenter:0755" --file "$NC:/usr/bin/nc:0755" "${libs[@]}" \
		--dir /tmp:1777 --dir /lib/modules:0755 --dir /var/log:0755 \
		--env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@" | sed 's/^/    image: /'
}

suite_images() {
	local b=$LONGHORN_BIN_DIR
	lh_image "$LH_MANAGER_IMAGE" "$DIR/images/longhorn-manager.tar" \
		--file "$b/longhorn-manager:/usr/local/bin/longhorn-manager:0755"
	lh_image "$LH_ENGINE_IMAGE" "$DIR/images/longhorn-engine.tar" \
		--file "$b/longhorn:/usr/local/bin/longhorn:0755" \
		--file "$b/longhorn-instance-manager:/usr/local/bin/longhorn-instance-manager:0755" \
		--file "$b/grpc_health_probe:/usr/local/bin/grpc_health_probe:0755"
	lh_image "$LH_IM_IMAGE" "$DIR/images/longhorn-instance-manager.tar" \
		--file "$b/longhorn-instance-manager:/usr/local/bin/longhorn-instance-manager:0755" \
		--file "$b/instance-manager:/usr/local/bin/instance-manager:0755" \
		--file "$b/grpc_health_probe:/usr/local/bin/grpc_health_probe:0755"
	for f in "$DIR"/images/longhorn-*.tar; do printf '    %s: %s bytes\n' "${f##*/}" "$(stat -c %s "$f")"; done
}

# images_reload: the Longhorn images written again and imported into every running node (a
# step for `e2e/cluster.sh checks images_reload` while working on the images); pods started
# before keep the old image until they are made again.
images_reload() {
	local i
	suite_images
	for i in $(seq 1 "$NODES"); do
		for img in "$DIR"/images/longhorn-*.tar; do ctr_ "$i" images import "$img" >/dev/null || die "ctr import $img into node-$i failed"; done
	done
}
