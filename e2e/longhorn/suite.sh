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
# LONGHORN_UPGRADE_SRC and LONGHORN_UPGRADE_BIN_DIR (both or neither): the version Longhorn is
# upgraded to under the guard (scenario u, e2e/longhorn/upgrade.sh), one minor or patch up; its
# images are built and imported beside the first version's, each tagged by its version.

# shellcheck disable=SC2034 # the settings and names below are read by the files sourced after this one
LONGHORN_BIN_DIR=${LONGHORN_BIN_DIR:-}
LONGHORN_SRC=${LONGHORN_SRC:-}
BASH_STATIC=${BASH_STATIC:-/bin/bash-static}
NSENTER=${NSENTER:-/usr/bin/nsenter}
# The instance manager's liveness probe runs `nc -z`, which busybox's nc lacks.
NC=${NC:-/bin/nc.openbsd}
LONGHORN_UPGRADE_SRC=${LONGHORN_UPGRADE_SRC:-}
LONGHORN_UPGRADE_BIN_DIR=${LONGHORN_UPGRADE_BIN_DIR:-}
# lh_version_of_src [SRC]: the longhorn-manager image tag of SRC's ($LONGHORN_SRC's)
# deploy/longhorn.yaml, or nothing (no tree: the preflight says so, no silent stop).
lh_version_of_src() {
	value sed -n 's|^ *image: *\(docker.io/\)\{0,1\}longhornio/longhorn-manager:\(v[0-9][0-9.]*\)$|\2|p' \
		"${1:-$LONGHORN_SRC}/deploy/longhorn.yaml" | awk 'NR == 1'
}
# lh_version_of_bin [DIR]: the version longhorn-manager in DIR ($LONGHORN_BIN_DIR) was built as, or nothing.
lh_version_of_bin() {
	local d=${1:-$LONGHORN_BIN_DIR}
	if [ -f "$d/.longhorn-version" ]; then
		cat "$d/.longhorn-version"
	else
		"$d/longhorn-manager" --version 2>/dev/null | awk '/version/ {print $NF; exit}'
	fi
}
# lh_engine_commit DIR: the git commit DIR's engine binary reports (`longhorn version`), or nothing.
lh_engine_commit() {
	value "$1/longhorn" version --client-only | sed -n 's/^[[:space:]]*"gitCommit":[[:space:]]*"\([^"]*\)".*/\1/p' | tail -n 1
}
LH_VERSION=$(lh_version_of_src)
LH_VERSION=${LH_VERSION:-unknown}
# Every image is LH_REPO/NAME:VERSION (lh_images).
LH_REPO=localhost/longhorn-e2e
LH_MANAGER_IMAGE=$LH_REPO/longhorn-manager:$LH_VERSION
LH_ENGINE_IMAGE=$LH_REPO/longhorn-engine:$LH_VERSION
LH_IM_IMAGE=$LH_REPO/longhorn-instance-manager:$LH_VERSION
upgrade_on() { [ -n "$LONGHORN_UPGRADE_SRC" ]; }
LH_UP_VERSION=unknown
if upgrade_on; then
	LH_UP_VERSION=$(lh_version_of_src "$LONGHORN_UPGRADE_SRC")
	LH_UP_VERSION=${LH_UP_VERSION:-unknown}
fi
LH_UP_MANAGER_IMAGE=$LH_REPO/longhorn-manager:$LH_UP_VERSION
LH_UP_ENGINE_IMAGE=$LH_REPO/longhorn-engine:$LH_UP_VERSION
LH_UP_IM_IMAGE=$LH_REPO/longhorn-instance-manager:$LH_UP_VERSION
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
	if upgrade_on || [ -n "$LONGHORN_UPGRADE_BIN_DIR" ]; then upgrade_preflight; fi
}

