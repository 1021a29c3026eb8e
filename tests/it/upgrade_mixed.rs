//! A real cluster half-way through Longhorn's upgrade from v1.11.3 to v1.12.1
//! (`tests/data/upgrade-v1.11.3-v1.12.1/mixed.json`, its README says when it was taken): two
//! instance managers on a node, the old one holding the engine and replicas, the new one empty.
//! A node's drain is decided from the instances wherever they run.

use crate::support;

use support::check_drain as check;

/// The row of `volume` in a `check drain` table, its cells joined by single spaces.
fn row(out: &str, volume: &str) -> String {
    support::longhorn::row(out, volume).unwrap_or_default()
}

const MIXED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/upgrade-v1.11.3-v1.12.1/mixed.json");

#[test]
fn the_engine_in_the_old_instance_manager_blocks_its_node_and_nothing_else() {
    let (code, out, err) = check(&["node-2", "--state", MIXED]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        row(&out, "vol-u3a").starts_with(
            "vol-u3a node-2:RW,node-1:failed,node-3:RW node-3:RW block attached to node-2 (engine running)"
        ),
        "{out}"
    );
    assert!(out.contains("node-2: a drain would BLOCK on 1 of 4 volumes"), "{out}");
    // Both budgets of node-2 are needed (Longhorn's check is per node), but only the old
    // instance manager's pod runs the engine: only its bypass costs vol-u3a's engine.
    let bypasses: Vec<&str> = out.lines().map(str::trim).filter(|l| l.starts_with("bypass:")).collect();
    assert_eq!(
        bypasses,
        ["bypass: deleting it, or its instance-manager pod as kubectl drain --disable-eviction does, stops the engine of 1 attached volume under its workload (vol-u3a)"],
        "{out}"
    );
    let old_im = out
        .find("instance-manager-a22ec0329b835a89738d82c4ca88b973: Longhorn's budget")
        .unwrap_or(usize::MAX);
    let new_im =
        out.find("instance-manager-c63447fc609f193197f88c537be10329: Longhorn's budget").unwrap_or(0);
    let bypass_at = out.find("bypass:").unwrap_or(usize::MAX);
    assert!(old_im < bypass_at && bypass_at < new_im, "the bypass is the old instance manager's: {out}");

    // node-3's old instance manager holds a replica of vol-u3a, and node-2's copy protects it.
    let (code, out, err) = check(&["node-3", "--state", MIXED]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        row(&out, "vol-u3a"),
        "vol-u3a node-3:RW,node-1:failed,node-2:RW node-2:RW safe protected by healthy replica on node-2"
    );
    assert!(out.contains("node-3: a drain would proceed (3 volumes checked, none blocking)"), "{out}");

    // node-1 runs only the new, empty instance manager: its failed and stopped copies are
    // protected elsewhere.
    let (code, out, err) = check(&["node-1", "--state", MIXED]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("node-1: a drain would proceed (3 volumes checked, none blocking)"), "{out}");
}

#[test]
fn the_plan_of_the_mixed_cluster_moves_the_one_workload_and_rolls_its_rebuild() {
    let (code, out, err) = check(&["--all", "--state", MIXED]);
    assert_eq!(code, 1, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], "node-1  yes  yes    -", "{out}");
    assert!(
        lines[2].starts_with("node-2  no   -      vol-u3a: attached to node-2 (engine running)"),
        "{out}"
    );
    assert_eq!(lines[3], "node-3  yes  yes    -", "{out}");
    // vol-u3a's healthy copies are on node-2 and node-3 (node-1's failed): node-3 follows node-2.
    assert_eq!(lines[5..], ["in a rolling window (one node at a time in name order, each rebooted), each drain may also wait for the rebuilds that the reboots just before it start:", "  node-3: vol-u3a"]);
}
