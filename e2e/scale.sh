#!/usr/bin/env bash
# Scale harness (`make scale`, docs/scale.md): loads a synthetic Longhorn state into the cluster
# KUBECONFIG names (a bare kube-apiserver + etcd is enough: e2e/start-apiserver.sh), runs
# `longhorn-guard serve` in watch mode as a local process on 127.0.0.1 and prints one table:
# time to ready, RSS after sync and peak, eviction latency p50/p99 on a fresh view, on a quiet
# view proven current by probes (serve's default), and on a quiet view confirmed by reads (serve
# started again with probes off), API requests per confirmation and the "could not confirm" count.
#
#   SCALE_NODES=10 SCALE_VOLUMES=1000 make scale
#
# Knobs (environment): SCALE_NODES (10), SCALE_VOLUMES (1000), SCALE_MAX_VIEW_AGE (5s: the
# policy's drain.maxViewAge), SCALE_FRESH_REQUESTS (500), SCALE_QUIET_ROUNDS (10),
# SCALE_CONCURRENCY (4: load client connections on the fresh view), SCALE_LOAD_CONCURRENCY
# (32: API calls in flight while loading), SCALE_PORT (18453), LONGHORN_GUARD_BIN and
# SCALE_EXAMPLES (the built binaries; make scale builds them in release mode), SCALE_KEEP (0;
# 1 keeps the synthetic state after the run, and a later SCALE_KEEP=1 run of the same size
# reuses it instead of loading it again: for repeated measurements), SCALE_APISERVER_PID (none;
# the PID of a kube-apiserver on this machine adds a row: its CPU time per confirmation's reads),
# SCALE_BUSY_KINDS (volumes,engines: the kinds a third phase keeps busy while the others stay
# quiet, so confirmations read only the quiet ones; empty skips that phase), SCALE_OVERLAP (6:
# evictions of the drained node's instance manager sent SCALE_OVERLAP_STAGGER (100ms) apart on a
# quiet view, so confirmations overlap and queue for serve's --max-confirmations; 0 skips that
# phase; LONGHORN_GUARD_MAX_CONFIRMATIONS sets the server's limit), SCALE_SETTLE (0: seconds
# to wait without requests after the quiet view before one more RSS sample).
#
# Every object it creates is labelled longhorn-guard-scale=true and removed on exit (also the
# CRDs, the longhorn-system namespace and the guard's RBAC when this run created them). It
# refuses to run where a real Longhorn or real scale-node-* Nodes exist.
# Exit status: 0 table printed, 1 a phase failed (the table shows what was measured), 2 could not run.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
E2E="$ROOT/e2e"
KUBECTL=${KUBECTL:-kubectl}
BIN=${LONGHORN_GUARD_BIN:-$ROOT/target/release/longhorn-guard}
EXAMPLES=${SCALE_EXAMPLES:-$ROOT/target/release/examples}
CRDS=${E2E_CRDS:-$ROOT/../shared/fixtures/crds/longhorn-crds.yaml}
NODES=${SCALE_NODES:-10}
VOLUMES=${SCALE_VOLUMES:-1000}
MAX_VIEW_AGE=${SCALE_MAX_VIEW_AGE:-5s}
FRESH_REQUESTS=${SCALE_FRESH_REQUESTS:-500}
QUIET_ROUNDS=${SCALE_QUIET_ROUNDS:-10}
CONCURRENCY=${SCALE_CONCURRENCY:-4}
LOAD_CONCURRENCY=${SCALE_LOAD_CONCURRENCY:-32}
PORT=${SCALE_PORT:-18453}
KEEP=${SCALE_KEEP:-0}
BUSY_KINDS=${SCALE_BUSY_KINDS-volumes,engines}
OVERLAP=${SCALE_OVERLAP:-6}
SETTLE=${SCALE_SETTLE:-0}
OVERLAP_STAGGER=${SCALE_OVERLAP_STAGGER:-100ms}
LH_NS=longhorn-system
GUARD_NS=longhorn-guard
LABEL=longhorn-guard-scale
SCRIPT_NAME=scale
# shellcheck source=e2e/lib.sh
. "$E2E/lib.sh"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/longhorn-guard-scale.XXXXXX")
SERVER_PID=
HEARTBEAT_PID=
CREATED_CRDS=0
CREATED_LH_NS=0
CREATED_GUARD_NS=0
LOADED=0
FAILED=0

