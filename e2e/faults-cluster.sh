#!/usr/bin/env bash
# The etcd fault harness (`make e2e-faults`; `make e2e` runs it in own control-plane mode):
# three etcd members and two kube-apiservers on loopback, two `serve` replicas, and four
# faults under a steady stream of dry-run evictions (e2e/TESTING.md, "Etcd faults").
#
#   KUBE_APISERVER=/path/to/kube-apiserver ETCD=/path/to/etcd-3.5.13+ make e2e-faults
#
# Topology: members m1, m2, m3 (client 127.0.0.1:3410N, peer 127.0.0.1:3420N; m3 runs as
# `nobody`, so that its peer traffic can be matched by owner); API server A (:34443) on m1, B
# (:34444) on m3; guard GA (:34843) watches through A, GB (:34844) through B, GS (:34845) through
# a "Service" (:34450, e2e/service_proxy.py) that sends each new connection to B while B's
# /readyz is ok, else to A: only reconnecting gets GS off a stuck B. Scenarios:
#   partition  m3's peer traffic dropped (iptables, loopback, m3's peer port and m3's own
#              packets to the other peer ports); the change is written through A meanwhile;
#   leader     the etcd leader killed (SIGKILL) while evictions arrive; the change written
#              through an API server whose member lives; the member started again after 10 s;
#   quorum     m2 and m3 stopped for 20 s, started again, then the change is written;
#   failover   API server B killed; the change written through A; B started again after 20 s.
# The change: vol-healthy's replicas on node-1 and node-2 fail, so node-3 holds its last
# healthy replica and the eviction of node-3's instance manager must be denied naming
# vol-healthy; it is healed after each scenario. Every 0.5 s each guard gets that eviction
# (POSTed straight to it, as the API server would send it) and a GET /readyz. Each scenario
# prints: allows on a view that missed the change and how long after it, false denials with
# their reasons, answer times, /readyz over time, the time to a correct answer after the fault
# ends; and checks the acceptance (e2e/faults_report.py). Exit 1 if a check failed, 2 if it
# could not run. Needs root (iptables), etcd 3.5.13+, kubectl, curl, openssl, python3.
# Binds 127.0.0.1 only; the Service CIDR is routed to `lo` before anything starts.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
E2E="$ROOT/e2e"
KUBECTL=${KUBECTL:-kubectl}
BIN=${LONGHORN_GUARD_BIN:-$ROOT/target/debug/longhorn-guard}
ETCD=${ETCD:-$(command -v etcd || true)}
CRDS=${E2E_CRDS:-$ROOT/../shared/fixtures/crds/longhorn-crds.yaml}
# LH_NS, LABEL, IM1..IM3: e2e/lib.sh.
SAFE_POD=instance-manager-e2e00000000000000000000000000003 # on node-3, made here
EVICTION_FIXTURE=$ROOT/../shared/fixtures/admission/eviction-create.json
MAX_VIEW_AGE=5 # the default drain.maxViewAge
SERVICE_CIDR=10.98.34.0/24
SCRIPT_NAME=e2e-faults
WORK=$(mktemp -d "${TMPDIR:-/tmp}/longhorn-guard-faults.XXXXXX")
chmod 755 "$WORK" # m3 runs as nobody
PKI=$WORK/pki
RULES=()
ROUTED=
SAMPLER=
PIDS_FILE=$WORK/pids
: >"$PIDS_FILE"
FAILED=0

# shellcheck source=e2e/lib.sh
. "$E2E/lib.sh"

# ---------------------------------------------------------------- processes
# start NAME CMD...: runs CMD in the background, logging to $WORK/NAME.log; records its PID.
start() {
	local name=$1
	shift
	"$@" >>"$WORK/$name.log" 2>&1 &
	echo "$!" >"$WORK/$name.pid"
	echo "$name $!" >>"$PIDS_FILE"
}
pid_of() { cat "$WORK/$1.pid"; }
kill_one() { stop_pid "$(pid_of "$1")" "${2:-KILL}" 10; } # NAME [SIGNAL]

