# Scenario u of the real-Longhorn suite (issue 45, point 6): Longhorn upgraded underneath
# longhorn-guard, from LH_VERSION to LH_UP_VERSION (suite.sh: LONGHORN_UPGRADE_SRC and
# LONGHORN_UPGRADE_BIN_DIR), the way Longhorn documents it for a kubectl install:
#   u0. volumes of 2 and 3 replicas, attached (no frontend) and detached;
#   u1. Longhorn's pre-upgrade check (`longhorn-manager pre-upgrade`, what Helm's pre-upgrade
#       Job runs; a kubectl install has none), as a pod of the new manager image;
#   u2. kubectl apply of the new deploy/longhorn.yaml (lh.py's cut, the new images); every
#       manager restarts at once (its DaemonSet's maxUnavailable is 100%), and the new managers
#       make an instance manager of the new image on each node beside the old one, which keeps
#       running while its engines and replicas do;
#   u3. while that rolls, `kubectl drain` of the node running an attached volume's engine, with
#       kubectl's own retry on 429, bounded (UP_DRAIN_S); when the guard names a volume whose
#       engine runs there, the drainer moves that volume's attachment to another node, as a
#       rescheduled workload would; then the node is uncordoned;
#   u4. the mixed-version cluster: both versions' instance managers, `check cluster` on it;
#   u5. the gate on the new instance managers (with a storage network: each carries it and
#       passes; without one it adds nothing, docs/init-gate.md);
#   u6. each attached volume's engine upgraded (its Volume's spec.image set to the new engine
#       image; Longhorn makes a matching replica per data path and swaps them live);
#   u7. what was refused, and by whom: the guard's decision events (its pods' logs, followed
#       for the whole scenario since a drain deletes a guard pod with its log), the managers'
#       logs and the Warning events; and every volume's state, robustness and usable replicas
#       sampled once a second from u0's end to u6's, so an allow that stranded data would show.
# One alone, on a cluster `up` made with both versions (the same settings for `up` and `checks`):
#   e2e/cluster.sh checks longhorn_up install_guard check_upgrade
# Every lookup prints nothing rather than failing (value, matching, jp), every wait is bounded,
# and every background loop stops by itself after UP_MAX_S. Sourced; needs the helpers of
# longhorn.sh, drains.sh and seedrace.sh (tl, has_gate, gate_exit, other_node).

UP_DRAIN_S=${UP_DRAIN_S:-600}
UP_ROLL_S=${UP_ROLL_S:-900}
UP_HEAL_S=${UP_HEAL_S:-900}
UP_ENGINE_S=${UP_ENGINE_S:-900}
UP_MAX_S=${UP_MAX_S:-5400}
UP_ATTACHED=(vol-u2a vol-u3a)
UP_DETACHED=(vol-u2d vol-u3d)
UP_LOGS=${DIR:-/tmp}/upgrade-logs
LH_SA_USER="system:serviceaccount:$LH_NS:longhorn-service-account"

up_vols() { printf '%s\n' "${UP_ATTACHED[@]}" "${UP_DETACHED[@]}"; }
up_size() { case $1 in *2?) echo 2 ;; *) echo 3 ;; esac; }
# up_stopped: the stop file is there, or the script that started the loop is gone.
up_stopped() { [ -f "$UP_LOGS/stop" ] || ! kill -0 "$$" 2>/dev/null; }

# up_sample: one line per volume of scenario u: "T VOLUME STATE/ROBUSTNESS USABLE NODES FROM", T
# in seconds from T0; USABLE counts the replicas that hold its data now: for an attached volume
# those RW in its engine's replica mode map (FROM "map"; while the engine reports no map, as
# when it starts or swaps to upgraded replicas, those healthy, not failed and running: FROM
# "replicas"), for any other those healthy, not failed and not being deleted (FROM "replicas").
# Nothing when the API server does not answer.
UP_SAMPLE_PY='
import json, sys, time
try:
    items = json.load(sys.stdin)["items"]
except (ValueError, KeyError):
    sys.exit(0)
t = time.time() - float(sys.argv[1])
vols = {o["metadata"]["name"]: o for o in items if o["kind"] == "Volume" and o["metadata"]["name"].startswith("vol-u")}
reps, engs = {}, {}
for o in items:
    v = (o.get("spec") or {}).get("volumeName", "")
    if o["kind"] == "Replica":
        reps.setdefault(v, []).append(o)
    elif o["kind"] == "Engine" and (o.get("spec") or {}).get("active", True):
        engs[v] = o
