#!/usr/bin/env bash
# HTTPS throughput of `longhorn-guard serve --state` side by side with a static-answer rustls
# server on the same stack (`make bench-https`, docs/scale.md). All are measured in the same run
# with wrk, 64 kept-alive connections, the same instance-manager eviction AdmissionReview body,
# for two cases: the eviction of the storage node's instance manager (an allow that looks at
# every replica there) and of the first node's (a denial: exactly BENCH_HTTPS_DENIED volumes
# are attached there, each stranded by its running engine; the message lists 5).
#
#   make bench-https                     # 60 nodes x 3,000 volumes, 10s per server and round
#   BENCH_HTTPS_NODES=30 BENCH_HTTPS_VOLUMES=10000 BENCH_HTTPS_DURATION=20s make bench-https
#
# Knobs: BENCH_HTTPS_NODES (60), BENCH_HTTPS_VOLUMES (3000), BENCH_HTTPS_DENIED (50: volumes
# stranded by the denial; 300 at 10,000 volumes), BENCH_HTTPS_CONNECTIONS (64),
# BENCH_HTTPS_THREADS (2: wrk threads), BENCH_HTTPS_DURATION (10s per server and round),
# BENCH_HTTPS_ROUNDS (3: rounds of the six runs), BENCH_HTTPS_PORT (18461; the
# static servers get the next four ports), LONGHORN_GUARD_BIN and BENCH_EXAMPLES (release builds).
# A second static server answers with longhorn-guard's own denial bytes, so the denial is
# compared with a server sending the same answer; two more (`--parse`) first parse each body as
# longhorn-guard does, then answer an allow for its uid or the denial's bytes: the floor of any
# webhook that reads its request, beside each case. Prints one table (requests/s, p50, p99 and the
# server's CPU time per request, per round, server and case), then each round's ratios and their
# median: longhorn-guard / static server per case (requests/s, and CPU time per request), the
# parse's own cost (static-parse / static) and all the rest (longhorn-guard / static-parse).
# Exit status: 0 measured, 2 could not run.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${LONGHORN_GUARD_BIN:-$ROOT/target/release/longhorn-guard}
EXAMPLES=${BENCH_EXAMPLES:-$ROOT/target/release/examples}
NODES=${BENCH_HTTPS_NODES:-60}
VOLUMES=${BENCH_HTTPS_VOLUMES:-3000}
DENIED=${BENCH_HTTPS_DENIED:-50}
CONNECTIONS=${BENCH_HTTPS_CONNECTIONS:-64}
THREADS=${BENCH_HTTPS_THREADS:-2}
DURATION=${BENCH_HTTPS_DURATION:-10s}
ROUNDS=${BENCH_HTTPS_ROUNDS:-3}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { printf "bench-https: BENCH_HTTPS_ROUNDS must be a whole number from 1, not %s\n" "$ROUNDS" >&2; exit 2; }
PORT=${BENCH_HTTPS_PORT:-18461}
STATIC_PORT=$((PORT + 1))
STATIC_DENY_PORT=$((PORT + 2))
STATIC_PARSE_PORT=$((PORT + 3))
STATIC_PARSE_DENY_PORT=$((PORT + 4))
FIXTURE=$ROOT/../shared/fixtures/admission/eviction-create.json

die() {
	printf 'bench-https: %s\n' "$*" >&2
	exit 2
}
for tool in wrk curl; do command -v "$tool" >/dev/null || die "$tool not found (Debian: apt-get install $tool)"; done
for b in "$BIN" "$EXAMPLES/gen_snapshot" "$EXAMPLES/static_server"; do
	[ -x "$b" ] || die "$b not found (make bench-https builds it)"
done
[ -f "$FIXTURE" ] || die "eviction fixture not found at $FIXTURE"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/longhorn-guard-bench-https.XXXXXX")
PIDS=()
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$BIN" certs --out "$WORK/certs" --ip 127.0.0.1 >/dev/null || die "longhorn-guard certs failed"
"$EXAMPLES/gen_snapshot" --nodes "$NODES" --volumes "$VOLUMES" --first-node-engines "$DENIED" \
	--out "$WORK/state.json" || die "gen_snapshot failed"
# The last node holds replicas and no engine (src/synthetic.rs): its eviction is an allow that
# has to look at every replica on the node.
pod=$(printf 'instance-manager-5ca1e%027x' $((NODES - 1)))
sed "s/instance-manager-7b9c5d2e1f3a/$pod/g" "$FIXTURE" >"$WORK/body.json"
# The first node runs the engines of volumes 0 to DENIED - 1: its eviction is denied for them.
deny_pod=$(printf 'instance-manager-5ca1e%027x' 0)
sed "s/instance-manager-7b9c5d2e1f3a/$deny_pod/g" "$FIXTURE" >"$WORK/deny.json"
cat >"$WORK/post.lua" <<'LUA'
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
LUA

