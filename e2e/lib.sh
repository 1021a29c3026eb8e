# Shell helpers shared by e2e/run.sh (`make e2e`), e2e/faults-cluster.sh (`make e2e-faults`),
# e2e/scale.sh (`make scale`) and e2e/cluster.sh (`make e2e-cluster`). Sourced, not run.
# Expects: KUBECTL, CRDS (the Longhorn CRD file), ROOT; SCRIPT_NAME for messages. The check
# helpers (run, pass, fail, check, ...) count into PASSED/FAILED/FAILURES, which the sourcing
# script initialises.

# The namespaces, label and instance managers of e2e/state (a script may set its own first).
LH_NS=${LH_NS:-longhorn-system}
GUARD_NS=${GUARD_NS:-longhorn-guard}
LABEL=${LABEL:-longhorn-guard-e2e=true}
IM1=instance-manager-5d1f0b6e2c9a47d38e4f7a1b0c2d3e4f # on node-1
IM2=instance-manager-9b7e2d4c1a0f45e6b8c3d5f7e9a1b2c4 # on node-2
IM3=instance-manager-e3a5c7b9d1f2406a8c0e2b4d6f8a1c3e # on node-3

k() { "$KUBECTL" --request-timeout=20s "$@"; }
log() { printf '\n== %s\n' "$*"; }
die() {
	printf '%s: %s\n' "${SCRIPT_NAME:-e2e}" "$*" >&2
	exit 2
}

# say_where_stopped: from now on a command that stops the script (set -e) prints what failed
# and where, instead of ending it without a word; where errexit is off (inside `run`) a failure
# is expected and says nothing. Only the script's own shell speaks: a failure inside a
# process or command substitution is the script's business only if the command using it
# fails too (`read x < <(... | grep y) || true` is no stop), and then that command is named.
say_where_stopped() {
	set -E
	trap 'rc=$?; [[ $- == *e* ]] && ((BASH_SUBSHELL == 0)) && printf "%s: stopped: %q failed (exit %s) at %s line %s\n" "$SCRIPT_NAME" "$BASH_COMMAND" "$rc" "${BASH_SOURCE[0]}" "$LINENO" >&2' ERR
}

# Lookups whose answer may be empty (a list with no item, an object gone, a log without the
# line) must not stop a run under set -e and pipefail: the check that reads the value fails on
# it, counted in the summary, and the run goes on (issue 45). kubectl's jsonpath fails on an
# index into an empty list (`{.items[0]}`, `{.items[-1:]}`): take `{.items[*]...}` or a range
# and pick with awk, sed or tail, which read their whole input (head -1 or grep -m1 after a
# writer can stop it with SIGPIPE, which pipefail turns into a failure).
#
# value CMD...: what CMD prints on stdout, or nothing; never fails (CMD's stderr is dropped).
value() { "$@" 2>/dev/null || true; }
# matching GREP-ARGS...: grep that finds nothing without failing.
matching() { grep "$@" || true; }

# wait_for SECONDS CMD...: retries CMD once a second until it succeeds; bounded.
wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 1
	done
}
# free_port PORT [COUNT]: the first port from PORT up that, with the COUNT-1 ports after it (1),
# nothing listens on at 127.0.0.1.
free_port() {
	local p=$1 n=${2:-1} i
	while :; do
		for ((i = 0; i < n; i++)); do
			(exec 3<>"/dev/tcp/127.0.0.1/$((p + i))") 2>/dev/null && break
		done
		if [ "$i" -eq "$n" ]; then
			echo "$p"
			return
		fi
		p=$((p + i + 1))
	done
}
# etcdctl_path: $ETCDCTL, else the etcdctl beside $ETCD (they ship together: an etcd given by
# path, e.g. a 3.5 one off PATH, gets its own), else the one on PATH; nothing if none.
etcdctl_path() {
	if [ -n "${ETCDCTL:-}" ]; then
		echo "$ETCDCTL"
	elif [ -n "${ETCD:-}" ] && [ -x "$(dirname "$ETCD")/etcdctl" ]; then
		echo "$(dirname "$ETCD")/etcdctl"
	else
		command -v etcdctl || true
	fi
}
gone() { ! k "$@" >/dev/null 2>&1; }
gone_pid() { # exited (a zombie until `wait` reaps it counts as gone)
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 0
	[[ $st == Z* ]]
}