for name in sorted(vols):
    st = vols[name].get("status") or {}
    state = st.get("state") or "-"
    modes = ((engs.get(name) or {}).get("status") or {}).get("replicaModeMap") or {}
    by_map = state == "attached" and bool(modes)
    usable = []
    for r in reps.get(name, []):
        sp, rs = r.get("spec") or {}, r.get("status") or {}
        if by_map:
            ok = modes.get(r["metadata"]["name"]) == "RW"
        else:
            ok = bool(sp.get("healthyAt")) and not sp.get("failedAt") and not r["metadata"].get("deletionTimestamp")
            ok = ok and (state != "attached" or rs.get("currentState") == "running")
        if ok:
            usable.append(sp.get("nodeID") or "?")
    print("%.1f %s %s/%s %d %s %s" % (t, name, state, st.get("robustness") or "-", len(usable),
                                      ",".join(sorted(usable)) or "-", "map" if by_map else "replicas"))
'
up_sample() {
	value lhk get volumes.longhorn.io,replicas.longhorn.io,engines.longhorn.io -o json | python3 -c "$UP_SAMPLE_PY" "$T0"
}
# up_sampler: up_sample once a second into $UP_LOGS/samples until stopped or UP_MAX_S.
up_sampler() {
	local end=$((SECONDS + UP_MAX_S))
	while ! up_stopped && [ "$SECONDS" -lt "$end" ]; do
		up_sample >>"$UP_LOGS/samples" || true
		sleep 1
	done
}
# up_followers: every Running pod of the guard and of Longhorn's managers gets its log
# streamed into $UP_LOGS/KIND-POD.log from UP_SINCE, each stream bounded by UP_MAX_S; the
# pids go to $UP_LOGS/pids (up_stop ends them).
up_followers() {
	local end=$((SECONDS + UP_MAX_S)) spec ns sel kind pod
	while ! up_stopped && [ "$SECONDS" -lt "$end" ]; do
		for spec in "guard|$GUARD_NS|$GUARD_SEL" "manager|$LH_NS|app=longhorn-manager"; do
			IFS='|' read -r kind ns sel <<<"$spec"
			for pod in $(value k -n "$ns" get pods -l "$sel" --field-selector=status.phase=Running -o jsonpath='{.items[*].metadata.name}'); do
				[ ! -e "$UP_LOGS/$kind-$pod.log" ] || continue
				timeout "$UP_MAX_S" "$KUBECTL" -n "$ns" logs -f --since-time="$UP_SINCE" "$pod" >"$UP_LOGS/$kind-$pod.log" 2>&1 &
				echo "$!" >>"$UP_LOGS/pids"
			done
		done
		sleep 2
	done
}
up_start() {
	rm -rf "$UP_LOGS"
	mkdir -p "$UP_LOGS"
	: >"$UP_LOGS/samples"
	: >"$UP_LOGS/pids"
	UP_SINCE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	up_sampler &
	UP_SAMPLER=$!
	up_followers &
	UP_FOLLOWERS=$!
}
# up_stop: the sampler and the follower loop end at the stop file; the log streams by their pids.
up_stop() {
	local p
	touch "$UP_LOGS/stop"
	wait "$UP_SAMPLER" 2>/dev/null || true
	wait "$UP_FOLLOWERS" 2>/dev/null || true
	sleep 3 # the last lines of each stream
	while read -r p; do [ -z "$p" ] || stop_pid "$p" TERM 5; done <"$UP_LOGS/pids"
}