cleanup() {
	set +e
	log "cleanup"
	[ -n "$HEARTBEAT_PID" ] && stop_pid "$HEARTBEAT_PID"
	[ -n "${AGES_PID:-}" ] && stop_pid "$AGES_PID"
	[ -n "$SERVER_PID" ] && stop_pid "$SERVER_PID"
	if [ "$KEEP" = 1 ]; then
		log "SCALE_KEEP=1: the synthetic state stays (remove it with SCALE_KEEP=0 make scale, or scale_load delete)"
		rm -rf "$WORK"
		return
	fi
	if [ "$LOADED" = 1 ]; then
		k -n "$LH_NS" delete configmap "$MARKER" --ignore-not-found >/dev/null 2>&1
		"$EXAMPLES/scale_load" delete --concurrency "$LOAD_CONCURRENCY"
	fi
	if [ "$CREATED_GUARD_NS" = 1 ]; then
		k delete -f "$ROOT/manifests/base/rbac.yaml" --ignore-not-found >/dev/null
		delete_ns "$GUARD_NS"
	fi
	k -n "$LH_NS" delete serviceaccount -l "$LABEL=true" --ignore-not-found >/dev/null 2>&1
	k -n default delete serviceaccount -l "$LABEL=true" --ignore-not-found >/dev/null 2>&1
	[ "$CREATED_CRDS" = 1 ] && k delete -f "$CRDS" --ignore-not-found --wait=false >/dev/null
	[ "$CREATED_LH_NS" = 1 ] && delete_ns "$LH_NS"
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# now: seconds since the epoch with milliseconds.
now() { date +%s.%3N; }
# vm FIELD: a /proc/PID/status field of the server (VmRSS, VmHWM) in MiB.
vm() { awk -v f="$1:" '$1 == f { printf "%.1f", $2 / 1024 }' "/proc/$SERVER_PID/status" 2>/dev/null; }
# metric_sum FILE NAME: the sum of every sample of counter NAME in a /metrics dump, or empty.
metric_sum() {
	awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $NF; found = 1 } END { if (found) printf "%.0f", s }' "$1"
}
# apiserver_ticks: the CPU time (clock ticks) of SCALE_APISERVER_PID, or empty.
apiserver_ticks() { [ -n "${SCALE_APISERVER_PID:-}" ] && awk '{ print $14 + $15 }' "/proc/$SCALE_APISERVER_PID/stat" 2>/dev/null || true; }
# cpu_per_second TICKS0 TICKS1 T0 T1: CPU milliseconds per second of wall time, or n/a.
cpu_per_second() {
	if [ -z "$1" ] || [ -z "$2" ]; then echo n/a; return; fi
	awk -v c=$(($2 - $1)) -v hz="$(getconf CLK_TCK)" -v a="$3" -v b="$4" 'BEGIN { printf "%.0f ms/s", c * 1000 / hz / (b - a) }'
}
# field JSON KEY: a top-level number (or null) from admission_load's one-line summary.
field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" <<<"$1"; }
count() { local v; v=$(field "$1" "$2"); printf '%s' "${v:-0}"; }
ms() { [ -n "$1" ] && [ "$1" != null ] && printf '%s ms' "$1" || printf 'n/a'; }

# ---------------------------------------------------------------- preflight
log "preflight: $NODES nodes, $VOLUMES volumes x 3 replicas"
preflight_api
for b in "$BIN" "$EXAMPLES/scale_load" "$EXAMPLES/admission_load"; do
	[ -x "$b" ] || die "$b not found (make scale builds it; or set LONGHORN_GUARD_BIN / SCALE_EXAMPLES)"
done
case $NODES$VOLUMES in *[!0-9]*) die "SCALE_NODES and SCALE_VOLUMES must be whole numbers" ;; esac
[ "$NODES" -ge 3 ] || die "SCALE_NODES must be at least 3 (3 replicas on distinct nodes)"
max_view_age_s=$(awk -v d="$MAX_VIEW_AGE" 'BEGIN { if (d ~ /^[0-9]+s$/) print d + 0 }')
[ -n "$max_view_age_s" ] || die "SCALE_MAX_VIEW_AGE must be whole seconds such as 3s, got $MAX_VIEW_AGE"
nodes_to_check=()
for ((n = 0; n < NODES; n++)); do nodes_to_check+=("$(printf 'scale-node-%03d' "$n")"); done
refuse_real_longhorn "$LABEL" "${nodes_to_check[@]}"

