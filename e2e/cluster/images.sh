# Images and CNI plugins of the real-kubelet cluster (e2e/cluster.sh). Sourced.
# No registry: every image is written by image/oci-image.py and imported into each node's
# containerd (namespace k8s.io); pods use imagePullPolicy IfNotPresent or Never.

IM_IMAGE=localhost/longhorn-guard-e2e/instance-manager:1
OCI_IMAGE=$ROOT/image/oci-image.py

# busybox_image NAME TAR ENTRYPOINT: busybox-static as the whole root filesystem.
busybox_image() {
	python3 "$OCI_IMAGE" --out "$2" --name "$1" --file "$BUSYBOX:/bin/busybox:0755" \
		--link /bin/sh:busybox --link /bin/sleep:busybox --link /bin/cat:busybox --link /bin/ls:busybox \
		--link /bin/ip:busybox --link /bin/nc:busybox --dir /tmp:1777 --entrypoint "$3" | sed 's/^/    image: /'
}

images_build() {
	[ -f "$GUARD_IMAGE_TAR" ] || die "no guard image at $GUARD_IMAGE_TAR: run make image-oci (or set GUARD_IMAGE_TAR)"
	cp "$GUARD_IMAGE_TAR" "$DIR/images/longhorn-guard.tar"
	# The sandbox ("pause") container: sleeps as PID 1; containerd stops sandboxes with SIGKILL.
	busybox_image "$PAUSE_IMAGE" "$DIR/images/pause.tar" '["/bin/sleep","2147483647"]'
	# The instance-manager stand-in: sleeps, and exits at once on SIGTERM as the real one does.
	busybox_image "$IM_IMAGE" "$DIR/images/instance-manager.tar" \
		'["/bin/sh","-c","echo instance-manager started; trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait $!; done"]'
	for f in "$DIR"/images/*.tar; do printf '    %s: %s bytes\n' "${f##*/}" "$(stat -c %s "$f")"; done
}

# cni_bin: the plugin directory containerd searches: Debian's plugins (they live outside the
# default /opt/cni/bin) and the Multus stand-in.
cni_bin() {
	local p
	mkdir -p "$DIR/cni-bin"
	for p in "$CNI_PLUGIN_DIR"/*; do ln -sf "$p" "$DIR/cni-bin/"; done
	ln -sf "$E2E/cluster/multus-standin" "$DIR/cni-bin/lg-multus-standin"
}
