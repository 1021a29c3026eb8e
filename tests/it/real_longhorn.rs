//! Snapshots of a real Longhorn v1.12.1 (built from its public sources, run by
//! `make e2e-longhorn` on real kubelets): every object as Longhorn itself wrote it, read by
//! `check drain --state`. Each file says which scenario it was taken in
//! (`tests/data/longhorn-v1.12.1/README.md`).

use crate::support;

use support::check_drain as check;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/longhorn-v1.12.1");

fn state(name: &str) -> String {
    format!("{DIR}/{name}")
}

/// Two detached volumes: Longhorn writes a stopped Engine's `replicaModeMap` and
/// `rebuildStatus` as `null` (Go nil maps without omitempty). They once made the whole
/// snapshot unreadable (exit 2), and in `serve` every Engine list a confirmation read.
#[test]
fn detached_volumes_with_null_engine_maps_are_read() {
    for node in ["node-1", "node-2", "node-3"] {
        let (code, out, err) = check(&[node, "--state", &state("detached.json")]);
        assert_eq!(code, 0, "{node}: {out}{err}");
        assert!(out.contains(&format!("{node}: a drain would proceed")), "{out}");
    }
    let (_, out, _) = check(&["node-1", "--state", &state("detached.json")]);
    assert!(
        out.lines().any(|l| l.starts_with("vol-a2  node-1:stopped,node-3:stopped")
            && l.ends_with("safe     protected by healthy replica on node-3")),
        "{out}"
    );
}

/// A real rebuild (scenario c): the engine lists the new replica `WO` with a `rebuildStatus`
/// keyed by its `tcp://ip:port`; the node with the last healthy replica blocks with the
/// progress, the node of the rebuilding replica blocks for the attached engine, and the third
/// node, which holds nothing, drains.
#[test]
fn a_real_rebuild_blocks_the_last_healthy_replica_with_its_progress() {
    let (code, out, err) = check(&["node-2", "--state", &state("rebuilding.json")]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.lines().any(|l| l.starts_with("vol-c   node-2:RW,node-1:WO(3%)")
            && l.ends_with("block    last healthy replica is on node-2; its replica on node-1 is rebuilding (3%); wait for the rebuild")),
        "{out}"
    );
    let (code, out, err) = check(&["node-1", "--state", &state("rebuilding.json")]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("attached to node-1 (engine running)"), "{out}");
    let (code, out, err) = check(&["node-3", "--state", &state("rebuilding.json")]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("node-3: a drain would proceed (no volume has a replica or engine on it)"), "{out}");
}

/// Two attached volumes (scenario a): each engine's node blocks (attached, no pod uses it),
/// the node holding only replicas protected elsewhere drains.
#[test]
fn attached_volumes_block_their_engine_node_only() {
    let (code, out, err) = check(&["node-3", "--state", &state("attached.json")]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("vol-a2  node-3:RW,node-1:RW            node-1:RW            safe"), "{out}");
    for (node, vol) in [("node-1", "vol-a2"), ("node-2", "vol-a3")] {
        let (code, out, err) = check(&[node, "--state", &state("attached.json")]);
        assert_eq!(code, 1, "{node}: {out}{err}");
        assert!(
            out.lines().any(|l| l.starts_with(vol)
                && l.contains(&format!("block    attached to {node} (engine running)"))),
            "{node}: {out}"
        );
    }
}
