# Watch-fault checks of `make e2e` (E2E_APISERVER=own). Sourced by e2e/run.sh, which provides
# k, run, check, has, lacks, all, log, wait_for, $WORK, $PORT (the running `serve`, watch mode,
# its own ServiceAccount), $APISERVER_DIR (e2e/start-apiserver.sh's directory) and $IM2.
#
# The suite's own kube-apiserver is killed under the running serve and started again, twice:
#   1. a plain restart;
#   2. a restart after etcd was compacted and a Replica was changed straight in etcd while the
#      API server was down: the resumed watches get a real "410 Gone" (too old resource
#      version), and the change is only seen through the relist that follows.
# Each time: /metrics shows the view stale, the eviction that fresh data allows (an
# instance-manager pod on node-3) is denied with 429 "could not confirm", the unsafe one (node-2)
# is still denied for what it is; after the restart the view is current again and decisions
# follow the API server's state within seconds (the change made in etcd included), and so does
# a change made after the restart.
# Before the faults: after more than maxViewAge without writes, the view is still current
# (proven by the probes and its watches' BOOKMARKs), and the safe eviction is allowed without a
# confirmation; where kube-apiserver cannot serve consistent reads from its watch cache (an
# etcd before 3.5.13), nothing proves it and the allow is confirmed by reads instead.
# Evictions are POSTed to serve directly (as the API server would send them): with the API
# server down, kubectl cannot send any.

FAULT_SAFE_POD=instance-manager-e2e00000000000000000000000000001 # on node-3, made by the gate checks
EVICTION_FIXTURE=$ROOT/../shared/fixtures/admission/eviction-create.json
RECOVERY_BOUND=15 # seconds allowed for "within seconds of recovery"

guard_curl() { curl -s --max-time 15 --cacert "$WORK/certs/ca.crt" "$@"; }

# metric_sum NAME [FILTER]: sum of NAME's series (whose line contains FILTER) on serve's /metrics.
metric_sum() {
	# Counters appear once non-zero: no series is a sum of 0, not a failure (set -o pipefail).
	guard_curl "https://127.0.0.1:$PORT/metrics" | { grep -E "^$1[{ ]" || true; } | { grep -F -- "${2:-}" || true; } |
		awk '{s += $NF} END {print s + 0}'
}
# consistent_reads_from_cache: kube-apiserver answers consistent LISTs from its watch cache
# (Kubernetes 1.31+ with etcd 3.5.13+ / 3.4.31+), as its own metric shows once one was served.
consistent_reads_from_cache() {
	local m # read whole first: grep -q would cut kubectl's output short (SIGPIPE, pipefail)
	m=$(k get --raw /metrics 2>/dev/null) || return 1
	grep -q '^apiserver_watch_cache_consistent_read_total{fallback="false",.*success="true"' <<<"$m"
}
view_stale() { [ "$(metric_sum longhorn_guard_cluster_view_failing_watches)" -gt 0 ]; }
view_current() { [ "$(metric_sum longhorn_guard_cluster_view_failing_watches)" -eq 0 ]; }
gone_total() { metric_sum longhorn_guard_watch_errors_total 'reason="gone"'; }

# eviction_answer POD: serve's AdmissionReview answer to the eviction of POD in longhorn-system.
eviction_answer() {
	sed -e "s/instance-manager-7b9c5d2e1f3a/$1/g" \
		-e "s/1f682fde-188d-4d35-a16d-fdf844d8208c/e2e-fault-$RANDOM$RANDOM/" "$EVICTION_FIXTURE" |
		guard_curl -H 'Content-Type: application/json' --data-binary @- "https://127.0.0.1:$PORT/validate"
}
evict() { run eviction_answer "$1"; }
# answer_has POD TEXT...: the eviction's answer contains every TEXT.
answer_has() {
	local a t
	a=$(eviction_answer "$1")
	shift
	for t in "$@"; do grep -qF -- "$t" <<<"$a" || return 1; done
}
now_ms() { date +%s%3N; }
# poll_for SECONDS CMD...: like wait_for, every 0.2s (for the recovery times it reports).
poll_for() {
	local deadline=$(($(now_ms) + $1 * 1000))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$(now_ms)" -lt "$deadline" ] || return 1
		sleep 0.2
	done
}