# ---------------------------------------------------------------- state
log "Longhorn CRDs, namespace and synthetic state"
ensure_longhorn "$LABEL"
k get namespace "$GUARD_NS" >/dev/null 2>&1 || CREATED_GUARD_NS=1
LOADED=1
# A SCALE_KEEP=1 run that loaded the state leaves this ConfigMap naming the size; any other
# load or delete removes it first. Reading it is one small request: counting 40,000 objects
# would keep the API server busy into the measurements.
MARKER=longhorn-guard-scale-state
kept_size() { k -n "$LH_NS" get configmap "$MARKER" -o jsonpath='{.data.size}' 2>/dev/null || true; }
if [ "$KEEP" = 1 ] && [ "$(kept_size)" = "${NODES}x${VOLUMES}" ]; then
	load_s="reused (SCALE_KEEP=1)"
	echo "    the state of a SCALE_KEEP=1 run of this size is there: reused"
else
	k -n "$LH_NS" delete configmap "$MARKER" --ignore-not-found >/dev/null
	"$EXAMPLES/scale_load" delete --concurrency "$LOAD_CONCURRENCY" # leftovers of an interrupted run
	t0=$(now)
	"$EXAMPLES/scale_load" load --nodes "$NODES" --volumes "$VOLUMES" --concurrency "$LOAD_CONCURRENCY" ||
		die "loading the synthetic state failed"
	if [ "$KEEP" = 1 ]; then
		k -n "$LH_NS" create configmap "$MARKER" --from-literal=size="${NODES}x${VOLUMES}" >/dev/null
		k -n "$LH_NS" label configmap "$MARKER" "$LABEL=true" >/dev/null
	fi
	load_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }')
	echo "    loaded in ${load_s}"
fi

# The storage node (the last) holds replicas and no engine: evicting its instance manager is
# safe. Names as in src/synthetic.rs.
storage=$((NODES - 1))
storage_im=$(printf 'instance-manager-5ca1e%027x' "$storage")

# ---------------------------------------------------------------- serve
log "longhorn-guard serve (watch mode) on 127.0.0.1:$PORT, drain.maxViewAge $MAX_VIEW_AGE"
"$BIN" certs --out "$WORK/certs" --ip 127.0.0.1 >/dev/null || die "longhorn-guard certs failed"
guard_kubeconfig "$WORK/sa.kubeconfig"
printf 'drain:\n  maxViewAge: %s\n' "$MAX_VIEW_AGE" >"$WORK/policy.yaml"
# The partly busy phase measures confirmations that reuse the kinds the view holds current.
if [ -n "$BUSY_KINDS" ]; then printf '  reuseCurrentKinds: true\n' >>"$WORK/policy.yaml"; fi
load_client() { "$EXAMPLES/admission_load" --url "https://127.0.0.1:$PORT/validate" --ca "$WORK/certs/ca.crt" --pod "$storage_im" "$@"; }
ready() { curl -sf --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:$PORT/readyz" >/dev/null; }
# start_serve [ARGS...]: serve in watch mode with extra ARGS; sets SERVER_PID and ready_s. Each
# start's log is kept apart (server.1.log, server.2.log); server.log names the current one.
SERVER_STARTS=0
start_serve() {
	local t0
	SERVER_STARTS=$((SERVER_STARTS + 1))
	[ -e "$WORK/server.log" ] && mv "$WORK/server.log" "$WORK/server.$((SERVER_STARTS - 1)).log"
	t0=$(now)
	# The allocator setting the Deployment ships (manifests/base/deployment.yaml).
	KUBECONFIG="$WORK/sa.kubeconfig" LONGHORN_GUARD_LOG=${LONGHORN_GUARD_LOG:-info} \
		MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-131072} "$BIN" serve \
		--tls-dir "$WORK/certs" --listen "127.0.0.1:$PORT" --policy "$WORK/policy.yaml" "$@" >"$WORK/server.log" 2>&1 &
	SERVER_PID=$!
	until ready; do
		if gone_pid "$SERVER_PID"; then
			tail -n 20 "$WORK/server.log" | sed 's/^/    /'
			die "longhorn-guard exited before it was ready (its log above)"
		fi
		if [ "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print (b - a > 600) }')" = 1 ]; then
			tail -n 20 "$WORK/server.log" | sed 's/^/    /'
			die "longhorn-guard did not become ready within 600s"
		fi
		sleep 0.1
	done
	ready_s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
}
# What the API server alone takes to list what the guard lists: each kind alone (the longest
# is the yardstick of the time to ready), then all at once; paged (as the issue measured it),
# then one plain LIST a kind, then streaming lists: the fastest longest is the strict yardstick
# (paged lists after the first page are read from etcd or from the cache, as the API server
# can, several times apart).
lists=$("$EXAMPLES/scale_load" lists) || die "timing the API server's LISTs failed"
echo "    API server LISTs: $lists"
lists_plain=$("$EXAMPLES/scale_load" lists --mode plain) || die "timing the API server's plain LISTs failed"
echo "    API server LISTs: $lists_plain"
lists_streaming=$("$EXAMPLES/scale_load" lists --mode streaming) || die "timing the API server's streaming lists failed"
echo "    API server LISTs: $lists_streaming"
fastest_ms=$(printf '%s\n' "$(field "$lists" longest_ms)" "$(field "$lists_plain" longest_ms)" \
	"$(field "$lists_streaming" longest_ms)" | sort -n | head -n 1)
