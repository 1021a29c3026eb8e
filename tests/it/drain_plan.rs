//! `check drain --all`: the maintenance plan over the fixture snapshot
//! (`shared/fixtures/cluster/snapshot-three-nodes.json`) where batching is and is not possible,
//! and a property test that its batch never strands a volume, checked against the per-node
//! analysis the webhook runs.

use crate::support;

use std::collections::BTreeSet;
use std::time::SystemTime;

use longhorn_guard::check::drain::plan::plan;
use longhorn_guard::policy::drain::analyze_node;
use longhorn_guard::policy::Policy;
use proptest::prelude::*;
use serde_json::{json, Value};
use support::check_drain as check;
use support::generated::{fixture_items, named, snapshot_view};

/// The fixture with only vol-healthy (attached to node-2, RW replicas on node-1..3) and
/// node-3 uncordoned; `node_2_err`: its node-2 replica in ERR.
fn items(node_2_err: bool) -> Vec<Value> {
    let mut items: Vec<Value> = fixture_items()
        .into_iter()
        .filter(|i| {
            let name = i["metadata"]["name"].as_str().unwrap_or("");
            !(name.starts_with("vol-degraded") || name.starts_with("vol-detached"))
        })
        .collect();
    for i in &mut items {
        if i["kind"] == "Node" && i["apiVersion"] == "v1" {
            i["spec"] = json!({});
        }
        if i["kind"] == "Engine" && node_2_err {
            i["status"]["replicaModeMap"]["vol-healthy-r-5e6f7a8b"] = json!("ERR");
        }
        if i["kind"] == "InstanceManager" {
            // Only the engine that exists.
            let engines: serde_json::Map<String, Value> = i["status"]["instanceEngines"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| k.starts_with("vol-healthy"))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default();
            i["status"]["instanceEngines"] = Value::Object(engines);
        }
    }
    items
}

fn write(dir: &tempfile::TempDir, items: Vec<Value>) -> String {
    let path = dir.path().join("snapshot.json");
    std::fs::write(&path, json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()).unwrap();
    path.display().to_string()
}

#[test]
fn two_nodes_go_together_when_a_third_keeps_a_healthy_replica() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = check(&["--all", "--state", &write(&dir, items(false))]);
    assert_eq!(code, 1, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "NODE    NOW  BATCH  WAITS FOR");
    assert_eq!(lines[1], "node-1  yes  yes    -");
    assert!(
        lines[2].starts_with("node-2  no   -      vol-healthy: attached to node-2 (engine running)"),
        "{out}"
    );
    assert_eq!(lines[3], "node-3  yes  yes    -");
    assert_eq!(
        lines[4],
        "2 of 3 nodes can be drained now, one at a time; together (greedy batch, in name order): node-1, node-3"
    );
    // vol-healthy's three copies: each node's drain waits for the rebuilds of the two reboots
    // before it, which precede node-1 and node-2 only from the second round on.
    assert_eq!(
        lines[5..],
        [
            "in a rolling window (one node at a time in name order, each rebooted), each drain may also wait for the rebuilds that the reboots just before it start:",
            "  node-1: from the second round on, vol-healthy",
            "  node-2: from the second round on, vol-healthy",
            "  node-3: vol-healthy",
        ]
    );
}

#[test]
fn two_nodes_that_drain_alone_do_not_go_together_when_they_hold_the_last_two_healthy_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = check(&["--all", "--state", &write(&dir, items(true))]);
    assert_eq!(code, 1);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], "node-1  yes  yes    -");
    assert_eq!(lines[3], "node-3  yes  -      the batch: drained with it, it would strand vol-healthy");
    assert_eq!(
        lines[4],
        "2 of 3 nodes can be drained now, one at a time; together (greedy batch, in name order): node-1"
    );
    let (_, out, _) = check(&["--all", "--state", &write(&dir, items(true)), "--output", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["batch"], json!(["node-1"]));
    assert_eq!(v["nodes"][2]["strandsWithBatch"], json!(["vol-healthy"]));
    assert_eq!(v["nodes"][1]["drainableNow"], false);
    assert_eq!(v["nodes"][1]["waitsFor"][0][0], "vol-healthy");
    // node-2's copy is ERR in the engine: the copies on node-1 and node-3 follow each other
    // only across the end of the order.
    assert_eq!(
        v["rolling"],
        json!([{"node": "node-1", "rebuilds": [], "rebuildsFromSecondRound": ["vol-healthy"]}])
    );
}