api_stop() { "$E2E/start-apiserver.sh" apiserver-stop "$APISERVER_DIR" | sed 's/^/    /'; }
api_start() {
	"$E2E/start-apiserver.sh" apiserver-start "$APISERVER_DIR" | sed 's/^/    /'
	[ "${PIPESTATUS[0]}" -eq 0 ] || die "kube-apiserver did not start again"
}

# set_failed REPLICA TIME: spec.failedAt of a Replica through the API ("" heals it).
set_failed() { k -n "$LH_NS" patch replicas.longhorn.io "$1" --type=merge -p "{\"spec\":{\"failedAt\":\"$2\"}}" >/dev/null; }

# etcd_fail_replica REPLICA TIME: sets spec.failedAt of a Replica straight in etcd (the API
# server stores custom resources as JSON), a change no watch can deliver.
etcd_fail_replica() {
	local key=/registry/longhorn.io/replicas/$LH_NS/$1 value
	# shellcheck source=/dev/null
	. "$APISERVER_DIR/ports.env"
	value=$(ETCDCTL_API=3 "$ETCDCTL" --endpoints="http://127.0.0.1:$ETCD_PORT" get "$key" --print-value-only)
	grep -qF '"failedAt":""' <<<"$value" || return 1
	ETCDCTL_API=3 "$ETCDCTL" --endpoints="http://127.0.0.1:$ETCD_PORT" put "$key" \
		"${value/\"failedAt\":\"\"/\"failedAt\":\"$2\"}" >/dev/null
}

# While kube-apiserver is down: the view stale, the safe eviction 429 "could not confirm", the
# unsafe one denied for what it is. $1 names the phase.
while_down() {
	check "$1: serve's /metrics shows the view stale (cluster_view_failing_watches > 0) within 20s" \
		wait_for 20 view_stale
	run metric_sum longhorn_guard_cluster_view_failing_watches
	evict "$FAULT_SAFE_POD"
	check "$1: the eviction fresh data allows (node-3) is denied with 429 'could not confirm'" \
		all 'has "\"allowed\":false"' 'has "\"code\":429"' 'has "could not confirm that draining node-3 is safe"'
	evict "$IM2"
	check "$1: the unsafe eviction (node-2) is still denied, for its volumes" \
		all 'has "\"allowed\":false"' 'has "vol-detached"' 'lacks "could not confirm"'
}

# After the restart ($2: when kube-apiserver was ready, ms): the safe eviction allowed, the view
# current again, each within $RECOVERY_BOUND seconds.
allowed_again() {
	if poll_for "$RECOVERY_BOUND" answer_has "$FAULT_SAFE_POD" '"allowed":true'; then
		pass "$1: the safe eviction is allowed again $(($(now_ms) - $2))ms after kube-apiserver was ready"
	else
		fail "$1: the safe eviction is allowed again within ${RECOVERY_BOUND}s of the restart"
	fi
}
current_again() {
	if poll_for "$RECOVERY_BOUND" view_current; then
		pass "$1: the view is current again (failing watches 0) $(($(now_ms) - $2))ms after kube-apiserver was ready"
	else
		fail "$1: the view is current again within ${RECOVERY_BOUND}s of the restart"
	fi
}

# change_reflected PHASE: vol-healthy's replicas on node-1 and node-2 fail (node-3 then holds
# its last healthy one) through the API: the eviction on node-3 is denied naming vol-healthy;
# healed again: allowed.
change_reflected() {
	local now
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	set_failed vol-healthy-r-1a2b3c4d "$now"
	set_failed vol-healthy-r-5e6f7a8b "$now"
	check "$1: a change after the restart (vol-healthy's other replicas failed) denies the eviction on node-3" \
		wait_for "$RECOVERY_BOUND" answer_has "$FAULT_SAFE_POD" '"allowed":false' vol-healthy
	evict "$FAULT_SAFE_POD"
	set_failed vol-healthy-r-1a2b3c4d ""
	set_failed vol-healthy-r-5e6f7a8b ""
	check "$1: healed again, the eviction on node-3 is allowed" \
		wait_for "$RECOVERY_BOUND" answer_has "$FAULT_SAFE_POD" '"allowed":true'
}