LONGHORN_GUARD_LOG=warn "$BIN" serve --tls-dir "$WORK/certs" --listen "127.0.0.1:$PORT" \
	--state "$WORK/state.json" >"$WORK/guard.log" 2>&1 &
PIDS+=($!)
GUARD_PID=$!
"$EXAMPLES/static_server" --tls-dir "$WORK/certs" --listen "127.0.0.1:$STATIC_PORT" >"$WORK/static.log" 2>&1 &
PIDS+=($!)
STATIC_PID=$!
post() { curl -sf --cacert "$WORK/certs/ca.crt" -H 'Content-Type: application/json' --data-binary "@${2:-$WORK/body.json}" "$1"; }
for _ in $(seq 1 600); do
	post "https://127.0.0.1:$PORT/validate" >/dev/null 2>&1 && post "https://127.0.0.1:$STATIC_PORT/validate" >/dev/null 2>&1 && break
	sleep 0.1
done
answer=$(post "https://127.0.0.1:$PORT/validate") || { cat "$WORK/guard.log" >&2; die "longhorn-guard did not answer"; }
grep -q '"allowed":true' <<<"$answer" || die "expected an allow from longhorn-guard, got: $answer"
denial=$(post "https://127.0.0.1:$PORT/validate" "$WORK/deny.json") || die "longhorn-guard did not answer the denial case"
grep -q '"allowed":false' <<<"$denial" || die "expected a denial from longhorn-guard, got: $denial"
stranded=$(grep -o 'would strand [0-9]* volume' <<<"$denial" | grep -o '[0-9]*' || true)
[ "$stranded" = "$DENIED" ] || die "expected the denial to strand $DENIED volumes, it says ${stranded:-nothing}: $denial"
printf '%s' "$denial" >"$WORK/denial.json"
# start_static PORT LOG ARG...: starts static_server on PORT with ARG..., logging to LOG; waits
# until it answers (its PID in STARTED).
start_static() {
	local port=$1 log=$2
	shift 2
	"$EXAMPLES/static_server" --tls-dir "$WORK/certs" --listen "127.0.0.1:$port" "$@" >"$WORK/$log" 2>&1 &
	PIDS+=($!)
	STARTED=$!
	for _ in $(seq 1 600); do
		post "https://127.0.0.1:$port/validate" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
}
start_static "$STATIC_DENY_PORT" static-deny.log --answer "$WORK/denial.json"
STATIC_DENY_PID=$STARTED
post "https://127.0.0.1:$STATIC_DENY_PORT/validate" | grep -q '"allowed":false' || die "static_server --answer did not answer"
post "https://127.0.0.1:$STATIC_PORT/validate" >/dev/null || die "static_server did not answer"
# The floor of any webhook that reads its request: parse as longhorn-guard does, then answer an
# allow for its uid, or longhorn-guard's denial.
start_static "$STATIC_PARSE_PORT" static-parse.log --parse
STATIC_PARSE_PID=$STARTED
post "https://127.0.0.1:$STATIC_PARSE_PORT/validate" | grep -q '"allowed":true' || die "static_server --parse did not answer an allow"
start_static "$STATIC_PARSE_DENY_PORT" static-parse-deny.log --parse --answer "$WORK/denial.json"
STATIC_PARSE_DENY_PID=$STARTED
post "https://127.0.0.1:$STATIC_PARSE_DENY_PORT/validate" "$WORK/deny.json" | grep -q '"allowed":false' ||
	die "static_server --parse --answer did not answer the denial"