# Every kind the guard lists, all at once, the fastest way: how soon the API server can hand a
# client all that a start needs on this machine's cores.
fastest_all_ms=$(printf '%s\n' "$(field "$lists" all_ms)" "$(field "$lists_plain" all_ms)" \
	"$(field "$lists_streaming" all_ms)" | sort -n | head -n 1)
start_cpu=$(apiserver_ticks)
start_serve
start_cpu=$(awk -v a="$start_cpu" -v b="$(apiserver_ticks)" -v hz="$(getconf CLK_TCK)" 'BEGIN { if (a != "" && b != "") printf "%.1f s", (b - a) / hz; else print "n/a" }')
ready_first=$ready_s
hwm_sync=$(vm VmHWM)
# The start as the guard timed it (its log, INFO): each kind's list from its request to its last
# object (list_ms), the sync (sync_ms), and the first proof after it (after_sync_ms); n/a from a
# guard that does not log them.
log_field() { sed -n "s/.*$1.* $2=\([0-9]*\).*/\1/p" "$WORK/server.log" | head -n 1; }
guard_sync_ms=$(log_field "cluster view synced" sync_ms)
guard_proof_ms=$(log_field "cluster view proven current" after_sync_ms)
guard_longest=$(sed -n 's/.* listed kind="\([^"]*\)".* list_ms=\([0-9]*\).*/\2 \1/p' "$WORK/server.log" | sort -n | tail -n 1)
guard_longest_ms=${guard_longest%% *}
guard_longest_kind=${guard_longest#* }
# The first evictions after /readyz turned 200: ready means answered at the view's speed.
set +e
first=$(load_client --requests 5 --concurrency 1)
[ $? -eq 0 ] || FAILED=1
set -e
sleep 1
rss_sync=$(vm VmRSS)
echo "    ready after ${ready_s}s; peak RSS ${hwm_sync} MiB by then; RSS ${rss_sync} MiB; first 5 evictions: $first"
# Steady state: serve's first `check cluster` refresh starts at sync; sample once it is done
# (at most 60 s) and the server has been idle for a second.
for _ in $(seq 600); do
	grep -q "cluster checks refreshed\|cluster checks could not read" "$WORK/server.log" && break
	sleep 0.1
done
sleep 1
rss_idle=$(vm VmRSS)
hwm_start=$(vm VmHWM)
echo "    RSS ${rss_idle} MiB once idle after the first check refresh (peak ${hwm_start} MiB)"

# ---------------------------------------------------------------- fresh view
log "fresh view: $FRESH_REQUESTS evictions of $storage_im, $CONCURRENCY connections, a heartbeat write every second"
"$EXAMPLES/scale_load" heartbeat --interval 1s &
HEARTBEAT_PID=$!
sleep 2
set +e
fresh=$(load_client --requests "$FRESH_REQUESTS" --concurrency "$CONCURRENCY")
[ $? -eq 0 ] || FAILED=1
set -e
echo "    $fresh"
stop_pid "$HEARTBEAT_PID"
HEARTBEAT_PID=

# per_confirmation_between BEFORE AFTER: API requests per confirmation between two scrapes of
# /metrics, with the counts; n/a when the server does not export them.
per_confirmation_between() {
	local r0 r1 c0 c1
	r0=$(metric_sum "$1" longhorn_guard_api_requests_total)
	r1=$(metric_sum "$2" longhorn_guard_api_requests_total)
	c0=$(metric_sum "$1" longhorn_guard_confirmations_total)
	c1=$(metric_sum "$2" longhorn_guard_confirmations_total)
	if [ -z "$r1" ] || [ -z "$c1" ]; then
		echo n/a
		return
	fi
	awk -v r=$((r1 - ${r0:-0})) -v c=$((c1 - ${c0:-0})) \
		'BEGIN { if (c > 0) printf "%.1f (%d requests / %d confirmations)", r / c, r, c; else print "n/a (no confirmation counted)" }'
}

# confirmed_rounds TAG: QUIET_ROUNDS evictions, each after `pause` seconds, with /metrics
# scraped before and after into $WORK/metrics.TAG.0 and .1; the load client's line in rounds_out.
confirmed_rounds() {
	curl -sf --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:$PORT/metrics" >"$WORK/metrics.$1.0" || true
	set +e
	rounds_out=$(load_client --requests 1 --rounds "$QUIET_ROUNDS" --pause "${pause}s" --concurrency 1)
	[ $? -eq 0 ] || FAILED=1
	set -e
	echo "    $rounds_out"
	curl -sf --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:$PORT/metrics" >"$WORK/metrics.$1.1" || true
}

# ---------------------------------------------------------------- quiet view, probes
# serve's default: each kind probed every second; its watch's BOOKMARKs prove the view current.
pause=$((max_view_age_s + 1))
log "quiet view, probes on: $QUIET_ROUNDS evictions, each after ${pause}s without writes (proven current)"
cpu0=$(apiserver_ticks)
t_cpu0=$(now)
# The view's age (longhorn_guard_cluster_view_age_seconds) every half second meanwhile.
(
	while :; do
		curl -sf --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:$PORT/metrics" |
			awk '$1 == "longhorn_guard_cluster_view_age_seconds" { print $2 }' || true
		sleep 0.5
	done
) >"$WORK/ages" 2>/dev/null &
AGES_PID=$!
confirmed_rounds proven
stop_pid "$AGES_PID"
AGES_PID=
apiserver_idle_probes=$(cpu_per_second "$cpu0" "$(apiserver_ticks)" "$t_cpu0" "$(now)")
view_ages=$(sort -g "$WORK/ages" | awk '{ a[NR] = $1 } END { if (NR) printf "%.1f / %.1f / %.1f s (n=%d)", a[int((NR + 1) / 2)], a[int(NR * 0.99 + 0.99)], a[NR], NR; else print "n/a" }')
proven=$rounds_out
proven_confirmations=$(($(metric_sum "$WORK/metrics.proven.1" longhorn_guard_confirmations_total) - $(metric_sum "$WORK/metrics.proven.0" longhorn_guard_confirmations_total)))
proven_rate=$(awk -v r0="$(metric_sum "$WORK/metrics.proven.0" longhorn_guard_api_requests_total)" \
	-v r1="$(metric_sum "$WORK/metrics.proven.1" longhorn_guard_api_requests_total)" -v s="$((QUIET_ROUNDS * pause))" \
	'BEGIN { printf "%.1f", (r1 - r0) / s }')

sleep 2
rss_probes=$(vm VmRSS)
rss_peak_probes=$(vm VmHWM)
# The phases below measure confirmations by reads: serve again, with probes off.
log "longhorn-guard serve again with --freshness-probe-interval 0s (every quiet allow confirmed by reads)"
stop_pid "$SERVER_PID"
start_serve --freshness-probe-interval 0s
ready_plain=$ready_s
echo "    ready after ${ready_s}s"
apiserver_idle_plain=n/a
if [ -n "$(apiserver_ticks)" ]; then
	# The API server's CPU with the guard idle and probes off (after its first check refresh).
	for _ in $(seq 600); do
		grep -q "cluster checks refreshed\|cluster checks could not read" "$WORK/server.log" && break
		sleep 0.1
	done
	sleep 2
	cpu0=$(apiserver_ticks)
	t_cpu0=$(now)
	sleep 20
	apiserver_idle_plain=$(cpu_per_second "$cpu0" "$(apiserver_ticks)" "$t_cpu0" "$(now)")
fi

# ---------------------------------------------------------------- quiet view
log "quiet view: $QUIET_ROUNDS evictions, each after ${pause}s without writes (confirmed)"
confirmed_rounds quiet
quiet=$rounds_out
# Steady state again: serve hands freed heap back a second after a burst (src/heap.rs).
sleep 2
rss_now=$(vm VmRSS)
rss_peak=$(vm VmHWM)
rss_settled=
if [ "$SETTLE" -gt 0 ]; then
	log "settle: ${SETTLE}s without requests"
	sleep "$SETTLE"
	rss_settled=$(vm VmRSS)
	echo "    RSS ${rss_settled} MiB"
fi

per_confirmation=$(per_confirmation_between "$WORK/metrics.quiet.0" "$WORK/metrics.quiet.1")
# ---------------------------------------------------------------- partly busy view (optional)
# Longhorn keeps some kinds busy (engine and volume status) while others stay quiet: the
# heartbeat touches only BUSY_KINDS, so confirmations read only the quiet kinds.
busy=
busy_per_confirmation=n/a
if [ -n "$BUSY_KINDS" ]; then
	log "partly busy view: $QUIET_ROUNDS evictions, each after ${pause}s with writes to $BUSY_KINDS only (confirmed)"
	"$EXAMPLES/scale_load" heartbeat --interval 1s --kinds "$BUSY_KINDS" &
	HEARTBEAT_PID=$!
	confirmed_rounds busy
	busy=$rounds_out
	stop_pid "$HEARTBEAT_PID"
	HEARTBEAT_PID=
	busy_per_confirmation=$(per_confirmation_between "$WORK/metrics.busy.0" "$WORK/metrics.busy.1")
fi
# ---------------------------------------------------------------- overlapping confirmations (optional)
# Evictions arriving while earlier confirmations read (parallel drains, retries): at most
# --max-confirmations read at once, later ones queue and share. The peak is measured from here
# (VmHWM reset through /proc/PID/clear_refs).
overlap=
overlap_rss=n/a
overlap_requests=n/a
if [ "$OVERLAP" -gt 0 ]; then
	log "overlapping confirmations: $OVERLAP evictions $OVERLAP_STAGGER apart after ${pause}s without writes (--max-confirmations ${LONGHORN_GUARD_MAX_CONFIRMATIONS:-2})"
	curl -sf --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:$PORT/metrics" >"$WORK/metrics.overlap.0" || true
	echo 5 >"/proc/$SERVER_PID/clear_refs" 2>/dev/null || true
	set +e
	overlap=$(load_client --requests "$OVERLAP" --concurrency "$OVERLAP" --stagger "$OVERLAP_STAGGER" --pause "${pause}s")
	[ $? -eq 0 ] || FAILED=1
	set -e
	echo "    $overlap"
	overlap_rss="$(vm VmHWM) MiB"
	curl -sf --cacert "$WORK/certs/ca.crt" "https://127.0.0.1:$PORT/metrics" >"$WORK/metrics.overlap.1" || true
	r0=$(metric_sum "$WORK/metrics.overlap.0" longhorn_guard_api_requests_total)
	r1=$(metric_sum "$WORK/metrics.overlap.1" longhorn_guard_api_requests_total)
	[ -n "$r1" ] && overlap_requests="$((r1 - ${r0:-0})) for $OVERLAP evictions"
fi
unconfirmed=$(($(count "$first" could_not_confirm) + $(count "$fresh" could_not_confirm) + $(count "$proven" could_not_confirm) + $(count "$quiet" could_not_confirm) + $(count "$busy" could_not_confirm) + $(count "$overlap" could_not_confirm)))

# ---------------------------------------------------------------- API server CPU (optional)
# What the confirmation's reads cost the API server: its CPU time over CPU_READS back-to-back
# `check drain` runs (the same read-set, no pauses, so idle work hardly counts), per run.
apiserver_cpu=n/a
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null; }
if [ -n "${SCALE_APISERVER_PID:-}" ] && [ -n "$(cpu_ticks "$SCALE_APISERVER_PID")" ]; then
	CPU_READS=5
	log "API server CPU: $CPU_READS x check drain $(printf 'scale-node-%03d' "$storage") (pid $SCALE_APISERVER_PID)"
	hz=$(getconf CLK_TCK)
	c0=$(cpu_ticks "$SCALE_APISERVER_PID")
	t0=$(now)
	for ((i = 0; i < CPU_READS; i++)); do
		"$BIN" check drain "$(printf 'scale-node-%03d' "$storage")" >/dev/null 2>&1 || true
	done
	t1=$(now)
	c1=$(cpu_ticks "$SCALE_APISERVER_PID")
	apiserver_cpu=$(awk -v c=$((c1 - c0)) -v hz="$hz" -v n="$CPU_READS" -v a="$t0" -v b="$t1" \
		'BEGIN { printf "%.0f ms (%d x check drain, %.0f ms wall each)", c * 1000 / hz / n, n, (b - a) * 1000 / n }')