watch_fault_checks() {
	local t0 gone0 now
	log "watch faults: the baseline (kube-apiserver up)"
	evict "$FAULT_SAFE_POD"
	check "baseline: the eviction of $FAULT_SAFE_POD (node-3) is allowed" has '"allowed":true'
	run metric_sum longhorn_guard_cluster_view_failing_watches
	check "baseline: no failing watch" view_current

	log "probes: a quiet view proven current by its watches' BOOKMARKs (no confirmation reads)"
	local c0 age want_age age_says confirmations_say
	c0=$(metric_sum longhorn_guard_confirmations_total)
	sleep 7 # longer than the policy's maxViewAge (5s) without a write to the watched kinds
	age=$(metric_sum longhorn_guard_cluster_view_age_seconds)
	if consistent_reads_from_cache; then
		want_age='a < 5' age_says="under maxViewAge (5s): the probes proved it current"
		confirmations_ok() { [ "$(metric_sum longhorn_guard_confirmations_total)" -eq "$c0" ]; }
		confirmations_say="without a confirmation (longhorn_guard_confirmations_total stays at $c0)"
	else
		# etcd before 3.5.13 / 3.4.31 (Debian 12 ships 3.4.23): the API server reads etcd for
		# consistent reads, and nothing moves a quiet kind's watch cache on: no proof, reads.
		echo "    this API server does not serve consistent reads from its watch cache (etcd: $("${ETCD:-etcd}" --version 2>/dev/null | head -1))"
		want_age='a >= 5' age_says="past maxViewAge (5s): nothing proved it current"
		confirmations_ok() { [ "$(metric_sum longhorn_guard_confirmations_total)" -gt "$c0" ]; }
		confirmations_say="after a confirmation by reads (longhorn_guard_confirmations_total grew from $c0)"
	fi
	check "after 7s without writes the view's age ($age s) is $age_says" awk -v a="$age" "BEGIN { exit !($want_age) }"
	evict "$FAULT_SAFE_POD"
	check "the safe eviction on the quiet view is allowed" has '"allowed":true'
	check "... $confirmations_say" confirmations_ok
	if [ "$want_age" = 'a < 5' ]; then
		proven() { [ "$(metric_sum longhorn_guard_freshness_proofs_total)" -gt 0 ]; }
		check "longhorn_guard_freshness_proofs_total counts the proofs" proven
	fi

	log "watch faults 1: kube-apiserver killed under the running serve, then started again"
	api_stop
	while_down "API server down"
	api_start
	t0=$(now_ms)
	allowed_again "restarted" "$t0"
	current_again "restarted" "$t0"
	change_reflected "restarted"

	log "watch faults 2: 410 Gone (etcd compacted and a Replica changed in etcd while kube-apiserver is down)"
	gone0=$(gone_total)
	api_stop
	while_down "API server down again"
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	check "a change no watch can deliver: vol-healthy's replicas on node-1 and node-2 failed, in etcd" \
		all 'etcd_fail_replica vol-healthy-r-1a2b3c4d "$now"' 'etcd_fail_replica vol-healthy-r-5e6f7a8b "$now"'
	run "$E2E/start-apiserver.sh" compact "$APISERVER_DIR"
	check "etcd compacted at its current revision" rc_is 0
	api_start
	t0=$(now_ms)
	current_again "restarted after 410" "$t0"
	gone_seen() { [ "$(gone_total)" -gt "$gone0" ]; }
	check "serve's watches ended with 410 Gone (longhorn_guard_watch_errors_total{reason=\"gone\"} grew)" \
		wait_for "$RECOVERY_BOUND" gone_seen
	run grep -c 'too old resource version' "$WORK/server.log"
	check "serve's log shows 'too old resource version'" rc_is 0
	check "the change made in etcd is seen after the relist: the eviction on node-3 is denied naming vol-healthy" \
		wait_for "$RECOVERY_BOUND" answer_has "$FAULT_SAFE_POD" '"allowed":false' vol-healthy
	evict "$FAULT_SAFE_POD"
	check "that denial is for the volume, not 'could not confirm'" lacks "could not confirm"
	set_failed vol-healthy-r-1a2b3c4d ""
	set_failed vol-healthy-r-5e6f7a8b ""
	check "healed through the API, the eviction on node-3 is allowed" \
		wait_for "$RECOVERY_BOUND" answer_has "$FAULT_SAFE_POD" '"allowed":true'
	change_reflected "restarted after 410"
}