# stop_pid PID [SIGNAL [SECONDS]]: SIGNAL (TERM: graceful shutdown, bounded by the server's
# --shutdown-grace), then SIGKILL once SECONDS (30) have passed; reaps it, quietly.
stop_pid() {
	local i
	kill "-${2:-TERM}" "$1" 2>/dev/null || true
	for ((i = 0; i < ${3:-30} * 4; i++)); do
		gone_pid "$1" && break
		sleep 0.25
	done
	kill -9 "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# delete_ns NS: deletes a namespace this run created. A bare API server has no namespace
# controller to finalize it (it would stay Terminating and block the next run): if no
# controller has touched it after 20s, finalize it through the API, as that controller would.
delete_ns() {
	k delete namespace "$1" --ignore-not-found --wait=false
	wait_for 20 gone get namespace "$1" && return 0
	if [ -z "$(k get namespace "$1" -o jsonpath='{.status.conditions}' 2>/dev/null)" ]; then
		echo "    no namespace controller: finalizing namespace $1"
		k get namespace "$1" -o json | sed 's/"kubernetes"//' |
			k replace --raw "/api/v1/namespaces/$1/finalize" -f - >/dev/null
	fi
}

# preflight_api: kubectl and an API server through KUBECONFIG; prints both versions.
preflight_api() {
	command -v "$KUBECTL" >/dev/null || die "kubectl not found (set KUBECTL)"
	command -v curl >/dev/null || die "curl not found"
	k api-versions >/dev/null 2>&1 || die "no API server reachable through KUBECONFIG=${KUBECONFIG:-~/.kube/config}"
	printf '    kubectl %s, API server %s\n' "$(k version --client -o json 2>/dev/null | grep -m1 gitVersion | cut -d'"' -f4)" \
		"$(k get --raw /version 2>/dev/null | grep -m1 gitVersion | cut -d'"' -f4)"
	# What decides the version-dependent steps (the gate as a MutatingAdmissionPolicy: v1 only).
	printf '    admissionregistration.k8s.io serves %s\n' \
		"$(k get --raw /apis/admissionregistration.k8s.io 2>/dev/null | jq -r '[.versions[].version] | join(", ")')"
	[ -f "$CRDS" ] || die "Longhorn CRDs not found at $CRDS (set E2E_CRDS)"
}

# refuse_real_longhorn LABEL NODE...: dies if $LH_NS holds Longhorn volumes without LABEL=true
# (a real Longhorn), or if one of the named core Nodes exists without that label.
refuse_real_longhorn() {
	local label=$1 n foreign
	shift
	if k get crd volumes.longhorn.io >/dev/null 2>&1; then
		foreign=$(k -n "$LH_NS" get volumes.longhorn.io -l "$label!=true" -o name 2>/dev/null | awk 'NR == 1')
		[ -z "$foreign" ] || die "$LH_NS already has Longhorn volumes ($foreign): refusing to run against a real Longhorn"
	fi
	for n in "$@"; do
		if k get node "$n" >/dev/null 2>&1 && [ "$(k get node "$n" -o jsonpath="{.metadata.labels.$label}")" != true ]; then
			die "a real Node $n exists: refusing to run"
		fi
	done
}

# ensure_longhorn LABEL: the Longhorn CRDs (CREATED_CRDS=1 if this run applied them), namespace
# $LH_NS (CREATED_LH_NS=1 if created) and the ServiceAccounts a bare API server lacks (no
# controller-manager), labelled LABEL=true when created here.
ensure_longhorn() {
	local sa
	if ! k get crd volumes.longhorn.io >/dev/null 2>&1; then
		k apply -f "$CRDS" >/dev/null
		CREATED_CRDS=1
	fi
	k wait --for=condition=Established --timeout=60s -f "$CRDS" >/dev/null
	if ! k get namespace "$LH_NS" >/dev/null 2>&1; then
		k create namespace "$LH_NS" >/dev/null
		CREATED_LH_NS=1
	fi
	for sa in "default:$LH_NS" "longhorn-service-account:$LH_NS" "default:default"; do
		if ! k -n "${sa#*:}" get serviceaccount "${sa%%:*}" >/dev/null 2>&1; then
			k -n "${sa#*:}" create serviceaccount "${sa%%:*}" >/dev/null
			k -n "${sa#*:}" label serviceaccount "${sa%%:*}" "$1=true" >/dev/null
		fi
	done
}

# guard_kubeconfig FILE: applies the guard's namespace and RBAC and writes a kubeconfig that
# authenticates as its ServiceAccount $GUARD_NS/longhorn-guard (so the shipped RBAC is used).
guard_kubeconfig() {
	local token server ca_data ca_file
	k apply -f "$ROOT/manifests/base/namespace.yaml" -f "$ROOT/manifests/base/rbac.yaml" >/dev/null
	token=$(k -n "$GUARD_NS" create token longhorn-guard --duration=2h) || die "cannot create a token for $GUARD_NS/longhorn-guard"
	server=$(k config view --minify --raw -o jsonpath='{.clusters[0].cluster.server}')
	ca_data=$(k config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
	ca_file=$(k config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority}')
	if [ -z "$ca_data" ] && [ -n "$ca_file" ]; then ca_data=$(base64 -w0 <"$ca_file"); fi
	cat >"$1" <<-EOF
		apiVersion: v1
		kind: Config
		clusters: [{name: e2e, cluster: {server: "$server", certificate-authority-data: "$ca_data"}}]
		users: [{name: longhorn-guard, user: {token: "$token"}}]
		contexts: [{name: e2e, context: {cluster: e2e, user: longhorn-guard}}]
		current-context: e2e
	EOF
}

# load_state: e2e/state's objects, instance-manager pods (their ownerReferences filled in) and
# statuses, into $LH_NS (after ensure_longhorn). Needs E2E, IM1, IM2, IM3.
load_state() {
	local pods_json uid im f base res name ns
	k create -f "$E2E/state/objects.json" >/dev/null
	# Each pod's ownerReference names its InstanceManager: fill in that object's uid.
	pods_json=$(cat "$E2E/state/instance-manager-pods.json")
	for im in "$IM1" "$IM2" "$IM3"; do
		uid=$(k -n "$LH_NS" get instancemanagers.longhorn.io "$im" -o jsonpath='{.metadata.uid}')
		pods_json=${pods_json//"__UID:${im}__"/$uid}
	done
	k create -f - >/dev/null <<<"$pods_json"
	for f in "$E2E"/state/status/*.json; do
		base=$(basename "$f" .json)
		case $base in
		nodes.node-*) res=nodes name=${base#nodes.} ns=() ;;
		pods.*) res=pods name=${base#pods.} ns=(-n "$LH_NS") ;;
		*) res=${base%%.longhorn.io.*}.longhorn.io name=${base#*.longhorn.io.} ns=(-n "$LH_NS") ;;
		esac
		k "${ns[@]}" patch "$res" "$name" --subresource=status --type=merge --patch-file="$f" >/dev/null
	done
}

# run CMD...: runs a command, shows it and its output (indented), keeps both in $OUT/$RC.
run() {
	printf '$ %s\n' "$*"
	set +e
	OUT=$("$@" 2>&1)
	RC=$?
	set -e
	if [ -n "$OUT" ]; then printf '%s\n' "$OUT" | sed 's/^/    /'; fi
	printf '    [exit code: %s]\n' "$RC"
}

pass() {
	PASSED=$((PASSED + 1))
	printf 'ok   - %s\n' "$1"
}
fail() {
	FAILED=$((FAILED + 1))
	FAILURES+=("$1")
	printf 'FAIL - %s\n' "$1"
}

# expect DESCRIPTION CONDITION...: one check; CONDITION is evaluated with `eval`-free test
# functions below, e.g. `expect "x" rc_is 0 && contains "foo"` is written as separate args.
check() {
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}
rc_is() { [ "$RC" -eq "$1" ]; }
rc_not() { [ "$RC" -ne "$1" ]; }
has() { grep -qF -- "$1" <<<"$OUT"; }
# A `Warning:` line from the API server other than kubectl's own note about objects made
# with `kubectl create` (missing last-applied-configuration).
warned() { grep '^Warning: ' <<<"$OUT" | grep -qv 'last-applied-configuration'; }
lacks() { ! grep -qF -- "$1" <<<"$OUT"; }
all() {
	local c
	for c in "$@"; do eval "$c" || return 1; done
}
