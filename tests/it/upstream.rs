//! Drain scenarios taken from Longhorn's own code and test suites, each as a small snapshot
//! under tests/data/upstream/ and an eviction built from the captured
//! ../shared/fixtures/admission/eviction-create.json, decided by `longhorn-guard review`.
//! docs/drain.md ("Checked against Longhorn") tabulates them; each test names its upstream
//! source. Longhorn revisions read: longhorn-manager 5ddaa369, longhorn-tests 31180dc8.

use crate::support::run;

use std::process::Command;

use serde_json::{json, Value};

const EVICTION: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/admission/eviction-create.json");
const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/upstream");
const BIN: &str = env!("CARGO_BIN_EXE_longhorn-guard");

/// The outcome of evicting `pod` against the snapshot `file`.
struct Outcome {
    allowed: bool,
    message: String,
    warnings: Vec<String>,
}

fn evict_with(file: &str, pod: &str, extra: &[&str]) -> Outcome {
    let mut body: Value = serde_json::from_str(&std::fs::read_to_string(EVICTION).unwrap()).unwrap();
    body["request"]["name"] = json!(pod);
    let out = run::with_stdin(
        Command::new(BIN)
            .args(["review", "--state", &format!("{DATA}/{file}")])
            .args(extra)
            .env("LONGHORN_GUARD_LOG", "warn")
            .env_remove("LONGHORN_GUARD_POLICY"),
        body.to_string().as_bytes(),
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{file}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    let r = &v["response"];
    let allowed = r["allowed"].as_bool().unwrap();
    assert_eq!(out.status.code(), Some(if allowed { 0 } else { 1 }), "{file}");
    Outcome {
        allowed,
        message: r["status"]["message"].as_str().unwrap_or("").to_string(),
        warnings: r["warnings"]
            .as_array()
            .map(|w| w.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default(),
    }
}

/// Evicts the v1 instance-manager pod of `node`.
fn evict(file: &str, node: &str) -> Outcome {
    evict_with(file, &format!("instance-manager-v1-{node}"), &[])
}

fn denied(file: &str, node: &str, lines: &[&str]) {
    let o = evict(file, node);
    assert!(!o.allowed, "{file} {node}: allowed");
    for l in lines {
        assert!(o.message.contains(l), "{file} {node}: {:?} lacks {l:?}", o.message);
    }
}

fn allowed(file: &str, node: &str) {
    let o = evict(file, node);
    assert!(o.allowed, "{file} {node}: {}", o.message);
    assert!(o.warnings.is_empty(), "{file} {node}: {:?}", o.warnings);
}

// longhorn-manager controller/instance_manager_controller.go canDeleteInstanceManagerPDB:
// an engine-type instance manager keeps its PDB while `instanceEngines` is non-empty.
// Longhorn: blocks. longhorn-guard: blocks (attached).
#[test]
fn an_engine_instance_manager_with_an_engine_blocks() {
    let o = evict_with("engine-instance-manager-busy.yaml", "instance-manager-e-node-1", &[]);
    assert!(!o.allowed);
    assert!(
        o.message
            .contains("\n- vol-a: attached to node-1 (engine running); move its workload off node-1 first"),
        "{}",
        o.message
    );
    // Its replicas elsewhere are protected, so node-2 drains.
    allowed("engine-instance-manager-busy.yaml", "node-2");
}

// longhorn-manager controller/instance_manager_controller.go areAllInstanceRemovedFromNodeByType:
// `instanceEngineFrontends` counts like `instanceEngines`; names per
// types.GenerateEngineFrontendNameForVolume (`<volume>-ef-<n>`). Longhorn: blocks.
// longhorn-guard: blocks, naming the volume.
#[test]
fn a_v2_engine_frontend_blocks_naming_its_volume() {
    let o = evict_with("v2-engine-frontend-only.yaml", "instance-manager-v2-node-1", &[]);
    assert!(!o.allowed);
    assert_eq!(
        o.message,
        "longhorn-guard: draining node-1 would strand 1 volume:\n\
         - vol-v2: attached to node-1 (engine frontend running in its instance manager); move its workload off node-1 first"
    );
    // The node's v1 instance-manager pod takes the same node down.
    assert!(!evict("v2-engine-frontend-only.yaml", "node-1").allowed);
}

// longhorn-manager controller/volume_controller.go: a v2 volume's engine runs on
// spec.engineNodeID when set (Longhorn 1.12+), and a new value switches it over; the engine keeps
// the PDB (areAllVolumesDetachedFromNode). Longhorn: blocks. longhorn-guard: blocks, and tells to
// move the engine, not the workload, which is on another node.
#[test]
fn a_v2_engine_placed_by_engine_node_id_is_moved_by_it() {
    let o = evict_with("v2-engine-on-another-node.yaml", "instance-manager-v2-node-2", &[]);
    assert!(!o.allowed);
    assert_eq!(
        o.message,
        "longhorn-guard: draining node-2 would strand 1 volume:\n\
         - vol-v2: its engine runs on node-2 (spec.engineNodeID) for its workload on node-1; set its \
         spec.engineNodeID to another node first; Longhorn moves the engine there and the workload stays"
    );
    // Without engineNodeID the same engine is the volume's own: move the workload.
    let o = evict_with("v2-engine-frontend-only.yaml", "instance-manager-v2-node-2", &[]);
    assert!(
        o.message
            .ends_with("vol-v2: attached to node-2 (engine running); move its workload off node-2 first"),
        "{}",
        o.message
    );
}

// longhorn-manager controller/instance_manager_controller.go areAllInstanceRemovedFromNodeByType:
// any entry keeps the PDB. Longhorn: blocks. longhorn-guard: blocks, naming entry and manager.
#[test]
fn an_entry_no_volume_owns_blocks_naming_it() {
    let o = evict("unmapped-engine-entry.yaml", "node-1");
    assert!(!o.allowed);
    assert_eq!(
        o.message,
        "longhorn-guard: draining node-1 would stop 1 engine instance no known volume owns:\n\
         - engine pvc-0d1e-e-4 in instance manager instance-manager-v2-node-1: no known volume owns it; \
         wait until Longhorn stops it, or check that instance manager"
    );
    allowed("unmapped-engine-entry.yaml", "node-2");
}

// longhorn-tests e2e/tests/negative/node_drain.robot "Test Kubectl Drain Nodes For PVC/PV/LHV
// Is Created Through Longhorn API"; longhorn-manager canDeleteInstanceManagerPDB
// isUnusedReplicaOnCurrentNode (longhorn#2673). Longhorn: every node drains. Same here.
#[test]
fn never_attached_volumes_do_not_block() {
    for node in ["node-1", "node-2", "node-3"] {
        allowed("never-attached-volume.yaml", node);
    }
}

// longhorn-tests manager/integration/tests/test_node.py
// test_drain_with_block_for_eviction_if_contains_last_replica_success, and
// longhorn-manager controller/node_controller.go shouldEvictReplica: vol-1's only replica
// keeps node-1 from draining until Longhorn evicted it; vol-2 (three replicas) never blocks.
// Longhorn: blocks, then drains. Same here.
#[test]
fn the_last_replica_blocks_until_evicted() {
    let o = evict("last-replica-before-eviction.yaml", "node-1");
    assert!(!o.allowed);
    assert_eq!(
        o.message,
        "longhorn-guard: draining node-1 would strand 1 volume:\n\
         - vol-1: 1 replica (numberOfReplicas=1); raise numberOfReplicas to 2 or more and wait for the rebuild"
    );
    allowed("last-replica-after-eviction.yaml", "node-1");
}

// longhorn-manager datastore/longhorn.go ListVolumePDBProtectedHealthyReplicasRO: a replica on
// an unschedulable node protects nothing. Longhorn: blocks. Same here.
#[test]
fn a_replica_on_a_cordoned_node_does_not_protect() {
    denied(
        "other-replica-on-cordoned-node.yaml",
        "node-1",
        &["- vol-a: no other replica can protect it; its replica on node-2 is on a cordoned node; uncordon node-2, or evict the replica on node-1 in Longhorn"],
    );
}

// longhorn-tests e2e/tests/negative/node_drain.robot "Stopped Replicas On Deleted Nodes Should
// Not Be Counted As Healthy Replicas When Draining Nodes"; longhorn-manager datastore
// getRunningReplicaInstanceManagerRO. Longhorn: the drain of node-2 fails. Same here.
#[test]
fn a_replica_on_a_powered_off_node_does_not_protect() {
    denied(
        "replica-on-powered-off-node.yaml",
        "node-2",
        &["- vol-0: last healthy replica is on node-2; its replica on node-1 has no running instance manager (state unknown)"],
    );
}

// longhorn-tests e2e/tests/negative/node_drain.robot "Setting Allow Node Drain with the Last
// Healthy Replica protects the last healthy replica with Pod Disruption Budget (PDB)":
// with node-drain-policy always-allow Longhorn lets the drain through. longhorn-guard is
// stricter (docs/drain.md): it still blocks, and its override lets it through.
#[test]
fn always_allow_does_not_make_the_last_replica_expendable() {
    denied(
        "replica-on-powered-off-node-always-allow.yaml",
        "node-2",
        &["- vol-0: last healthy replica is on node-2"],
    );
}

// longhorn-manager datastore/longhorn.go IsAvailableHealthyReplica: failedAt set is not
// healthy. Longhorn: blocks. Same here.
#[test]
fn a_failed_replica_does_not_protect() {
    denied(
        "other-replica-failed.yaml",
        "node-1",
        &["- vol-a: last healthy replica is on node-1; its replica on node-2 failed "],
    );
}

// longhorn-manager canDeleteInstanceManagerPDB isUnusedReplicaOnCurrentNode looks at healthyAt
// and failedAt only, so a failed replica reused for a rebuild (lastFailedAt kept) counts as
// unused and Longhorn drains. longhorn-guard is stricter: it holds data.
#[test]
fn a_reused_failed_replica_still_holds_data() {
    denied(
        "reused-failed-replica.yaml",
        "node-1",
        &["- vol-a: only copy of its data is on node-1 (replica not-healthy); its replica on node-2 failed "],
    );
}

// longhorn-manager canDeleteInstanceManagerPDB with allow-if-replica-is-stopped skips
// replicas desired and currently stopped: Longhorn drains. longhorn-guard blocks by default
// and drains with drain.protectStoppedReplicas: false, the same trade-off.
#[test]
fn a_stopped_last_replica_blocks_unless_the_policy_says_otherwise() {
    denied("stopped-last-replica.yaml", "node-1", &["- vol-a: last healthy replica is on node-1"]);
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "drain:\n  protectStoppedReplicas: false\n").unwrap();
    let o = evict_with(
        "stopped-last-replica.yaml",
        "instance-manager-v1-node-1",
        &["--policy", policy.to_str().unwrap()],
    );
    assert!(o.allowed, "{}", o.message);
}

// longhorn-manager datastore/longhorn.go ListVolumePDBProtectedHealthyReplicasRO reads
// healthyAt/failedAt only, so a replica its engine lists as ERR still protects there and
// Longhorn drains. longhorn-guard is stricter: the engine no longer writes to it.
#[test]
fn a_replica_in_err_mode_does_not_protect() {
    denied("other-replica-err-in-engine.yaml", "node-1", &["its replica on node-2 is in ERR mode"]);
}

// longhorn-manager datastore/longhorn.go ListVolumePDBProtectedHealthyReplicasRO does not
// check deletionTimestamp: Longhorn drains. longhorn-guard is stricter: it is going away.
#[test]
fn a_replica_being_deleted_does_not_protect() {
    denied("other-replica-being-deleted.yaml", "node-1", &["its replica on node-2 is being deleted"]);
}

// longhorn-tests e2e/tests/negative/node_drain.robot "Force Drain Replica Node While Replica
// Rebuilding" (node-1: allowed) and "Force Drain Volume Node While Replica Rebuilding"
// (node-3, where the volume is attached: blocked). Same in Longhorn.
#[test]
fn draining_during_a_rebuild() {
    allowed("replica-rebuilding.yaml", "node-1");
    denied(
        "replica-rebuilding.yaml",
        "node-3",
        &["- vol-0: attached to node-3 (engine running); move its workload off node-3 first"],
    );
}

// longhorn-tests e2e/tests/negative/node_drain.robot "Drain Node With Force" and "Drain Node
// Without Force": a replica-only node drains; the volume's node waits for its workload.
// Same in Longhorn (its engine keeps the PDB).
#[test]
fn replica_node_drains_volume_node_waits() {
    allowed("three-replicas-attached-node-1.yaml", "node-2");
    allowed("three-replicas-attached-node-1.yaml", "node-3");
    denied(
        "three-replicas-attached-node-1.yaml",
        "node-1",
        &["- vol-0: attached to node-1 (engine running)"],
    );
}

// longhorn-tests manager/integration/tests/test_node.py test_drain_with_block_for_eviction_success
// and test_drain_with_block_for_eviction_failure. Longhorn's block-for-eviction keeps every
// PDB until the node holds no replica; longhorn-guard allows node-1 (vol-b is protected on
// node-2) and leaves the wait to Longhorn's PDB, which the eviction API checks as well.
// node-2 holds the attached strict-local vol-s: both block.
#[test]
fn block_for_eviction() {
    allowed("block-for-eviction.yaml", "node-1");
    denied("block-for-eviction.yaml", "node-2", &["- vol-s: attached to node-2 (engine running)"]);
}

// `check drain` reports the v2 volume and the unmapped entry too (exit 1).
#[test]
fn check_drain_names_v2_frontends_and_unmapped_entries() {
    let check = |file: &str, extra: &[&str]| {
        let out = Command::new(BIN)
            .args(["check", "drain", "node-1", "--state", &format!("{DATA}/{file}")])
            .args(extra)
            .env("LONGHORN_GUARD_LOG", "warn")
            .env_remove("LONGHORN_GUARD_POLICY")
            .output()
            .unwrap();
        (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, out) = check("v2-engine-frontend-only.yaml", &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("vol-v2  node-2:RW,node-3:RW  node-2:RW,node-3:RW  block"), "{out}");
    assert!(
        out.contains("block    attached to node-1 (engine frontend running in its instance manager)"),
        "{out}"
    );
    assert!(out.contains("\nnode-1: a drain would BLOCK on 1 of 1 volume\n"), "{out}");

    // The guard's part, the doctor's lines (tests/drain_doctor.rs), then the verdict.
    let (code, out) = check("unmapped-engine-entry.yaml", &[]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        out.split_inclusive('\n').next().unwrap(),
        "node-1: engine pvc-0d1e-e-4 in instance manager instance-manager-v2-node-1: no known volume owns it; \
         wait until Longhorn stops it, or check that instance manager [block]\n"
    );
    assert!(
        out.ends_with(
            "\nnode-1: a drain would BLOCK on 1 engine instance no known volume owns (0 volumes checked)\n"
        ),
        "{out}"
    );
    let (code, out) = check("unmapped-engine-entry.yaml", &["--output", "json"]);
    assert_eq!(code, 1, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["drain"], "block");
    assert_eq!(
        v["unmappedInstances"],
        json!([{"instanceManager": "instance-manager-v2-node-1", "kind": "engine", "name": "pvc-0d1e-e-4", "overridden": false}])
    );
}
