//! A Longhorn state generated from the fixture snapshot's objects, for the confirmation tests:
//! its nodes, instance managers, pods and settings, and N volumes cloned from `vol-healthy`.

use std::time::{Duration, SystemTime};

use longhorn_guard::cluster::{ClusterView, Source};
use serde_json::{json, Value};

pub use super::states::objects;
use super::{fixture, SNAPSHOT};

pub const DRAINED: &str = "node-3";

pub fn fixture_items() -> Vec<Value> {
    let v: Value = serde_json::from_slice(&std::fs::read(SNAPSHOT).unwrap()).unwrap();
    v["items"].as_array().unwrap().clone()
}

pub fn named<'a>(items: &'a [Value], kind: &str, name: &str) -> &'a Value {
    items.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name).unwrap()
}

/// The instance manager (and its pod) of each fixture node.
pub fn im_of(items: &[Value], node: &str) -> String {
    items
        .iter()
        .find(|o| o["kind"] == "InstanceManager" && o["spec"]["nodeID"] == node)
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap()
        .to_string()
}

/// Volume `i`, named like a CSI volume (`pvc-<uuid>`, 40 characters).
pub fn volume_name(i: usize) -> String {
    format!("pvc-{i:08x}-0000-4000-8000-{:012x}", i * 7919)
}

/// How the generated volumes look.
pub struct Layout {
    pub volumes: usize,
    /// Nodes holding a replica of every volume.
    pub replica_nodes: &'static [&'static str],
    /// Volumes whose replicas off the drained node have all failed (they block the drain).
    pub failed_elsewhere: usize,
}

/// The fixture's nodes, Longhorn nodes, instance managers, pods and settings, with `layout`'s
/// volumes, replicas and engines instead of the fixture's. Engines run on node-1 and node-2
/// (never on the drained node), and the instance managers report exactly those engines.
pub fn state(layout: &Layout) -> Vec<Value> {
    let fixture = fixture_items();
    let vol_t = named(&fixture, "Volume", "vol-healthy");
    let rep_t = named(&fixture, "Replica", "vol-healthy-r-1a2b3c4d");
    let eng_t = named(&fixture, "Engine", "vol-healthy-e-0");
    let mut items: Vec<Value> = fixture
        .iter()
        .filter(|o| !matches!(o["kind"].as_str(), Some("Volume" | "Replica" | "Engine")))
        .cloned()
        .collect();
    let mut engines_on: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for i in 0..layout.volumes {
        let vol = volume_name(i);
        let engine_node = if i % 2 == 0 { "node-1" } else { "node-2" };
        let engine = format!("{vol}-e-0");
        let mut v = vol_t.clone();
        v["metadata"]["name"] = json!(vol);
        v["metadata"]["labels"] = json!({"longhornvolume": vol});
        v["spec"]["nodeID"] = json!(engine_node);
        v["spec"]["numberOfReplicas"] = json!(layout.replica_nodes.len());
        v["status"]["currentNodeID"] = json!(engine_node);
        v["status"]["kubernetesStatus"]["pvcName"] = json!(format!("data-{i}"));
        items.push(v);
        let mut modes = serde_json::Map::new();
        let mut addrs = serde_json::Map::new();
        for (j, node) in layout.replica_nodes.iter().enumerate() {
            let name = format!("{vol}-r-{:08x}", i * 31 + j);
            let ip = format!("10.42.{j}.{}", i % 250 + 2);
            let port = 10000 + i % 1000;
            let mut r = rep_t.clone();
            r["metadata"]["name"] = json!(name);
            r["metadata"]["labels"] = json!({"longhornnode": node, "longhornvolume": vol});
            r["spec"]["nodeID"] = json!(node);
            r["spec"]["volumeName"] = json!(vol);
            r["spec"]["engineName"] = json!(engine);
            r["status"]["instanceManagerName"] = json!(im_of(&fixture, node));
            r["status"]["ip"] = json!(ip);
            r["status"]["storageIP"] = json!(ip);
            r["status"]["port"] = json!(port);
            let failed = *node != DRAINED && i < layout.failed_elsewhere;
            if failed {
                r["spec"]["failedAt"] = json!("2026-11-30T11:50:00Z");
                modes.insert(name.clone(), json!("ERR"));
            } else {
                modes.insert(name.clone(), json!("RW"));
            }
            addrs.insert(name, json!(format!("{ip}:{port}")));
            items.push(r);
        }
        let mut e = eng_t.clone();
        e["metadata"]["name"] = json!(engine);
        e["metadata"]["labels"] = json!({"longhornnode": engine_node, "longhornvolume": vol});
        e["spec"]["nodeID"] = json!(engine_node);
        e["spec"]["volumeName"] = json!(vol);
        e["spec"]["replicaAddressMap"] = Value::Object(addrs.clone());
        e["status"]["replicaModeMap"] = Value::Object(modes);
        e["status"]["currentReplicaAddressMap"] = Value::Object(addrs);
        e["status"]["rebuildStatus"] = json!({});
        e["status"]["instanceManagerName"] = json!(im_of(&fixture, engine_node));
        items.push(e);
        engines_on.entry(engine_node.to_string()).or_default().push(engine);
    }
    for im in items.iter_mut().filter(|o| o["kind"] == "InstanceManager") {
        let node = im["spec"]["nodeID"].as_str().unwrap().to_string();
        let engines: serde_json::Map<String, Value> = engines_on
            .get(&node)
            .into_iter()
            .flatten()
            .map(|e| (e.clone(), json!({"spec": {"name": e}, "status": {"state": "running"}})))
            .collect();
        im["status"]["instanceEngines"] = Value::Object(engines);
        im["status"]["instanceEngineFrontends"] = json!({});
        im["status"]["instanceReplicas"] = json!({});
    }
    items
}