# upgrade_preflight: the version to upgrade to is a tree and binaries of one version, one minor
# (or patches) above LH_VERSION, and its engine reports a git commit other than the first
# version's: Longhorn refuses a live engine upgrade between two engine images of the same commit.
upgrade_preflight() {
	local b bin_version c0 c1
	[ -n "$LONGHORN_UPGRADE_SRC" ] || die "LONGHORN_UPGRADE_BIN_DIR is set: set LONGHORN_UPGRADE_SRC too (the version to upgrade to), or neither"
	[ -n "$LONGHORN_UPGRADE_BIN_DIR" ] || die "LONGHORN_UPGRADE_SRC is set: set LONGHORN_UPGRADE_BIN_DIR too (its binaries, e2e/longhorn/build.sh), or neither"
	for b in longhorn-manager longhorn longhorn-instance-manager instance-manager grpc_health_probe; do
		[ -x "$LONGHORN_UPGRADE_BIN_DIR/$b" ] || die "$LONGHORN_UPGRADE_BIN_DIR/$b missing (e2e/longhorn/build.sh)"
	done
	[ "$LH_UP_VERSION" != unknown ] || die "$LONGHORN_UPGRADE_SRC/deploy/longhorn.yaml names no longhornio/longhorn-manager image"
	case $LH_UP_VERSION in
	v1.10.* | v1.11.* | v1.12.*) ;;
	*) die "Longhorn $LH_UP_VERSION: this suite upgrades to v1.10.x, v1.11.x and v1.12.x" ;;
	esac
	bin_version=$(lh_version_of_bin "$LONGHORN_UPGRADE_BIN_DIR")
	[ "$bin_version" = "$LH_UP_VERSION" ] || die "LONGHORN_UPGRADE_BIN_DIR holds Longhorn ${bin_version:-of no known version}, LONGHORN_UPGRADE_SRC installs $LH_UP_VERSION"
	# Longhorn's own upgrade path (upgrade/util CheckUpgradePath): no downgrade, at most one minor up.
	if [ "$LH_VERSION" = "$LH_UP_VERSION" ] || [ "$(printf '%s\n' "$LH_VERSION" "$LH_UP_VERSION" | sort -V | tail -n 1)" != "$LH_UP_VERSION" ]; then
		die "upgrade from $LH_VERSION to $LH_UP_VERSION: not an upgrade"
	fi
	local m0=${LH_VERSION#v1.} m1=${LH_UP_VERSION#v1.}
	[ $((${m1%%.*} - ${m0%%.*})) -le 1 ] || die "upgrade from $LH_VERSION to $LH_UP_VERSION: Longhorn upgrades one minor version at a time"
	c0=$(lh_engine_commit "$LONGHORN_BIN_DIR")
	c1=$(lh_engine_commit "$LONGHORN_UPGRADE_BIN_DIR")
	[ "$c0" != "$c1" ] ||
		die "the engines of $LH_VERSION and $LH_UP_VERSION both report git commit '${c0}': Longhorn refuses a live engine upgrade between images of one commit; rebuild each engine with e2e/longhorn/build.sh (it writes main.GitCommit; LONGHORN_ENGINE_SRC alone and BUILD_FORCE=1 rebuild only the engine)"
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

# suite_images: the Longhorn images of LH_VERSION, and of LH_UP_VERSION when an upgrade is
# set; every node's containerd imports each (node_up imports every tar of $DIR/images).
suite_images() {
	lh_images "$LH_VERSION" "$LONGHORN_BIN_DIR"
	! upgrade_on || lh_images "$LH_UP_VERSION" "$LONGHORN_UPGRADE_BIN_DIR"
	for f in "$DIR"/images/longhorn-*.tar; do printf '    %s: %s bytes\n' "${f##*/}" "$(stat -c %s "$f")"; done
}
# lh_images VERSION BIN_DIR: the manager, engine and instance-manager images of VERSION
# ($LH_REPO/NAME:VERSION) from BIN_DIR, in $DIR/images/NAME-VERSION.tar.
lh_images() {
	local v=$1 b=$2
	lh_image "$LH_REPO/longhorn-manager:$v" "$DIR/images/longhorn-manager-$v.tar" \
		--file "$b/longhorn-manager:/usr/local/bin/longhorn-manager:0755"
	lh_image "$LH_REPO/longhorn-engine:$v" "$DIR/images/longhorn-engine-$v.tar" \
		--file "$b/longhorn:/usr/local/bin/longhorn:0755" \
		--file "$b/longhorn-instance-manager:/usr/local/bin/longhorn-instance-manager:0755" \
		--file "$b/grpc_health_probe:/usr/local/bin/grpc_health_probe:0755"
	lh_image "$LH_REPO/longhorn-instance-manager:$v" "$DIR/images/longhorn-instance-manager-$v.tar" \
		--file "$b/longhorn-instance-manager:/usr/local/bin/longhorn-instance-manager:0755" \
		--file "$b/instance-manager:/usr/local/bin/instance-manager:0755" \
		--file "$b/grpc_health_probe:/usr/local/bin/grpc_health_probe:0755"
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
