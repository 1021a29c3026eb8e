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
    let message = admitted.response["response"]["status"]["message"].as_str().unwrap_or("").to_string();
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
