//! Snapshots of a real Longhorn (built from its public sources, run by `make e2e-longhorn` on
//! real kubelets), one directory per version under `tests/data/longhorn-v*/`: every object as
//! Longhorn itself wrote it, read by `check drain --state`. Each file says which scenario it
//! was taken in (`tests/data/longhorn-v1.12.1/README.md`); the scenario fixes the volumes and
//! where they are attached, Longhorn the nodes of their replicas, which each test reads from
//! the file it checks.

use crate::support;

use support::check_drain as check;
use support::longhorn::{row, skip, Snapshot};

/// `node-1:RW,node-3:RW`: the replicas on `node` first, then by node.
fn replicas_cell(node: &str, nodes: &[String], state: &str) -> String {
    let mut ordered: Vec<&String> = nodes.iter().filter(|n| *n == node).collect();
    ordered.extend(nodes.iter().filter(|n| *n != node));
    ordered.iter().map(|n| format!("{n}:{state}")).collect::<Vec<_>>().join(",")
}

/// The row of a volume `node`'s drain does not need: protected by its replicas elsewhere.
fn safe_row(volume: &str, node: &str, nodes: &[String], state: &str) -> String {
    let others: Vec<String> = nodes.iter().filter(|n| *n != node).cloned().collect();
    let s = if others.len() == 1 { "" } else { "s" };
    format!(
        "{volume} {} {} safe protected by healthy replica{s} on {}",
        replicas_cell(node, nodes, state),
        replicas_cell(node, &others, state),
        others.join(", ")
    )
}

/// Two detached volumes: Longhorn writes a stopped Engine's `replicaModeMap` and
/// `rebuildStatus` as `null` (Go nil maps without omitempty). They once made the whole
/// snapshot unreadable (exit 2), and in `serve` every Engine list a confirmation read.
#[test]
fn detached_volumes_with_null_engine_maps_are_read() {
    for snap in Snapshot::all("detached.json") {
        let v = &snap.version;
        for node in snap.nodes() {
            let (code, out, err) = check(&[&node, "--state", snap.state()]);
            assert_eq!(code, 0, "{v} {node}: {out}{err}");
            assert!(out.contains(&format!("{node}: a drain would proceed")), "{v}: {out}");
            for volume in ["vol-a2", "vol-a3"] {
                let nodes = snap.replica_nodes(volume);
                let want = nodes.contains(&node).then(|| safe_row(volume, &node, &nodes, "stopped"));
                assert_eq!(row(&out, volume), want, "{v} {node}: {out}");
            }
        }
    }
}

/// A real rebuild (scenario c): the engine lists the new replica `WO` with a `rebuildStatus`
/// keyed by its `tcp://ip:port`; the node with the last healthy replica blocks with the
/// progress, the node of the rebuilding replica blocks for the attached engine, and a node
/// that holds nothing drains.
#[test]
fn a_real_rebuild_blocks_the_last_healthy_replica_with_its_progress() {
    for snap in Snapshot::all("rebuilding.json") {
        let v = &snap.version;
        let r = snap.rebuild("vol-c");
        let (h, w, p) = (&r.healthy, &r.rebuilding, r.progress);
        let (code, out, err) = check(&[h, "--state", snap.state()]);
        assert_eq!(code, 1, "{v}: {out}{err}");
        assert_eq!(
            row(&out, "vol-c").as_deref(),
            Some(format!(
                "vol-c {h}:RW,{w}:WO({p}%) - block last healthy replica is on {h}; its replica on {w} is \
                 rebuilding ({p}%); wait for the rebuild"
            ))
            .as_deref(),
            "{v}: {out}"
        );
        let (code, out, err) = check(&[&r.attached, "--state", snap.state()]);
        assert_eq!(code, 1, "{v}: {out}{err}");
        assert!(out.contains(&format!("attached to {} (engine running)", r.attached)), "{v}: {out}");
        let Some(idle) = &r.idle else {
            skip(&format!(
                "Longhorn {v}: every node of {} holds part of vol-c: no idle node to drain",
                snap.state()
            ));
            continue;
        };
        let (code, out, err) = check(&[idle, "--state", snap.state()]);
        assert_eq!(code, 0, "{v}: {out}{err}");
        assert!(
            out.contains(&format!("{idle}: a drain would proceed (no volume has a replica or engine on it)")),
            "{v}: {out}"
        );
    }
}

/// Two attached volumes (scenario a: vol-a2 on node-1, vol-a3 on node-2): each engine's node
/// blocks (attached, no pod uses it), the node holding only replicas protected elsewhere drains.
#[test]
fn attached_volumes_block_their_engine_node_only() {
    for snap in Snapshot::all("attached.json") {
        let v = &snap.version;
        let engines = [("vol-a2", snap.attached_to("vol-a2")), ("vol-a3", snap.attached_to("vol-a3"))];
        assert_eq!([engines[0].1.as_str(), engines[1].1.as_str()], ["node-1", "node-2"], "{v}: scenario a");
        for node in snap.nodes().into_iter().filter(|n| engines.iter().all(|(_, e)| e != n)) {
            let (code, out, err) = check(&[&node, "--state", snap.state()]);
            assert_eq!(code, 0, "{v} {node}: {out}{err}");
            for (volume, _) in &engines {
                let nodes = snap.replica_nodes(volume);
                let want = nodes.contains(&node).then(|| safe_row(volume, &node, &nodes, "RW"));
                assert_eq!(row(&out, volume), want, "{v} {node}: {out}");
            }
        }
        for (volume, node) in &engines {
            let (code, out, err) = check(&[node, "--state", snap.state()]);
            assert_eq!(code, 1, "{v} {node}: {out}{err}");
            let line = row(&out, volume).unwrap_or_else(|| panic!("{v} {node}: {out}"));
            let cells = format!("{volume} {} ", replicas_cell(node, &snap.replica_nodes(volume), "RW"));
            assert!(line.starts_with(&cells), "{v} {node}: {line}");
            assert!(
                line.contains(&format!(" block attached to {node} (engine running)")),
                "{v} {node}: {line}"
            );
        }
    }
}