/// A cluster of 3 or 4 nodes and up to 6 attached volumes: each volume's engine node, and for
/// each node whether it holds a replica and in which mode (RW or ERR).
fn cluster(nodes: usize, volumes: &[(usize, Vec<Option<bool>>)]) -> Vec<Value> {
    let fixture = fixture_items();
    let node_names: Vec<String> = (1..=nodes).map(|n| format!("node-{n}")).collect();
    let mut items: Vec<Value> = Vec::new();
    for (i, name) in node_names.iter().enumerate() {
        let from = format!("node-{}", (i % 3) + 1);
        let im = support::generated::im_of(&fixture, &from);
        let mut node = named(&fixture, "Node", &from).clone();
        for o in fixture.iter().filter(|o| o["kind"] == "Node" && o["metadata"]["name"] == from.as_str()) {
            let mut o = o.clone();
            o["metadata"]["name"] = json!(name);
            if o["apiVersion"] == "v1" {
                o["spec"] = json!({});
            }
            items.push(o);
        }
        node["metadata"]["name"] = json!(name);
        let mut im_obj = named(&fixture, "InstanceManager", &im).clone();
        im_obj["metadata"]["name"] = json!(format!("im-{name}"));
        im_obj["spec"]["nodeID"] = json!(name);
        im_obj["status"]["instanceEngines"] = json!({});
        im_obj["status"]["instanceReplicas"] = json!({});
        let mut pod = fixture
            .iter()
            .find(|o| o["kind"] == "Pod" && o["metadata"]["name"] == im.as_str())
            .unwrap()
            .clone();
        pod["metadata"]["name"] = json!(format!("im-{name}"));
        pod["metadata"]["labels"]["longhorn.io/node"] = json!(name);
        pod["spec"]["nodeName"] = json!(name);
        items.push(im_obj);
        items.push(pod);
    }
    items.extend(fixture.iter().filter(|o| o["kind"] == "Setting").cloned());
    let vol_t = named(&fixture, "Volume", "vol-healthy");
    let rep_t = named(&fixture, "Replica", "vol-healthy-r-1a2b3c4d");
    let eng_t = named(&fixture, "Engine", "vol-healthy-e-0");
    for (v, (engine_node, replicas)) in volumes.iter().enumerate() {
        let vol_name = format!("vol-{v}");
        let engine_node = &node_names[engine_node % nodes];
        let mut vol = vol_t.clone();
        vol["metadata"]["name"] = json!(vol_name);
        vol["spec"]["nodeID"] = json!(engine_node);
        vol["status"]["currentNodeID"] = json!(engine_node);
        vol["spec"]["numberOfReplicas"] = json!(replicas.iter().filter(|r| r.is_some()).count().max(1));
        vol["status"]["kubernetesStatus"]["pvName"] = json!(format!("pv-{v}"));
        vol["status"]["kubernetesStatus"]["pvcName"] = json!(format!("pvc-{v}"));
        items.push(vol);
        let mut modes = serde_json::Map::new();
        let mut addresses = serde_json::Map::new();
        for (n, r) in replicas.iter().enumerate().take(nodes) {
            let Some(rw) = r else { continue };
            let node = &node_names[n];
            let name = format!("{vol_name}-r-{n}");
            let mut rep = rep_t.clone();
            rep["metadata"]["name"] = json!(name);
            rep["metadata"]["labels"]["longhornvolume"] = json!(vol_name);
            rep["metadata"]["labels"]["longhornnode"] = json!(node);
            rep["spec"]["volumeName"] = json!(vol_name);
            rep["spec"]["nodeID"] = json!(node);
            rep["spec"]["engineName"] = json!(format!("{vol_name}-e-0"));
            rep["status"]["instanceManagerName"] = json!(format!("im-{node}"));
            let address = format!("10.42.{n}.{}:10000", v + 10);
            addresses.insert(name.clone(), json!(address));
            modes.insert(name.clone(), json!(if *rw { "RW" } else { "ERR" }));
            items.push(rep);
            let im = items
                .iter_mut()
                .find(|o| o["kind"] == "InstanceManager" && o["metadata"]["name"] == format!("im-{node}"))
                .unwrap();
            im["status"]["instanceReplicas"][&name] = json!({});
        }
        let mut eng = eng_t.clone();
        let eng_name = format!("{vol_name}-e-0");
        eng["metadata"]["name"] = json!(eng_name);
        eng["metadata"]["labels"]["longhornvolume"] = json!(vol_name);
        eng["metadata"]["labels"]["longhornnode"] = json!(engine_node);
        eng["spec"]["volumeName"] = json!(vol_name);
        eng["spec"]["nodeID"] = json!(engine_node);
        eng["spec"]["replicaAddressMap"] = Value::Object(addresses.clone());
        eng["status"]["currentReplicaAddressMap"] = Value::Object(addresses);
        eng["status"]["replicaModeMap"] = Value::Object(modes);
        eng["status"]["replicaTransitionTimeMap"] = json!({});
        eng["status"]["instanceManagerName"] = json!(format!("im-{engine_node}"));
        eng["status"]["ownerID"] = json!(engine_node);
        items.push(eng);
        let im = items
            .iter_mut()
            .find(|o| o["kind"] == "InstanceManager" && o["metadata"]["name"] == format!("im-{engine_node}"))
            .unwrap();
        im["status"]["instanceEngines"][&eng_name] = json!({});
    }
    items
}