fi

# ---------------------------------------------------------------- table
log "longhorn-guard scale: $NODES nodes, $VOLUMES volumes; drained node $(printf 'scale-node-%03d' "$storage") with about $((3 * VOLUMES / NODES)) replicas"
{
	printf '%-44s %s\n' "metric" "value"
	printf '%-44s %s\n' "state loaded (API calls, $LOAD_CONCURRENCY in flight)" "${load_s}"
	printf '%-44s %s / %s s\n' "time to ready (start -> /readyz 200), probes on / off" "${ready_first}" "${ready_plain}"
	printf '%-44s %s ms (%s) / %s ms, %s MB\n' "longest LIST alone / all kinds at once" "$(field "$lists" longest_ms)" \
		"$(sed -n 's/.*"longest":"\([^"]*\)".*/\1/p' <<<"$lists")" "$(field "$lists" all_ms)" \
		"$(awk -v b="$(field "$lists" bytes)" 'BEGIN { printf "%.1f", b / 1e6 }')"
	printf '%-44s %s\n' "API server CPU, start -> ready (probes on)" "$start_cpu"
	printf '%-44s %s\n' "time to ready / longest LIST" \
		"$(awk -v r="$ready_first" -v l="$(field "$lists" longest_ms)" 'BEGIN { if (l > 0) printf "%.2f", r * 1000 / l; else print "n/a" }')"
	printf '%-44s %s / %s / %s ms\n' "longest LIST alone: paged / plain / streaming" "$(field "$lists" longest_ms)" \
		"$(field "$lists_plain" longest_ms)" "$(field "$lists_streaming" longest_ms)"
	printf '%-44s %s / %s / %s ms\n' "all kinds at once: paged / plain / streaming" "$(field "$lists" all_ms)" \
		"$(field "$lists_plain" all_ms)" "$(field "$lists_streaming" all_ms)"
	printf '%-44s %s\n' "time to ready / the fastest longest LIST" \
		"$(awk -v r="$ready_first" -v l="${fastest_ms:-0}" 'BEGIN { if (l > 0) printf "%.2f", r * 1000 / l; else print "n/a" }')"
	printf '%-44s %s\n' "time to ready / every kind at once, fastest" \
		"$(awk -v r="$ready_first" -v l="${fastest_all_ms:-0}" 'BEGIN { if (l > 0) printf "%.2f", r * 1000 / l; else print "n/a" }')"
	printf '%-44s %s ms (%s) / %s ms / %s ms\n' "guard: longest list / sync / first proof after" \
		"${guard_longest_ms:-n/a}" "${guard_longest_kind:-n/a}" "${guard_sync_ms:-n/a}" "${guard_proof_ms:-n/a}"
	printf '%-44s %s\n' "time to ready / the guard's longest list" \
		"$(awk -v r="$ready_first" -v l="${guard_longest_ms:-0}" 'BEGIN { if (l > 0) printf "%.2f", r * 1000 / l; else print "n/a" }')"
	printf '%-44s %s / %s (n=%s, allowed %s)\n' "first 5 evictions after ready, p50 / max" "$(ms "$(field "$first" p50_ms)")" \
		"$(ms "$(field "$first" max_ms)")" "$(field "$first" requests)" "$(field "$first" allowed)"
	printf '%-44s %s MiB\n' "peak RSS at ready (VmHWM: the sync)" "${hwm_sync:-n/a}"
	printf '%-44s %s MiB\n' "peak RSS after the first check refresh" "${hwm_start:-n/a}"
	printf '%-44s %s\n' "RSS after sync" "${rss_sync:-n/a} MiB"
	printf '%-44s %s\n' "RSS idle (after the first check refresh)" "${rss_idle:-n/a} MiB"
	printf '%-44s %s\n' "RSS at the end (2 s after the quiet view)" "${rss_now:-n/a} MiB"
	printf '%-44s %s\n' "peak RSS (VmHWM)" "${rss_peak:-n/a} MiB"
	if [ -n "$rss_settled" ]; then printf '%-44s %s\n' "RSS ${SETTLE}s after the quiet view" "$rss_settled MiB"; fi
	printf '%-44s %s / %s (n=%s, allowed %s)\n' "eviction p50 / p99, fresh view" "$(ms "$(field "$fresh" p50_ms)")" \
		"$(ms "$(field "$fresh" p99_ms)")" "$(field "$fresh" requests)" "$(field "$fresh" allowed)"
	printf '%-44s %s / %s (n=%s, allowed %s)\n' "eviction p50 / p99, quiet view (probes)" "$(ms "$(field "$proven" p50_ms)")" \
		"$(ms "$(field "$proven" p99_ms)")" "$(field "$proven" requests)" "$(field "$proven" allowed)"
	printf '%-44s %s\n' "confirmations, quiet view (probes)" "$proven_confirmations"
	printf '%-44s %s\n' "view age p50 / p99 / max, quiet (probes)" "$view_ages"
	printf '%-44s %s / %s MiB\n' "RSS 2 s after it / peak, probes on" "${rss_probes:-n/a}" "${rss_peak_probes:-n/a}"
	printf '%-44s %s\n' "API requests per second, quiet (probes)" "$proven_rate"
	printf '%-44s %s / %s\n' "API server CPU, quiet: probes on / off" "$apiserver_idle_probes" "$apiserver_idle_plain"
	printf '%-44s %s / %s (n=%s, allowed %s)\n' "eviction p50 / p99, quiet view (confirmed)" "$(ms "$(field "$quiet" p50_ms)")" \
		"$(ms "$(field "$quiet" p99_ms)")" "$(field "$quiet" requests)" "$(field "$quiet" allowed)"
	printf '%-44s %s\n' "API requests per confirmation" "$per_confirmation"
	if [ -n "$busy" ]; then
		printf '%-44s %s / %s (n=%s, allowed %s)\n' "eviction p50 / p99, partly busy view" "$(ms "$(field "$busy" p50_ms)")" \
			"$(ms "$(field "$busy" p99_ms)")" "$(field "$busy" requests)" "$(field "$busy" allowed)"
		printf '%-44s %s\n' "API requests per confirmation, partly busy" "$busy_per_confirmation"
	fi
	if [ -n "$overlap" ]; then
		printf '%-44s %s / %s (n=%s, %s apart, allowed %s)\n' "eviction p50 / p99, overlapping" \
			"$(ms "$(field "$overlap" p50_ms)")" "$(ms "$(field "$overlap" p99_ms)")" "$(field "$overlap" requests)" \
			"$OVERLAP_STAGGER" "$(field "$overlap" allowed)"
		printf '%-44s %s\n' "peak RSS, overlapping confirmations" "$overlap_rss"
		printf '%-44s %s\n' "API requests, overlapping confirmations" "$overlap_requests"
	fi
	printf '%-44s %s\n' "\"could not confirm\" answers" "$unconfirmed"
	printf '%-44s %s\n' "API server CPU per confirmation's reads" "$apiserver_cpu"
} | tee "$WORK/table.txt"
if [ -n "${SCALE_TABLE_OUT:-}" ]; then cp "$WORK/table.txt" "$SCALE_TABLE_OUT"; fi
if [ -n "${SCALE_LOG_OUT:-}" ]; then
	cp "$WORK/server.1.log" "$SCALE_LOG_OUT.probes.log"
	cp "$WORK/server.log" "$SCALE_LOG_OUT.plain.log"
fi
log "longhorn-guard log (last 5 lines)"
tail -n 5 "$WORK/server.log" | cut -c1-300 | sed 's/^/    /'
exit "$FAILED"