# cpu PID: the process's user + system CPU time so far, in clock ticks.
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# measure NAME URL BODY PID: one wrk run; prints "NAME req/s p50 p99 cpu", cpu being the
# server's CPU time per request in microseconds (steadier than req/s on a shared machine).
measure() {
	local out rps p50 p99 n c0 c1 body=$3
	BENCH_BODY="$body" wrk -t1 -c4 -d2s -s "$WORK/post.lua" "$2" >/dev/null 2>&1 || true # warm-up
	c0=$(cpu "$4")
	out=$(BENCH_BODY="$body" wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$WORK/post.lua" "$2") ||
		die "wrk failed against $1"
	c1=$(cpu "$4")
	if grep -q 'Non-2xx' <<<"$out"; then die "$1 answered non-2xx: $(grep Non-2xx <<<"$out")"; fi
	rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
	p50=$(awk '$1 == "50%" { print $2 }' <<<"$out")
	p99=$(awk '$1 == "99%" { print $2 }' <<<"$out")
	n=$(awk '/requests in/ { print $1 }' <<<"$out")
	printf '%s %s %s %s %s\n' "$1" "$rps" "$p50" "$p99" \
		"$(awk -v c=$((c1 - c0)) -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", (n > 0 ? c * 1e6 / hz / n : 0) }')"
}
echo "bench-https: $NODES nodes, $VOLUMES volumes; POST /validate eviction of $pod (allow) and of $deny_pod (deny, strands ${stranded:-?} volumes); wrk $THREADS threads, $CONNECTIONS connections, $DURATION each, $ROUNDS rounds; $(nproc) CPUs"
# Each round measures the six runs back to back, so each ratio compares runs seconds
# apart; the machine's drift between rounds (±10 % on a shared VM) does not enter a ratio.
printf '%-6s %-18s %12s %10s %10s %14s\n' round server "requests/s" p50 p99 "CPU us/request"
# ratio GUARD STATIC: the req/s ratio of two rows, in percent.
ratio() {
	awk -v g="$(cut -d' ' -f2 <<<"$1")" -v s="$(cut -d' ' -f2 <<<"$2")" 'BEGIN { if (s > 0) printf "%.1f", 100 * g / s }'
}
# cpu_ratio GUARD STATIC: the static server's CPU time per request over longhorn-guard's, in
# percent (100: the same cost).
cpu_ratio() {
	awk -v g="$(cut -d' ' -f5 <<<"$1")" -v s="$(cut -d' ' -f5 <<<"$2")" 'BEGIN { if (g > 0) printf "%.1f", 100 * s / g }'
}
allow_ratios=()
deny_ratios=()
allow_cpu=()
deny_cpu=()
parse_ratios=()
beyond_parse=()
deny_parse_ratios=()
deny_beyond_parse=()
for round in $(seq 1 "$ROUNDS"); do
	static=$(measure static-allow "https://127.0.0.1:$STATIC_PORT/validate" "$WORK/body.json" "$STATIC_PID")
	static_parse=$(measure static-parse "https://127.0.0.1:$STATIC_PARSE_PORT/validate" "$WORK/body.json" "$STATIC_PARSE_PID")
	guard=$(measure guard-allow "https://127.0.0.1:$PORT/validate" "$WORK/body.json" "$GUARD_PID")
	static_deny=$(measure static-deny "https://127.0.0.1:$STATIC_DENY_PORT/validate" "$WORK/deny.json" "$STATIC_DENY_PID")
	static_parse_deny=$(measure static-parse-deny "https://127.0.0.1:$STATIC_PARSE_DENY_PORT/validate" "$WORK/deny.json" "$STATIC_PARSE_DENY_PID")
	deny=$(measure guard-deny "https://127.0.0.1:$PORT/validate" "$WORK/deny.json" "$GUARD_PID")
	for row in "$static" "$static_parse" "$guard" "$static_deny" "$static_parse_deny" "$deny"; do
		# shellcheck disable=SC2086 # the row's words are the columns
		printf '%-6s %-18s %12s %10s %10s %14s\n' "$round" $row
	done
	allow_ratios+=("$(ratio "$guard" "$static")")
	deny_ratios+=("$(ratio "$deny" "$static_deny")")
	allow_cpu+=("$(cpu_ratio "$guard" "$static")")
	parse_ratios+=("$(ratio "$static_parse" "$static")")
	beyond_parse+=("$(ratio "$guard" "$static_parse")")
	deny_parse_ratios+=("$(ratio "$static_parse_deny" "$static_deny")")
	deny_beyond_parse+=("$(ratio "$deny" "$static_parse_deny")")
	deny_cpu+=("$(cpu_ratio "$deny" "$static_deny")")
done
# summary NAME RATIO...: the rounds' ratios and their median.
summary() {
	local name=$1
	shift
	printf '%s\n' "$@" | sort -n | awk -v name="$name" '{ r[NR] = $1; all = all (NR > 1 ? ", " : "") $1 }
		END { m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2; printf "%s: median %.1f %% (rounds, sorted: %s %%)\n", name, m, all }'
}
summary "ratio guard-allow / static-allow" "${allow_ratios[@]}"
summary "ratio guard-deny / static-deny" "${deny_ratios[@]}"
summary "CPU per request, static-allow / guard-allow" "${allow_cpu[@]}"
summary "CPU per request, static-deny / guard-deny" "${deny_cpu[@]}"
summary "ratio static-parse / static-allow (the parse's own cost)" "${parse_ratios[@]}"
summary "ratio guard-allow / static-parse (all but the parse)" "${beyond_parse[@]}"
summary "ratio static-parse-deny / static-deny (the parse's own cost)" "${deny_parse_ratios[@]}"
summary "ratio guard-deny / static-parse-deny (all but the parse)" "${deny_beyond_parse[@]}"