# up_usable VOLUME: its usable replica count in a fresh sample (nothing when unanswered).
up_usable() { up_sample | awk -v v="$1" '$2 == v {print $4}'; }
# up_state_ok VOLUME: attached/healthy for the attached ones, detached with every replica usable
# for the others.
up_state_ok() {
	local line
	line=$(up_sample | awk -v v="$1" '$2 == v')
	case " ${UP_ATTACHED[*]} " in
	*" $1 "*) [ "$(awk '{print $3}' <<<"$line")" = attached/healthy ] ;;
	*) [[ "$(awk '{print $3}' <<<"$line")" == detached/* ]] && [ "$(awk '{print $4}' <<<"$line")" = "$(up_size "$1")" ] ;;
	esac
}
up_all_ok() {
	local v
	for v in $(up_vols); do up_state_ok "$v" || return 1; done
}
# up_attach_retry VOLUME NODE / up_detach_retry VOLUME: the attachment ticket written, retried
# while Longhorn's own webhook is down (it fails closed while every manager restarts).
up_attach_retry() { wait_for 120 lh_attach "$1" "$2"; }
up_detach_retry() { wait_for 120 lh_detach "$1"; }
# up_move VOLUME NODE: VOLUME's attachment moved to NODE, as a rescheduled workload's would be.
up_move() {
	up_detach_retry "$1" || fail "u3: $1's ticket removed"
	wait_for 180 vol_is "$1" detached/unknown || true
	up_attach_retry "$1" "$2" || fail "u3: $1's ticket written for $2"
}

# up_ims: "NAME NODE VERSION STATE ENGINES REPLICAS POD" per InstanceManager, VERSION the tag of
# its image, POD the phase of its pod (or "none").
up_ims() {
	local pods
	pods=$(value lhk get pods -l longhorn.io/component=instance-manager -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase}{"\n"}{end}')
	value lhk get instancemanagers.longhorn.io -o json | python3 -c '
import json, sys
try:
    items = json.load(sys.stdin)["items"]
except (ValueError, KeyError):
    items = []
pods = dict(l.split("=", 1) for l in sys.argv[1].split() if "=" in l)
for im in sorted(items, key=lambda o: (o["spec"].get("nodeID", ""), o["metadata"]["name"])):
    st = im.get("status") or {}
    name = im["metadata"]["name"]
    print(name, im["spec"].get("nodeID") or "-", (im["spec"].get("image") or "-").rsplit(":", 1)[-1],
          st.get("currentState") or "-", len(st.get("instanceEngines") or {}), len(st.get("instanceReplicas") or {}),
          pods.get(name, "none"))' "$pods"
}
# up_new_ims_running: an instance manager of the new image running, with a Running pod, on every node.
up_new_ims_running() {
	[ "$(up_ims | awk -v v="$LH_UP_VERSION" '$3 == v && $4 == "running" && $7 == "Running" && !($2 in n) {n[$2] = 1; c++} END {print c + 0}')" = "$NODES" ]
}
up_managers_new() {
	local images
	images=$(value lhk get pods -l app=longhorn-manager -o jsonpath='{range .items[*]}{.spec.containers[0].image}{" "}{.status.phase}{"\n"}{end}')
	[ "$(awk -v i="$LH_UP_MANAGER_IMAGE" '$1 == i && $2 == "Running"' <<<"$images" | wc -l)" = "$NODES" ] &&
		[ "$(awk -v i="$LH_UP_MANAGER_IMAGE" '$1 != i' <<<"$images" | wc -l)" = 0 ] && managers_ready
}
up_version_is() { [ "$(jp settings.longhorn.io current-longhorn-version '{.value}')" = "$1" ]; }
up_engine_image_deployed() {
	[ "$(value lhk get engineimages.longhorn.io -o jsonpath='{range .items[*]}{.spec.image}={.status.state}{"\n"}{end}' |
		awk -F= -v i="$LH_UP_ENGINE_IMAGE" '$1 == i {print $2}')" = deployed ]
}
up_rolled() { up_managers_new && up_version_is "$LH_UP_VERSION" && up_engine_image_deployed && up_new_ims_running; }

# up_gate_passed POD: POD carries the guard's init gate, which exited 0; up_no_gate POD: it has none.
up_gate_passed() { has_gate "$1" && [ "$(gate_exit "$1")" = 0 ]; }
up_no_gate() { ! has_gate "$1"; }
# up_engine_upgraded VOLUME: Longhorn reports the new engine image current and the volume healthy.
up_engine_upgraded() {
	[ "$(jp volumes.longhorn.io "$1" '{.status.currentImage}')" = "$LH_UP_ENGINE_IMAGE" ] && vol_is "$1" attached/healthy
}
# up_set_image VOLUME: spec.image set to the new engine image; a refusal's text is kept in
# our-refused, the warnings the write got (kubectl's "Warning: " lines) in our-warnings.
up_set_image() {
	local rc=0 err
	err=$(lhk patch volumes.longhorn.io "$1" --type merge -p "{\"spec\":{\"image\":\"$LH_UP_ENGINE_IMAGE\"}}" 2>&1 >/dev/null) || rc=$?
	matching '^Warning: ' <<<"$err" >>"$UP_LOGS/our-warnings"
	[ "$rc" = 0 ] || matching -v '^Warning: ' <<<"$err" >>"$UP_LOGS/our-refused"
	return "$rc"
}

up_preupgrade_done() {
	case $(jp pod longhorn-pre-upgrade '{.status.phase}') in Succeeded | Failed) return 0 ;; esac
	return 1
}
# up_preupgrade_passed PHASE: the pod ended Succeeded and Longhorn's event ($OUT) says it passed.
up_preupgrade_passed() { [ "$1" = Succeeded ] && has PassedUpgradeCheck; }
# up_preupgrade: `longhorn-manager pre-upgrade` of the new version as Helm's pre-upgrade Job
# runs it (its ServiceAccount, privileged, the host's /proc), one pod, bounded.
up_preupgrade() {
	local phase
	lhk delete pod longhorn-pre-upgrade --ignore-not-found --wait=false >/dev/null 2>&1 || true
	wait_for 30 gone -n "$LH_NS" get pod longhorn-pre-upgrade || true
	k apply -f - >/dev/null <<-EOF || fail "u1: the pre-upgrade pod is created"
		apiVersion: v1
		kind: Pod
		metadata: {name: longhorn-pre-upgrade, namespace: $LH_NS}
		spec:
		  serviceAccountName: longhorn-service-account
		  restartPolicy: Never
		  nodeSelector: {kubernetes.io/hostname: node-1}
		  containers:
		  - name: longhorn-pre-upgrade
		    image: $LH_UP_MANAGER_IMAGE
		    imagePullPolicy: Never
		    securityContext: {privileged: true}
		    command: [longhorn-manager, pre-upgrade]
		    env: [{name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}]
		    volumeMounts: [{name: proc, mountPath: /host/proc/}]
		  volumes: [{name: proc, hostPath: {path: /proc/}}]
	EOF
	wait_for 180 up_preupgrade_done || true
	phase=$(jp pod longhorn-pre-upgrade '{.status.phase}')
	value lhk logs longhorn-pre-upgrade | matching -E 'level=(info|warning|error|fatal)' | sed -nE 's/.*msg="([^"]*)".*/\1/p' |
		sed -n 1,12p | cut -c1-200 | sed 's/^/    pre-upgrade: /'
	OUT=$(value lhk get events --field-selector involvedObject.name=longhorn-pre-upgrade -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}')
	printf '%s\n' "$OUT" | sed '/^$/d; s/^/    event: /'
	tl "u1. longhorn-manager $LH_UP_VERSION pre-upgrade: pod $phase; events: $(tr '\n' ';' <<<"$OUT" | cut -c1-200)"
	check "u1: Longhorn $LH_UP_VERSION's pre-upgrade check passes on $LH_VERSION (pod $phase)" \
		up_preupgrade_passed "$phase"
	lhk delete pod longhorn-pre-upgrade --ignore-not-found --wait=false >/dev/null 2>&1 || true
}

# up_check_cluster WHEN: GUARD_BIN check cluster against the live cluster, printed and checked.
up_check_cluster() {
	run "$GUARD_BIN" check cluster
	tl "$1: check cluster exit $RC: $(matching -ciE 'warn|fail' <<<"$OUT") lines warn or fail"
	check "$1: check cluster on the mixed-version cluster: exit 0 or 1, nothing unreadable" \
		all 'rc_not 2' 'lacks unreadable' 'lacks "cannot read"' 'lacks "not readable"'
}

# up_drain NODE: kubectl drain NODE in the background (kubectl retries each 429 every 5 s, up to
# UP_DRAIN_S); each attached volume the guard names while its engine runs on NODE is moved to
# another node. Sets UP_DRAIN_RC and UP_DRAIN_S_TOOK.
up_drain() {
	local node=$1 log=$UP_LOGS/drain.log moved=" " t0 pid v y
	: >"$log"
	t0=$(now_s)
	k drain "$node" --ignore-daemonsets --delete-emptydir-data --timeout="${UP_DRAIN_S}s" >"$log" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		for v in "${UP_ATTACHED[@]}"; do
			[[ $moved != *" $v "* ]] || continue
			grep -qF -- "$v:" "$log" || continue
			[ "$(jp volumes.longhorn.io "$v" '{.status.currentNodeID}')" = "$node" ] || continue
			y=$(other_node "$node")
			tl "u3. the guard named $v, whose engine runs on $node: its attachment moves to $y"
			up_move "$v" "$y"
			moved+="$v "
		done
		sleep 2
	done
	wait "$pid" && UP_DRAIN_RC=0 || UP_DRAIN_RC=$?
	UP_DRAIN_S_TOOK=$(secs "$t0" "$(now_s)")
	UP_MOVED=$(xargs <<<"$moved")
	UP_MOVED=${UP_MOVED:-none}
}
# up_drain_report: what kubectl printed: the guard's refusals (each distinct volume line once,
# with its count), the budgets' refusals, and the evictions.
up_drain_report() {
	local log=$UP_LOGS/drain.log
	UP_DRAIN_GUARD=$(matching -c 'longhorn-guard:' "$log")
	UP_DRAIN_PDB=$(matching -c 'disruption budget' "$log")
	matching -E '^- |longhorn-guard: |disruption budget' "$log" | sed -E 's/.*(longhorn-guard: [^:]*).*/\1/' |
		sort | uniq -c | sort -rn | sed -n 1,12p | cut -c1-300 | sed 's/^/      kubectl: /'
	matching -E '^(pod|evicting pod)' "$log" | sort | uniq -c | sed -n 1,12p | sed 's/^/      kubectl: /'
}

# up_guard_decisions: the guard's decision events of the scenario, from its pods' logs:
# every denial grouped by rule, user, resource and reason, then "TOTAL denied=N longhorn=N
# trusted_users=N warned=N", longhorn counting denials of Longhorn's own ServiceAccount.
UP_GUARD_PY='
import collections, glob, json, sys
lh, groups, seen = sys.argv[1], collections.Counter(), set()
denied = by_lh = warned = 0
for path in sorted(glob.glob(sys.argv[2] + "/guard-*.log")):
    for line in open(path, errors="replace"):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        f = e.get("fields") or e
        msg = f.get("message", "")
        if not msg.startswith("admission"):
            continue
        key = (f.get("uid"), msg)
        if key in seen:
            continue
        seen.add(key)
        if msg == "admission denied":
            denied += 1
            by_lh += f.get("user") == lh
            groups[(f.get("rule"), f.get("user"), f.get("resource"), f.get("code"), (f.get("reason") or "")[:220])] += 1
        elif f.get("warnings", 0):
            warned += 1
for (rule, user, res, code, reason), n in groups.most_common(20):
    print("%5d rule=%s user=%s resource=%s code=%s reason=%s" % (n, rule, user, res, code, reason))
print("TOTAL denied=%d longhorn=%d warned=%d" % (denied, by_lh, warned))
'
up_guard_decisions() { python3 -c "$UP_GUARD_PY" "$LH_SA_USER" "$UP_LOGS"; }

# up_lh_refusals: lines of the managers' logs (all of them, the old version's included) that
# say a request was refused, grouped by message; then "TOTAL refused=N guard=N".
up_lh_refusals() {
	local all guard
	all=$(value cat "$UP_LOGS"/manager-*.log | matching -E 'denied the request|is forbidden|[Ff]orbidden|TooManyRequests|Too Many Requests|Cannot evict|admission webhook')
	guard=$(value cat "$UP_LOGS"/manager-*.log | matching -c 'longhorn-guard')
	python3 -c '
import collections, re, sys
groups = collections.Counter()
for line in filter(str.strip, sys.stdin):
    m, e = re.search(r"msg=\"((?:[^\"\\]|\\.)*)\"", line), re.search(r"error=\"((?:[^\"\\]|\\.)*)\"", line)
    groups[((m.group(1) if m else line.strip())[:120], (e.group(1) if e else "")[:160])] += 1
for (m, e), n in groups.most_common(12):
    print("%5d %s%s" % (n, m, " error=" + e if e else ""))' <<<"$all"
	echo "TOTAL refused=$(sed '/^$/d' <<<"$all" | wc -l) guard=$guard"
}
# up_warning_events: Warning events since UP_SINCE in every namespace, grouped by reason and
# message; then "TOTAL events=N guard=N read=0|1" (guard: those naming longhorn-guard about an
# object outside its own namespace; read: the list was answered).
up_warning_events() {
	value k get events -A --field-selector type=Warning -o json | python3 -c '
import collections, json, sys
try:
    items, read = json.load(sys.stdin)["items"], 1
except (ValueError, KeyError):
    items, read = [], 0
since, guard_ns, groups, guard = sys.argv[1], sys.argv[2], collections.Counter(), 0
for e in items:
    t = e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp") or ""
    if t[:19] < since[:19]:
        continue
    msg = (e.get("message") or "").replace("\n", " ")
    o = e.get("involvedObject") or {}
    # Events about the pods of the guard name them (the harness has no cluster DNS: every pod
    # gets MissingClusterDNS); only an event about another object naming the guard is a refusal.
    guard += "longhorn-guard" in msg and o.get("namespace") != guard_ns
    groups[(o.get("namespace") or "-", o.get("kind"), e.get("reason"), msg[:200])] += e.get("count") or 1
for (ns, kind, reason, msg), n in groups.most_common(15):
    print("%5d %s %s %s: %s" % (n, ns, kind, reason, msg))
print("TOTAL events=%d guard=%d read=%d" % (sum(groups.values()), guard, read))' "$UP_SINCE" "$GUARD_NS"
}

# up_samples_report: per volume from $UP_LOGS/samples: samples, seconds degraded, faulted
# samples, samples with no usable replica, the longest gap between samples; then
# "TOTAL samples=N faulted=N unusable=N unusable_after_drain=N gap=S" (after_drain: from
# UP_T_DRAINED on, in seconds from T0).
up_samples_report() {
	python3 - "$UP_LOGS/samples" "${UP_T_DRAINED:-1e9}" <<-'EOF'
		import collections, sys
		rows = collections.defaultdict(list)
		for line in open(sys.argv[1]):
		    p = line.split()
		    if len(p) >= 5:
		        rows[p[1]].append((float(p[0]), p[2], int(p[3])))
		after, tot = float(sys.argv[2]), collections.Counter()
		gap = 0.0
		for v, rs in sorted(rows.items()):
		    degraded = faulted = unusable = late = 0
		    for i, (t, st, n) in enumerate(rs):
		        dt = rs[i + 1][0] - t if i + 1 < len(rs) else 0.0
		        gap = max(gap, dt)
		        degraded += dt if st.endswith("/degraded") else 0
		        faulted += st.endswith("/faulted")
		        unusable += n == 0
		        late += n == 0 and t >= after
		    print("%s: %d samples %.0f-%.0f s, degraded %.0f s, faulted %d, no usable replica %d (after the drain %d), usable now %d" % (
		        v, len(rs), rs[0][0], rs[-1][0], degraded, faulted, unusable, late, rs[-1][2]))
		    tot.update(samples=len(rs), faulted=faulted, unusable=unusable, late=late)
		print("TOTAL samples=%d faulted=%d unusable=%d unusable_after_drain=%d gap=%.1f" % (
		    tot["samples"], tot["faulted"], tot["unusable"], tot["late"], gap))
	EOF
}
# up_total KEY TEXT: the value of KEY=N on TEXT's TOTAL line, or nothing; up_zero KEY TEXT:
# it is 0; up_some KEY TEXT: it is more than 0. None holds on a text without that line.
up_total() { sed -n "s/^TOTAL .*\\b$1=\\([0-9.]*\\).*/\\1/p" <<<"$2"; }
up_zero() { [ "$(up_total "$1" "$2")" = 0 ]; }
up_some() { local n; n=$(up_total "$1" "$2"); [ -n "$n" ] && [ "${n%.*}" -gt 0 ]; }
# up_clean KEY TEXT WHAT N: KEY is 0 on TEXT's TOTAL line, and the evidence was read: WHAT
# (a key of the same line, or "files") is at least N.
up_clean() {
	if [ "$3" = files ]; then [ "$4" -ge 1 ] || return 1; else up_some "$3" "$2" || return 1; fi
	up_zero "$1" "$2"
}
# up_view_counts: view_counts, on metrics that hold the guard's view counts.
up_view_counts() { view_counts 2>/dev/null && has longhorn_guard_cluster_view_objects; }

check_upgrade() {
	local v i t_apply t_drained t_rolled t_healed t_engines out total storage pods pod ok n
	SCEN=upgrade
	T0=$(now_s)
	: >"$DIR/timeline-$SCEN"
	log "u. Longhorn $LH_VERSION upgraded to $LH_UP_VERSION under longhorn-guard: a drain during the roll, then each attached volume's engine"
	if ! upgrade_on || [ "$LH_UP_VERSION" = unknown ]; then
		fail "u: LONGHORN_UPGRADE_SRC and LONGHORN_UPGRADE_BIN_DIR name the version to upgrade to"
		return 0
	fi
	check "u0: Longhorn $LH_VERSION runs before the upgrade (current-longhorn-version)" up_version_is "$LH_VERSION"
	lh_setting node-drain-policy block-if-contains-last-replica
	# u0. The volumes: each attached once so that its replicas exist and have run.
	for v in $(up_vols); do lh_volume "$v" "$(up_size "$v")" 268435456; done
	for v in $(up_vols); do wait_for 60 vol_is "$v" detached/unknown || true; done
	up_attach_retry vol-u2a node-1 || fail "u0: vol-u2a's ticket for node-1"
	up_attach_retry vol-u3a node-2 || fail "u0: vol-u3a's ticket for node-2"
	for v in "${UP_DETACHED[@]}"; do up_attach_retry "$v" "node-$NODES" || fail "u0: $v's ticket for node-$NODES"; done
	for v in $(up_vols); do
		wait_for 180 vol_is "$v" attached/healthy || true
		check "u0: $v ($(up_size "$v") replicas) attached and healthy ($(vol_state "$v"))" vol_is "$v" attached/healthy
	done
	for v in "${UP_DETACHED[@]}"; do up_detach_retry "$v" || fail "u0: $v's ticket removed"; done
	for v in "${UP_DETACHED[@]}"; do wait_for 120 vol_is "$v" detached/unknown || true; done
	for v in $(up_vols); do replicas "$v" | sed "s/^/    $v replica: /"; done
	up_start
	wait_for 30 up_all_ok || true
	check "u0: every volume usable before the upgrade ($(up_sample | awk '{printf "%s %s %s; ", $2, $3, $4}'))" up_all_ok
	tl "u0. volumes ready; engine image $(jp volumes.longhorn.io vol-u2a '{.status.currentImage}'); instance managers:"
	up_ims | sed 's/^/      im: /'
	lh_snapshot upgrade-before

	# u1, u2: the pre-upgrade check, then the new manifest.
	up_preupgrade
	python3 "$LH" manifest "$LONGHORN_UPGRADE_SRC" "$LH_UP_MANAGER_IMAGE" "$LH_UP_ENGINE_IMAGE" "$LH_UP_IM_IMAGE" \
		"$LH_WEBHOOK_IP" >"$DIR/longhorn-upgrade.yaml"
	t_apply=$(now_s)
	# --force-conflicts: the manifest's values win over any a Longhorn controller set since.
	run k apply --server-side --force-conflicts -f "$DIR/longhorn-upgrade.yaml"
	tl "u2. kubectl apply of Longhorn $LH_UP_VERSION's manifest: exit $RC"
	check "u2: kubectl apply of Longhorn $LH_UP_VERSION's manifest" rc_is 0

	# u3: the drain, while the managers restart and the new instance managers start.
	sleep 5
	up_check_cluster "u3 (managers rolling)"
	tl "u3. kubectl drain node-1 (vol-u2a's engine) begins"
	up_drain node-1
	t_drained=$(now_s)
	UP_T_DRAINED=$(secs "$T0" "$t_drained")
	up_drain_report
	tl "u3. kubectl drain node-1: exit $UP_DRAIN_RC after $UP_DRAIN_S_TOOK s; $UP_DRAIN_GUARD lines of the guard's refusals, $UP_DRAIN_PDB of budgets'; moved: $UP_MOVED"
	figure "u3. drain of node-1 during the roll: exit $UP_DRAIN_RC in $UP_DRAIN_S_TOOK s, guard refusals printed $UP_DRAIN_GUARD, budget refusals $UP_DRAIN_PDB, attachments moved: $UP_MOVED"
	check "u3: kubectl drain node-1 ends within ${UP_DRAIN_S}s (exit $UP_DRAIN_RC)" test "$UP_DRAIN_RC" = 0
	for i in 1 2 3 4 5; do
		out=$(up_sample)
		[ -z "$out" ] || break
		sleep 1
	done
	printf '%s\n' "$out" | sed 's/^/    after the drain: /'
	for v in $(up_vols); do
		n=$(awk -v v="$v" '$2 == v {print $5}' <<<"$out" | tr ',' '\n' | matching -cvxE 'node-1|-')
		check "u3: after the drain $v still has a usable replica off node-1 ($n)" test "${n:-0}" -ge 1
	done
	k uncordon node-1 >/dev/null || fail "u3: node-1 uncordoned"

	# u4: the roll done; the mixed-version cluster.
	wait_for "$UP_ROLL_S" up_rolled || true
	t_rolled=$(now_s)
	tl "u4. managers $LH_UP_VERSION: $(up_managers_new && echo yes || echo no); current-longhorn-version $(jp settings.longhorn.io current-longhorn-version '{.value}'); engine image $LH_UP_VERSION deployed: $(up_engine_image_deployed && echo yes || echo no); instance managers:"
	up_ims | sed 's/^/      im: /'
	check "u4: every manager runs $LH_UP_VERSION and is Ready" up_managers_new
	check "u4: Longhorn reports $LH_UP_VERSION (current-longhorn-version)" up_version_is "$LH_UP_VERSION"
	check "u4: the $LH_UP_VERSION engine image is deployed" up_engine_image_deployed
	check "u4: an instance manager of $LH_UP_VERSION runs on every node" up_new_ims_running
	n=$(up_ims | awk -v v="$LH_VERSION" '$3 == v && $4 == "running"' | wc -l)
	figure "u4. roll: apply to every new manager, instance manager and engine image ready $(secs "$t_apply" "$t_rolled") s; $n instance managers of $LH_VERSION still running (attached engines and replicas)"
	lh_snapshot upgrade-mixed
	up_check_cluster "u4 (both versions' instance managers)"
	wait_for 60 up_view_counts >/dev/null || true
	check "u4: the guard's view counts equal kubectl get for every kind after the CRDs changed" up_view_counts

	# u5: the gate on the new instance managers.
	storage=$(jp settings.longhorn.io storage-network '{.value}')
	pods=$(up_ims | awk -v v="$LH_UP_VERSION" '$3 == v && $7 != "none" {print $1}')
	check "u5: the new instance managers have pods ($(wc -w <<<"$pods"))" test "$(wc -w <<<"$pods")" -ge "$NODES"
	for pod in $pods; do
		if [ -n "$storage" ]; then
			check "u5: $pod ($LH_UP_VERSION, storage network $storage) carries the gate and passed it (exit $(gate_exit "$pod"))" \
				up_gate_passed "$pod"
		else
			check "u5: $pod ($LH_UP_VERSION, no storage network) has no gate, as docs/init-gate.md says" up_no_gate "$pod"
		fi
	done
	if [ -z "$storage" ]; then
		figure "u5. no storage network: the gate adds nothing to instance managers (run with E2E_MULTUS for the gate's part)"
	fi

	# u6: every volume usable again, then each attached volume's engine upgraded live.
	wait_for "$UP_HEAL_S" up_all_ok || true
	t_healed=$(now_s)
	tl "u6. volumes after the uncordon: $(up_sample | awk '{printf "%s %s %s; ", $2, $3, $4}')"
	check "u6: every volume usable again after node-1's uncordon ($(secs "$t_drained" "$t_healed") s)" up_all_ok
	for v in "${UP_ATTACHED[@]}"; do
		wait_for 120 up_set_image "$v" || fail "u6: $v's spec.image set to $LH_UP_ENGINE_IMAGE"
	done
	tl "u6. spec.image of ${UP_ATTACHED[*]} set to $LH_UP_ENGINE_IMAGE"
	for v in "${UP_ATTACHED[@]}"; do
		wait_for "$UP_ENGINE_S" up_engine_upgraded "$v" || true
		t_engines=$(now_s)
		tl "u6. $v: currentImage $(jp volumes.longhorn.io "$v" '{.status.currentImage}'), $(vol_state "$v"); engine in $(value lhk get engines.longhorn.io -l "longhornvolume=$v" -o jsonpath='{.items[*].status.instanceManagerName}')"
		check "u6: $v's engine upgraded live to $LH_UP_VERSION and healthy ($(secs "$t_healed" "$t_engines") s)" up_engine_upgraded "$v"
		replicas "$v" | sed "s/^/    $v replica: /"
	done
	up_ims | sed 's/^/      im: /'
	lh_snapshot upgrade-after
	wait_for 60 up_view_counts >/dev/null || true
	check "u6: the guard's view counts equal kubectl get for every kind after the upgrade" up_view_counts
	up_stop

	# u7: what was refused, by whom; what the samples saw.
	out=$(up_guard_decisions)
	printf '%s\n' "$out" | sed 's/^/    guard: /'
	total=$(printf '%s\n' "$out" | tail -n 1)
	n=$(find "$UP_LOGS" -name 'guard-*.log' | wc -l)
	figure "u7. the guard's decisions ($n pod logs followed): ${total#TOTAL }"
	while read -r i; do [ -z "$i" ] || figure "u7.   guard refused: $i"; done < <(printf '%s\n' "$out" | sed '$d' | cut -c1-260)
	check "u7: the guard's pods' logs were followed ($n)" test "$n" -ge 2
	check "u7: the guard refused none of Longhorn's own operations (denials to $LH_SA_USER: $(up_total longhorn "$total"))" \
		up_clean longhorn "$total" files "$n"
	out=$(up_lh_refusals)
	printf '%s\n' "$out" | sed 's/^/    manager: /'
	total=$(printf '%s\n' "$out" | tail -n 1)
	n=$(find "$UP_LOGS" -name 'manager-*.log' | wc -l)
	figure "u7. refusals in Longhorn's manager logs ($n pod logs followed): ${total#TOTAL }"
	check "u7: no manager log line names longhorn-guard ($(up_total guard "$total") in $n pod logs)" up_clean guard "$total" files "$n"
	out=$(up_warning_events)
	printf '%s\n' "$out" | sed 's/^/    event: /'
	total=$(printf '%s\n' "$out" | tail -n 1)
	figure "u7. Warning events during the upgrade: ${total#TOTAL }"
	check "u7: no Warning event names longhorn-guard ($(up_total guard "$total"))" up_clean guard "$total" read 1
	[ ! -s "$UP_LOGS/our-warnings" ] || sed 's/^/    warned to us: /' "$UP_LOGS/our-warnings" | sort | uniq -c | sed -n 1,6p
	ok=$(matching -c . "$UP_LOGS/our-refused" 2>/dev/null)
	[ "${ok:-0}" = 0 ] || sed 's/^/    refused to us: /' "$UP_LOGS/our-refused" | sort | uniq -c | sed -n 1,6p
	figure "u7. our own writes refused (by Longhorn's webhook while it restarted, or otherwise): ${ok:-0}"
	out=$(up_samples_report)
	printf '%s\n' "$out" | sed 's/^/    samples: /'
	total=$(printf '%s\n' "$out" | tail -n 1)
	figure "u7. samples: ${total#TOTAL }"
	check "u7: the volumes were sampled ($(up_total samples "$total") samples, longest gap $(up_total gap "$total") s)" up_some samples "$total"
	check "u7: no volume faulted in any sample ($(up_total faulted "$total"))" up_clean faulted "$total" samples 1
	check "u7: no false allow: after the drain every volume had a usable replica in every sample ($(up_total unusable_after_drain "$total") without)" \
		up_clean unusable_after_drain "$total" samples 1
	check "u7: no sample without a usable replica for any volume, the whole upgrade ($(up_total unusable "$total"))" \
		up_clean unusable "$total" samples 1
	figure "u. timeline: apply $(secs "$T0" "$t_apply") s, node-1 drained $(secs "$T0" "$t_drained") s, roll done $(secs "$T0" "$t_rolled") s, volumes usable $(secs "$T0" "$t_healed") s, engines upgraded $(secs "$T0" "${t_engines:-$t_healed}") s (from the volumes' start)"

	# The scenarios after this one start from no volume.
	for v in "${UP_ATTACHED[@]}"; do up_detach_retry "$v" || true; done
	for v in $(up_vols); do lh_delete_volume "$v"; done
	for v in $(up_vols); do wait_for 120 vol_gone "$v" || fail "u: $v deleted"; done
}