member_cmd() { # N: the etcd command line of member mN (m3 as nobody)
	local n=$1 cluster="m1=http://127.0.0.1:34201,m2=http://127.0.0.1:34202,m3=http://127.0.0.1:34203"
	local run=()
	[ "$n" = 3 ] && run=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	echo "${run[*]} $ETCD --name m$n --data-dir $WORK/etcd-m$n \
		--listen-client-urls http://127.0.0.1:3410$n --advertise-client-urls http://127.0.0.1:3410$n \
		--listen-peer-urls http://127.0.0.1:3420$n --initial-advertise-peer-urls http://127.0.0.1:3420$n \
		--initial-cluster $cluster --initial-cluster-state new --initial-cluster-token lg-faults"
}
start_member() { # N
	mkdir -p "$WORK/etcd-m$1"
	[ "$1" = 3 ] && chown -R 65534:65534 "$WORK/etcd-m3"
	# shellcheck disable=SC2046
	start "etcd-m$1" $(member_cmd "$1")
}
etcdctl_() { ETCDCTL_API=3 etcdctl --dial-timeout=2s --command-timeout=3s "$@"; }
healthy_member() { etcdctl_ --endpoints="http://127.0.0.1:3410$1" endpoint health >/dev/null 2>&1; }
# leader: the member number of the etcd leader (empty if none).
leader() {
	local n st
	for n in 1 2 3; do
		st=$(etcdctl_ --endpoints="http://127.0.0.1:3410$n" endpoint status -w json 2>/dev/null) || continue
		if python3 -c 'import json,sys; s=json.loads(sys.argv[1])[0]["Status"]; sys.exit(0 if s["leader"] == s["header"]["member_id"] else 1)' "$st"; then
			echo "$n"
			return
		fi
	done
}

api_port() { case $1 in A) echo 34443 ;; B) echo 34444 ;; S) echo 34450 ;; esac; }
start_api() { # A|B
	local port member
	port=$(api_port "$1")
	member=$([ "$1" = A ] && echo 1 || echo 3)
	start "apiserver-$1" "$KUBE_APISERVER" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port" \
		--etcd-servers="http://127.0.0.1:3410$member" \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" \
		--service-account-issuer=https://kubernetes.default.svc \
		--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
		--authorization-mode=RBAC --service-cluster-ip-range="$SERVICE_CIDR" \
		--allow-privileged=true --endpoint-reconciler-type=none --profiling=false
}
api_ready() {
	curl -sf --max-time 2 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
		"https://127.0.0.1:$(api_port "$1")/readyz" | grep -qx ok
}
kubeconfig() { # A|B FILE
	cat >"$2" <<-EOF
		apiVersion: v1
		kind: Config
		clusters: [{name: e2e, cluster: {server: "https://127.0.0.1:$(api_port "$1")", certificate-authority: "$PKI/ca.crt"}}]
		users: [{name: admin, user: {client-certificate: "$PKI/admin.crt", client-key: "$PKI/admin.key"}}]
		contexts: [{name: e2e, context: {cluster: e2e, user: admin}}]
		current-context: e2e
	EOF
}
guard_port() { case $1 in GA) echo 34843 ;; GB) echo 34844 ;; GS) echo 34845 ;; esac; }
GUARDS="GA GB GS"
start_guard() { # GA|GB API
	KUBECONFIG=$WORK/kubeconfig-$2 start "guard-$1" "$BIN" serve --tls-dir "$WORK/guard-certs" \
		--listen "127.0.0.1:$(guard_port "$1")" --check-interval 0s
}

