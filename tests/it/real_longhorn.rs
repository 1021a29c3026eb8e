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
