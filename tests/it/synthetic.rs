//! The synthetic cluster of the scale harness and `make bench-https`, written as a snapshot
//! file and decided on: evicting the storage node's instance manager is safe, the others hold
//! attached volumes, and the drain guard reads the generated objects (breaking one volume's
//! redundancy turns the storage node's answer into a denial).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use longhorn_guard::admit::{Admitter, WebhookKind};
use longhorn_guard::cluster::{snapshot, SharedView};
use longhorn_guard::policy::Policy;
use longhorn_guard::synthetic::{Group, Synthetic};
use serde_json::Value;

const EVICTION: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/admission/eviction-create.json");

/// The captured eviction AdmissionReview, for pod `name` in longhorn-system.
fn eviction_of(name: &str) -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(&std::fs::read(EVICTION).unwrap()).unwrap();
    review["request"]["name"] = Value::from(name);
    review["request"]["object"]["metadata"]["name"] = Value::from(name);
    serde_json::to_vec(&review).unwrap()
}

/// Writes `list` as a JSON snapshot file and decides the eviction of node `n`'s instance manager.
async fn evict(list: &Value, n: usize) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snapshot.json");
    std::fs::write(&path, serde_json::to_vec(list).unwrap()).unwrap();
    let view = snapshot::load(Path::new(&path)).unwrap();
    let admitter = Admitter::new(SharedView::new(view), Arc::new(Policy::default()), None);
    let body = eviction_of(&Synthetic::instance_manager_name(n));
    let admitted = admitter.admit(WebhookKind::Validate, &body, Duration::from_secs(5)).await.unwrap();
    let message =
        admitted.response_json()["response"]["status"]["message"].as_str().unwrap_or("").to_string();
    (admitted.decision.allowed, message)
}

#[tokio::test]
async fn only_the_storage_nodes_instance_manager_may_be_evicted() {
    let s = Synthetic::new(10, 300).unwrap();
    let list = s.list();
    assert_eq!(s.storage_node(), 9);
    let (allowed, message) = evict(&list, 9).await;
    assert!(allowed, "node 9 holds 90 healthy replicas and no engine: {message}");
    for n in [0, 4] {
        let (allowed, message) = evict(&list, n).await;
        assert!(!allowed, "node {n} has attached volumes");
        assert!(message.contains("attached to scale-node-00"), "{message}");
    }
}

#[tokio::test]
async fn a_volume_whose_only_healthy_replica_is_on_the_node_blocks_its_drain() {
    let s = Synthetic::new(10, 300).unwrap();
    let mut list = s.list();
    let victim = Synthetic::volume_name(9); // replicas on nodes 9, 0, 1
    let items = list["items"].as_array_mut().unwrap();
    for item in items.iter_mut() {
        let for_victim = item["spec"]["volumeName"] == victim.as_str();
        if item["kind"] == "Replica" && for_victim && item["spec"]["nodeID"] != "scale-node-009" {
            item["spec"]["healthyAt"] = Value::from("");
            item["spec"]["failedAt"] = Value::from(s.timestamp.as_str());
            item["status"]["currentState"] = Value::from("error");
        }
        if item["kind"] == "Engine" && for_victim {
            for mode in item["status"]["replicaModeMap"].as_object_mut().unwrap().values_mut() {
                *mode = Value::from("ERR");
            }
            item["status"]["replicaModeMap"][format!("{victim}-r-00000000")] = Value::from("RW");
        }
        if item["kind"] == "Volume" && item["metadata"]["name"] == victim.as_str() {
            item["status"]["robustness"] = Value::from("degraded");
        }
    }
    assert_eq!(s.count(Group::Replica), 900);
    let (allowed, message) = evict(&list, 9).await;
    assert!(!allowed, "node 9 holds the last healthy replica of {victim}");
    assert!(message.contains(&victim), "{message}");
}

/// Runs `longhorn-guard check cluster --state` on the generator's snapshot (`gen_snapshot
/// --snapshots`, the same writer): exit code and table.
fn check_cluster_on(nodes: usize, volumes: usize, snapshots: usize) -> (i32, String) {
    use longhorn_guard::synthetic::checks::{write_list, CheckObjects};
    let s = Synthetic::new(nodes, volumes).unwrap();
    let extra = CheckObjects::new(snapshots).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snapshot.json");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    write_list(&s, Some(&extra), &mut file).unwrap();
    drop(file);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
        .args(["check", "cluster", "--state"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn the_generated_snapshot_with_check_kinds_is_quiet_in_check_cluster() {
    // 10 snapshots per volume, an available backup target, jobs covering every volume: only
    // drain readiness speaks (3 nodes with attached volumes, the storage node free).
    let (code, table) = check_cluster_on(4, 40, 400);
    assert_eq!(code, 0, "{table}");
    assert!(table.ends_with("check cluster: 0 errors, 3 warnings, 1 info (10 checks)\n"), "{table}");
    for check in ["== backup-target", "== recurring-jobs", "== snapshot-retention", "== volume-health"] {
        assert!(!table.contains(check), "{check}: {table}");
    }
    assert!(table.contains("scale-node-003: can be drained now"), "{table}");
}

#[test]
fn the_generated_snapshots_are_counted_per_volume() {
    // 1,000 snapshots over 4 volumes: 250 each, Longhorn's snapshot-max-count.
    let (code, table) = check_cluster_on(3, 4, 1_000);
    assert_eq!(code, 1, "{table}");
    // Snapshot k of a volume holds 16 MiB x (1 + k mod 8).
    let bytes: u64 = (0..250u64).map(|k| 16 * (1 + k % 8)).sum::<u64>() << 20;
    let held = format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64);
    for v in 0..4 {
        let name = Synthetic::volume_name(v);
        let line = format!(
            "{:<8} {:<40} {name} has 250 snapshots (snapshot-max-count=250), holding {held}: at the limit: new snapshots and backups of it fail",
            "error",
            format!("volume/{name}")
        );
        assert!(table.contains(&line), "{line}\n{table}");
    }
    assert!(table.contains("check cluster: 4 errors,"), "{table}");
}