/// `items` with `volume`'s replicas on `nodes` failed: `failedAt` set and `ERR` in its engine.
fn fail_replicas(items: &[Value], volume: &str, nodes: &BTreeSet<String>) -> Vec<Value> {
    let mut items = items.to_vec();
    let failed: Vec<String> = items
        .iter()
        .filter(|o| o["kind"] == "Replica" && o["spec"]["volumeName"] == volume)
        .filter(|o| nodes.contains(o["spec"]["nodeID"].as_str().unwrap_or("")))
        .map(|o| o["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect();
    for o in &mut items {
        let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
        if o["kind"] == "Replica" && failed.contains(&name) {
            o["spec"]["failedAt"] = json!("2026-12-07T13:55:00Z");
        }
        if o["kind"] == "Engine" && o["spec"]["volumeName"] == volume {
            for r in &failed {
                o["status"]["replicaModeMap"][r] = json!("ERR");
            }
        }
    }
    items
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The rolling window's first-round waits are exactly the webhook's refusals once each
    /// node's predecessors are rebooted: for every node and every volume not already holding
    /// it up, failing the volume's copies on the nodes just before it (one fewer than its
    /// healthy copies, as their reboots leave them) makes the node's own analysis block on the
    /// volume if and only if the plan lists it for that node.
    #[test]
    fn the_rolling_waits_are_the_refusals_after_the_reboots_just_before(
        nodes in 3usize..=4,
        volumes in prop::collection::vec((0usize..4, prop::collection::vec(prop::option::weighted(0.7, prop::bool::weighted(0.8)), 4)), 1..=6),
    ) {
        let items = cluster(nodes, &volumes);
        let view = snapshot_view(&items);
        let policy = Policy::default();
        let now = SystemTime::now();
        let p = plan(&view, &policy, now);
        let order: Vec<String> = p.nodes.iter().map(|n| n.node.clone()).collect();
        for (i, node) in order.iter().enumerate() {
            let already: Vec<String> = analyze_node(&view, node, &policy, now).blocking().map(|b| b.volume.clone()).collect();
            let listed: Vec<&String> = p.rolling.iter().filter(|w| &w.node == node).flat_map(|w| &w.rebuilds).collect();
            for (v, (_, copies)) in volumes.iter().enumerate() {
                let v = format!("vol-{v}");
                let healthy = copies.iter().take(nodes).filter(|c| **c == Some(true)).count();
                if already.contains(&v) || healthy < 2 || i + 1 < healthy {
                    continue;
                }
                let before: BTreeSet<String> = order[i + 1 - healthy..i].iter().cloned().collect();
                let failed = snapshot_view(&fail_replicas(&items, &v, &before));
                let blocks = analyze_node(&failed, node, &policy, now).blocking().any(|b| b.volume == v);
                prop_assert_eq!(blocks, listed.contains(&&v), "{} on {} after {:?} failed", v, node, before);
            }
        }
    }

    /// Every batch member drains alone, and every volume a member holds data of keeps a
    /// replica the member's own analysis counts as protecting on a node outside the batch.
    #[test]
    fn the_batch_never_strands_a_volume(
        nodes in 3usize..=4,
        volumes in prop::collection::vec((0usize..4, prop::collection::vec(prop::option::weighted(0.7, prop::bool::weighted(0.7)), 4)), 1..=6),
    ) {
        let view = snapshot_view(&cluster(nodes, &volumes));
        let policy = Policy::default();
        let now = SystemTime::now();
        let p = plan(&view, &policy, now);
        let batch: BTreeSet<&str> = p.batch.iter().map(String::as_str).collect();
        for n in &p.nodes {
            let alone = analyze_node(&view, &n.node, &policy, now);
            prop_assert_eq!(n.drainable_now, !alone.would_block(), "{}", n.node);
            if !n.in_batch {
                prop_assert!(!n.drainable_now || !n.strands_with_batch.is_empty(), "{} left out for nothing", n.node);
                continue;
            }
            for v in &alone.volumes {
                let holds_data = v.replicas.iter().any(|r| r.on_node && r.carries_data);
                if !holds_data || v.protecting.is_empty() {
                    continue;
                }
                let outside = v.replicas.iter().any(|r| r.protecting && !batch.contains(r.node.as_str()));
                prop_assert!(outside, "batch {:?} strands {} (drained with {})", batch, v.volume, n.node);
            }
        }
    }
}