/// An upgrade in progress on node-1: a second instance manager with the new image is running
/// (with its pod) and the old one is stopped, and node-1's replicas name neither (so the analysis picks one
/// by `default-instance-manager-image`, which names the new image).
pub fn upgrade(mut items: Vec<Value>) -> Vec<Value> {
    let old = im_of(&items, "node-1");
    let mut new = named(&items, "InstanceManager", &old).clone();
    for im in
        items.iter_mut().filter(|o| o["kind"] == "InstanceManager" && o["metadata"]["name"] == old.as_str())
    {
        im["status"]["currentState"] = json!("stopped");
    }
    new["metadata"]["name"] = json!("instance-manager-0new0image0000000000000000000000");
    new["spec"]["image"] = json!("longhornio/longhorn-instance-manager:v1.13.0");
    new["status"]["currentState"] = json!("running");
    items.push(new);
    // Its pod, as Longhorn creates one (same name) for every instance manager.
    let mut pod = named(&items, "Pod", &old).clone();
    pod["metadata"]["name"] = json!("instance-manager-0new0image0000000000000000000000");
    items.push(pod);
    for r in items.iter_mut().filter(|o| o["kind"] == "Replica" && o["spec"]["nodeID"] == "node-1") {
        r["status"]["instanceManagerName"] = json!("");
    }
    let mut setting = named(&items, "Setting", "storage-network").clone();
    setting["metadata"]["name"] = json!("default-instance-manager-image");
    setting["value"] = json!("longhornio/longhorn-instance-manager:v1.13.0");
    items.push(setting);
    items
}

pub fn snapshot_view(items: &[Value]) -> ClusterView {
    let now = SystemTime::now();
    ClusterView::from_objects(Source::Snapshot("generated".into()), objects(items), now)
        .derive(longhorn_guard::policy::drain::derivations(), now)
}

/// `items` as a watch-fed view last updated ten minutes ago.
pub fn stale_watch_view(items: &[Value]) -> ClusterView {
    watch_view_aged(items, Duration::from_secs(600))
}

/// `items` as a watch-fed view last updated `age` ago.
pub fn watch_view_aged(items: &[Value], age: Duration) -> ClusterView {
    let at = SystemTime::now() - age;
    ClusterView::from_objects(Source::Watch, objects(items), at)
        .derive(longhorn_guard::policy::drain::derivations(), at)
}

pub fn eviction_of_drained(items: &[Value]) -> Vec<u8> {
    let mut body: Value = serde_json::from_slice(&fixture("eviction-create.json")).unwrap();
    body["request"]["name"] = json!(im_of(items, DRAINED));
    body.to_string().into_bytes()
}
