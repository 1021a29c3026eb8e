#!/usr/bin/env bash
# Captures, from a real kube-apiserver, what Helm builds .Capabilities.APIVersions from for the
# group admissionregistration.k8s.io: the group's served versions and each version's resource
# list (Helm adds "group/version" and "group/version/Kind" for each). tests/chart reads the
# files to check which init gate `initGate.via: auto` picks on each Kubernetes version.
#
#   KUBE_APISERVER=/path/to/kube-apiserver [ETCD=/path/to/etcd] \
#     tests/chart/data/capture-discovery.sh OUT.json ["MORE KUBE-APISERVER FLAGS"]
#
# A throw-away etcd + kube-apiserver (e2e/start-apiserver.sh) on free ports of 127.0.0.1.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 OUT.json [\"KUBE-APISERVER FLAGS\"]" >&2; exit 2; }
OUT=$1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
SCRIPT_NAME=capture-discovery
# shellcheck source=e2e/lib.sh
. "$ROOT/e2e/lib.sh" # free_port, die
DIR=$(mktemp -d "${TMPDIR:-/tmp}/capture-discovery.XXXXXX")
trap '"$ROOT/e2e/start-apiserver.sh" stop "$DIR" >/dev/null 2>&1; rm -rf "$DIR"' EXIT
export E2E_APISERVER_FLAGS=${2:-}
E2E_APISERVER_PORT=$(free_port 26443)
E2E_ETCD_PORT=$(free_port 22379)
E2E_ETCD_PEER_PORT=$(free_port $((E2E_ETCD_PORT + 1)))
export E2E_APISERVER_PORT E2E_ETCD_PORT E2E_ETCD_PEER_PORT
"$ROOT/e2e/start-apiserver.sh" start "$DIR" >/dev/null || die "could not start kube-apiserver"
raw() { "${KUBECTL:-kubectl}" --kubeconfig "$DIR/kubeconfig" get --raw "$1"; }
group=$(raw /apis/admissionregistration.k8s.io)
resources='{}'
for gv in $(jq -r '.versions[].groupVersion' <<<"$group"); do
	resources=$(jq --arg gv "$gv" --argjson list "$(raw "/apis/$gv")" '.[$gv] = $list' <<<"$resources")
done
jq -n --arg flags "$E2E_APISERVER_FLAGS" --argjson version "$(raw /version)" --argjson group "$group" \
	--argjson resources "$resources" '{flags: $flags, version: $version, group: $group, resources: $resources}' >"$OUT"
echo "$OUT: $(jq -r '.version.gitVersion' "$OUT"), $(jq -r '[.group.versions[].groupVersion] | join(" ")' "$OUT")"