# ---------------------------------------------------------------- cleanup
cleanup() {
	set +e
	local r name pid
	for r in "${RULES[@]}"; do
		# shellcheck disable=SC2086
		iptables -D $r 2>/dev/null
	done
	[ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null
	while read -r name pid; do
		kill -9 "$pid" 2>/dev/null
	done <"$PIDS_FILE"
	while read -r name pid; do
		wait "$pid" 2>/dev/null # reaped quietly: no "Killed" job notices
	done <"$PIDS_FILE"
	sleep 1
	[ -n "$ROUTED" ] && ip route del "$SERVICE_CIDR" dev lo 2>/dev/null
	[ -n "${RESERVED+x}" ] && echo "$RESERVED" >/proc/sys/net/ipv4/ip_local_reserved_ports
	if [ "${E2E_KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# ---------------------------------------------------------------- preflight
[ "$(id -u)" = 0 ] || die "needs root (iptables, and running etcd member m3 as nobody)"
for c in iptables ip setpriv etcdctl openssl curl python3 "$KUBECTL"; do
	command -v "$c" >/dev/null || die "$c not found"
done
[ -x "${KUBE_APISERVER:-}" ] || die "set KUBE_APISERVER to a kube-apiserver binary"
[ -x "$BIN" ] || die "longhorn-guard binary not found at $BIN"
[ -n "$ETCD" ] || die "etcd not found (set ETCD to an etcd 3.5.13+)"
ver=$("$ETCD" --version | sed -n 's/^etcd Version: //p')
python3 -c "import sys; v=tuple(map(int,'$ver'.split('.')[:3])); sys.exit(0 if v >= (3,5,13) else 1)" ||
	die "etcd $ver: 3.5.13+ needed (consistent reads from the watch cache; set ETCD)"
for p in 34101 34102 34103 34201 34202 34203 34443 34444 34450 34843 34844 34845; do
	(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && die "port $p is in use"
done
# Ports 34xxx lie in the ephemeral range: keep the kernel from handing them to outgoing
# connections while the harness runs (the previous setting is put back on exit).
RESERVED=$(cat /proc/sys/net/ipv4/ip_local_reserved_ports)
echo "${RESERVED:+$RESERVED,}34100-34999" >/proc/sys/net/ipv4/ip_local_reserved_ports
# The network rule: the Service CIDR goes to a device this harness owns, before anything runs.
ip route add "$SERVICE_CIDR" dev lo 2>/dev/null && ROUTED=1 || die "cannot route $SERVICE_CIDR to lo (in use?)"
ip route get "${SERVICE_CIDR%.0/24}.1" | grep -q ' dev lo ' || die "the Service CIDR is not local"

# ---------------------------------------------------------------- control plane
log "three etcd members ($ver), two API servers, two guards in $WORK"
"$E2E/start-apiserver.sh" pki "$WORK" >/dev/null || die "cannot make the certificates"
for n in 1 2 3; do start_member "$n"; done
for n in 1 2 3; do wait_for 90 healthy_member "$n" || die "etcd m$n did not start ($WORK/etcd-m$n.log)"; done
start_api A
start_api B
for a in A B; do
	wait_for 120 api_ready "$a" || die "API server $a did not start ($WORK/apiserver-$a.log)"
	kubeconfig "$a" "$WORK/kubeconfig-$a"
done
export KUBECONFIG=$WORK/kubeconfig-A
ensure_longhorn longhorn-guard-e2e
load_state
# A second instance-manager pod on node-3, as the gate checks of `make e2e` make one: its
# eviction is safe until vol-healthy's other replicas fail.
k -n "$LH_NS" get pod "$IM3" -o json |
	python3 -c "import json,sys; p=json.load(sys.stdin); m=p['metadata']; [m.pop(k,None) for k in ('uid','resourceVersion','creationTimestamp','managedFields')]; m['name']='$SAFE_POD'; p.pop('status',None); print(json.dumps(p))" |
	k create -f - >/dev/null
"$BIN" certs --out "$WORK/guard-certs" >/dev/null
start_guard GA A
start_guard GB B
start service python3 "$E2E/service_proxy.py" 34450 "$PKI/ca.crt" "$PKI/admin.crt" "$PKI/admin.key" 34444 34443
kubeconfig S "$WORK/kubeconfig-S"
start_guard GS S
guard_ready() { curl -sf --max-time 2 --cacert "$WORK/guard-certs/ca.crt" "https://127.0.0.1:$(guard_port "$1")/readyz" >/dev/null; }
for g in $GUARDS; do wait_for 60 guard_ready "$g" || die "guard $g not ready ($WORK/guard-$g.log)"; done

# ---------------------------------------------------------------- sampling
now_ms() { date +%s%3N; }
# sample GUARD: one line to stdout: ms, guard, /readyz code, allowed, answer code, seconds,
# reason, and the ms of the /readyz request (sent once the eviction is answered).
sample() {
	local port t0 t1 out ready
	port=$(guard_port "$1")
	t0=$(now_ms)
	out=$(sed -e "s/instance-manager-7b9c5d2e1f3a/$SAFE_POD/g" -e "s/1f682fde-188d-4d35-a16d-fdf844d8208c/f-$RANDOM$RANDOM/" "$EVICTION_FIXTURE" |
		curl -s --max-time 12 --cacert "$WORK/guard-certs/ca.crt" -H 'Content-Type: application/json' \
			--data-binary @- -w '\n%{time_total}' "https://127.0.0.1:$port/validate")
	t1=$(now_ms)
	ready=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 --cacert "$WORK/guard-certs/ca.crt" "https://127.0.0.1:$port/readyz")
	python3 - "$t0" "$1" "$ready" "$out" "$t1" <<-'EOF'
		import json, os, sys
		t0, guard, ready, out, t1 = sys.argv[1:6]
		body, _, took = out.rpartition("\n")
		try:
		    r = json.loads(body)["response"]
		    allowed, code = str(r["allowed"]).lower(), str(r.get("status", {}).get("code", 200))
		    msg = r.get("status", {}).get("message", "")
		except Exception:
		    allowed, code, msg = "error", "0", "no answer: " + body[:80]
		line = "\t".join([t0, guard, ready, allowed, code, took, msg.replace("\t", " ").replace("\n", " ")[:300], t1])
		# One write of the whole line: the guards' samples append to one file at once, and
		# print() writes the text and its newline apart when PYTHONUNBUFFERED is set.
		os.write(1, (line + "\n").encode())
	EOF
}
# sampler FILE: samples both guards every 0.5 s into FILE until killed (TERM); then waits for
# the samples under way, so that the report never reads a line still being written.
sampler() {
	trap 'wait; exit 0' TERM
	while :; do
		for g in $GUARDS; do sample "$g" >>"$1" & done
		sleep 0.5
	done
}

begin() { # SCENARIO
	SCEN=$1
	EVENTS=$WORK/$SCEN.events
	SAMPLES=$WORK/$SCEN.samples
	: >"$EVENTS"
	: >"$SAMPLES"
	log "scenario $SCEN"
	sampler "$SAMPLES" &
	SAMPLER=$!
	sleep 3
}
event() { echo "$(now_ms) $1" >>"$EVENTS"; }
# whole CMD...: records "whole" once CMD succeeds (polled every 0.2 s, at most 90 s): the fault
# has ended for etcd too (a member cut off by dropped packets reconnects only when TCP
# retransmits, up to tens of seconds after the rules are gone).
whole() {
	local deadline=$(($(now_ms) + 90000))
	until "$@" >/dev/null 2>&1; do
		[ "$(now_ms)" -lt "$deadline" ] || return 0
		sleep 0.2
	done
	event whole
}
all_members() { healthy_member 1 && healthy_member 2 && healthy_member 3; }
# change fail|heal: vol-healthy's replicas on node-1 and node-2 failed (or healthy) through the
# API server named by $CHANGE_VIA; the event is the write's acknowledgement.
change() {
	local t=""
	[ "$1" = fail ] && t=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	event "$1-sent"
	for r in vol-healthy-r-1a2b3c4d vol-healthy-r-5e6f7a8b; do
		KUBECONFIG=$WORK/kubeconfig-${CHANGE_VIA:-A} k -n "$LH_NS" patch replicas.longhorn.io "$r" \
			--type=merge -p "{\"spec\":{\"failedAt\":\"$t\"}}" >/dev/null
	done
	event "$1"
}
both_answer() { # allowed true|false: every guard answers the eviction so
	local g
	for g in $GUARDS; do sample "$g" | cut -f4 | grep -qx "$1" || return 1; done
}
finish() {
	sleep 2
	kill "$SAMPLER" 2>/dev/null
	wait "$SAMPLER" 2>/dev/null || true
	sleep 1
	# When the Service took B out (after the fault started): "steered".
	awk -v from="$(awk '$2 == "fault" {print $1}' "$EVENTS")" \
		'$2 == "backend" && $3 == 34444 && $4 == "out" && $1 * 1000 >= from {printf "%.0f steered\n", $1 * 1000; exit}' \
		"$WORK/service.log" >>"$EVENTS"
	python3 "$E2E/faults_report.py" "$SCEN" "$SAMPLES" "$EVENTS" "$MAX_VIEW_AGE" "$@" || FAILED=1
	CHANGE_VIA=A change heal
	wait_for 30 both_answer true || echo "    (both guards did not allow again within 30s)"
}
iptables_add() { # RULE...: adds it and remembers it for removal
	iptables -A "$@"
	RULES+=("$*")
}
iptables_clear() {
	local r
	for r in "${RULES[@]}"; do
		# shellcheck disable=SC2086
		iptables -D $r 2>/dev/null || true
	done
	RULES=()
}

# ---------------------------------------------------------------- scenarios
SCENARIOS=${E2E_FAULTS:-partition leader quorum failover}
wait_for 30 both_answer true || die "the guards do not allow the safe eviction at the start"
GA_PID=$(pid_of guard-GA)
GB_PID=$(pid_of guard-GB)
GS_PID=$(pid_of guard-GS)
for s in $SCENARIOS; do
	case $s in
	partition)
		begin partition
		event fault
		iptables_add OUTPUT -o lo -p tcp --dport 34203 -j DROP
		iptables_add OUTPUT -o lo -p tcp --sport 34203 -j DROP
		iptables_add OUTPUT -o lo -p tcp -m owner --uid-owner 65534 -m multiport --dports 34201,34202 -j DROP
		sleep 2
		CHANGE_VIA=A change fail
		sleep 25
		iptables_clear
		event heal
		whole all_members
		sleep 15
		finish cutoff=GB steered=GS
		;;
	leader)
		begin leader
		l=
		for _ in $(seq 1 20); do
			l=$(leader)
			[ -n "$l" ] && break
			sleep 0.5
		done
		[ -n "$l" ] || die "no etcd leader"
		echo "    leader: m$l"
		event fault
		kill_one "etcd-m$l" KILL
		via=A
		[ "$l" = 1 ] && via=B
		sleep 1
		CHANGE_VIA=$via change fail
		sleep 10
		start_member "$l"
		event heal
		whole all_members
		sleep 15
		finish
		;;
	quorum)
		begin quorum
		event fault
		kill_one etcd-m2 KILL
		kill_one etcd-m3 KILL
		sleep 20
		start_member 2
		start_member 3
		event heal
		whole all_members
		wait_for 30 api_ready A || true
		CHANGE_VIA=A change fail
		sleep 15
		finish
		;;
	failover)
		begin failover
		event fault
		kill_one apiserver-B KILL
		sleep 1
		CHANGE_VIA=A change fail
		sleep 20
		start_api B
		wait_for 120 api_ready B || die "API server B did not start again"
		event heal
		event whole
		sleep 15
		finish cutoff=GB steered=GS
		;;
	*) die "unknown scenario $s" ;;
	esac
done

log "no panic, no restart"
for g in $GUARDS; do
	pid_var=${g}_PID
	pid=${!pid_var}
	if kill -0 "$pid" 2>/dev/null && ! grep -q 'panicked' "$WORK/guard-$g.log"; then
		echo "ok   - $g: the same process throughout (pid $pid), no panic in its log"
	else
		echo "FAIL - $g: exited or panicked ($WORK/guard-$g.log)"
		FAILED=1
	fi
done
[ "$FAILED" = 0 ] && echo "e2e-faults: every scenario passed" || echo "e2e-faults: some checks FAILED"
exit "$FAILED"
