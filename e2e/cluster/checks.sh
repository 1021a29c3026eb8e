# The checks of the real-kubelet suite (e2e/cluster.sh run), in order; each prints its figures.
# Sourced after the cluster is up.
PASSED=0
FAILED=0
FAILURES=()
for f in install drain gate rollout doctor; do
	# shellcheck source=/dev/null
	. "$E2E/cluster/$f.sh"
done
# shellcheck source=e2e/doctor.sh
. "$E2E/doctor.sh" # finding

run_checks() {
	longhorn_standin
	install_guard
	check_doctor
	check_node_delete
	check_blocked_drain
	check_attached_drain
	check_gate
	check_rollout
	guard_log_levels
	check_gate_policy
	local extra
	for extra in ${E2E_CLUSTER_EXTRA:-}; do
		log "extra: $extra $KUBECONFIG $GUARD_IMAGE"
		run "$extra" "$KUBECONFIG" "$GUARD_IMAGE"
		check "$extra passed" rc_is 0
	done
	summary
}

# summary: the figures gathered so far, the failures, "N passed, N failed"; status 1 on a failure.
summary() {
	# shellcheck disable=SC2034 # read by e2e/cluster.sh (stopped_summary)
	SUMMARY_PRINTED=1
	log "summary"
	[ -f "$GUARD_IMAGE_TAR" ] && printf '    image: %s bytes (%s)\n' "$(stat -c %s "$GUARD_IMAGE_TAR")" "$GUARD_IMAGE"
	printf '    container start to /readyz 200: %s s\n' "${READY_SECONDS:-?}"
	for f in "${GATE_FIGURES[@]}"; do printf '    gate %s\n' "$f"; done
	printf '    downward-API refresh: %s\n' "${DOWNWARD:-?}"
	for f in "${ROLLOUT_FIGURES[@]}"; do printf '    %s\n' "$f"; done
	for f in "${FAILURES[@]}"; do printf 'FAIL - %s\n' "$f"; done
	printf '%s passed, %s failed\n' "$PASSED" "$FAILED"
	[ "$FAILED" -eq 0 ]
}

# guard_log_levels: what the running replicas logged above INFO (each distinct message once):
# a manifest that the kubelet runs differently than promised shows up here first.
guard_log_levels() {
	local pod
	log "longhorn-guard's own WARN/ERROR log lines (current replicas)"
	for pod in $(guard_pods | awk '{print $1}'); do
		k -n "$GUARD_NS" logs "$pod" 2>/dev/null | grep -E '"level":"(WARN|ERROR)"' |
			sed -E 's/.*"level":"([A-Z]+)","message":"([^"]*)".*/\1 \2/' | sort | uniq -c | sed "s|^|    $pod: |" || true
	done
}
