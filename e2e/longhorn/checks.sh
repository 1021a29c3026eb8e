# The checks of the real-Longhorn suite (make e2e-longhorn: e2e/cluster.sh with
# E2E_CLUSTER_SUITE=longhorn), in order; each scenario prints its timeline. Sourced after the
# cluster is up. Scenarios (e2e/TESTING.md, "Real Longhorn"):
#   a. Longhorn up, the guard reading it      b. drains beside Longhorn's node-drain-policy
#   c. a real rebuild, check drain --wait     e. no false allow through Longhorn's churn
#   f. drains that delete instead of evicting (deletes.sh)
#   w. a whole maintenance window, every node drained and rebooted twice (window.sh; only with
#      E2E_LONGHORN_WINDOW=1)
#   u. Longhorn upgraded underneath the guard (upgrade.sh; only with LONGHORN_UPGRADE_SRC and
#      LONGHORN_UPGRADE_BIN_DIR: d then runs on the version upgraded to)
#   d. longhorn#10833 diagnosed live (last: it deletes a Node)
# One alone, on a cluster `up` made: e2e/cluster.sh checks longhorn_up install_guard check_deletes
# With E2E_MULTUS (make e2e-longhorn-multus), the seed's race s0-s4 instead (seedrace.sh), and
# s5, the other way of racing: a late Multus status write (latestatus.sh).
PASSED=0
FAILED=0
FAILURES=()
for f in install drain; do
	# shellcheck source=/dev/null
	. "$E2E/cluster/$f.sh"
done
for f in longhorn drains rebuild churn deletes seedrace latestatus window upgrade; do
	# shellcheck source=/dev/null
	. "$E2E/longhorn/$f.sh"
done

run_checks() {
	if multus_on; then
		run_checks_multus
		return
	fi
	longhorn_up
	install_guard
	check_guard_reads_longhorn
	check_policy_drains
	check_rebuild
	check_churn
	check_deletes
	# A whole maintenance window (window.sh): long, so only when asked for.
	[ "${E2E_LONGHORN_WINDOW:-0}" != 1 ] || check_window
	! upgrade_on || check_upgrade
	check_10833
	summary
}

# run_checks_multus (make e2e-longhorn-multus): Multus first, then Longhorn, its storage
# network, the guard, and the seed's race (e2e/longhorn/seedrace.sh).
run_checks_multus() {
	multus_up
	longhorn_up
	storage_network_up
	install_guard
	check_seed_race
	check_late_status
	summary
}

summary() {
	# shellcheck disable=SC2034 # read by e2e/cluster.sh (stopped_summary)
	SUMMARY_PRINTED=1
	log "summary"
	for f in "${LH_FIGURES[@]}"; do printf '    %s\n' "$f"; done
	for f in "${FAILURES[@]}"; do printf 'FAIL - %s\n' "$f"; done
	printf '%s passed, %s failed\n' "$PASSED" "$FAILED"
	[ "$FAILED" -eq 0 ]
}
