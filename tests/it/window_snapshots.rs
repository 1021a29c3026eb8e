//! The maintenance window on real Longhorn v1.12.1 (e2e/TESTING.md, "A maintenance window,
//! measured"): the cluster just before the window and just after node-2's first hard reboot
//! (`tests/data/longhorn-v1.12.1/window-*.json`, its README says when each was taken). The
//! plan taken before the window names the rebuilds the next drain met after a reboot.

use crate::support;

use support::check_drain as check;

/// The row of `volume` in a `check drain` table, its cells joined by single spaces.
fn row(out: &str, volume: &str) -> String {
    support::longhorn::row(out, volume).unwrap_or_default()
}

const BEFORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/longhorn-v1.12.1/window-before.json");
const REBOOTED: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/longhorn-v1.12.1/window-node-2-rebooted.json");

/// Four attached volumes, one engine a node, copies where Longhorn put them: each node's
/// rolling rebuilds are the attached volumes whose other copies sit on the nodes just before.
#[test]
fn the_plan_before_the_window_names_each_drains_rolling_rebuilds() {
    let (code, out, err) = check(&["--all", "--state", BEFORE]);
    assert_eq!(code, 1, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[4],
        "0 of 3 nodes can be drained now, one at a time; together (greedy batch, in name order): none"
    );
    assert_eq!(
        lines[5..],
        [
            "in a rolling window (one node at a time in name order, each rebooted), each drain may also wait for the rebuilds that the reboots just before it start:",
            "  node-1: from the second round on, win-a3-1, win-a3-3",
            "  node-2: win-a2-2; from the second round on, win-a3-1, win-a3-3",
            "  node-3: win-a2-1, win-a3-1, win-a3-3",
        ]
    );
}

/// node-2 rebooted hard: its copies of the attached volumes failed, its instance manager not
/// yet running. node-3 now holds win-a2-1's last healthy copy (the plan's rolling wait), and
/// the detached win-d2's copy on node-2 protects nothing until its instance manager runs.
#[test]
fn after_node_2s_reboot_node_3_holds_the_last_copy_the_plan_named() {
    let (code, out, err) = check(&["node-3", "--state", REBOOTED]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        row(&out, "win-a2-1")
            .starts_with("win-a2-1 node-3:RW,node-2:failed - block attached to node-3 (engine running) and holds its last healthy replica"),
        "{out}"
    );
    assert_eq!(
        row(&out, "win-d2"),
        "win-d2 node-3:stopped,node-2:stopped - block last healthy replica is on node-3; its replica on node-2 has no running instance manager (state error); wait until the instance manager on node-2 is running"
    );
    assert_eq!(row(&out, "win-d3"), "win-d3 node-3:stopped,node-1:stopped,node-2:stopped node-1:stopped safe protected by healthy replica on node-1");
}
