//! Every reason a replica elsewhere cannot protect its volume (`WhyNot`), rendered as the
//! full sentence a denial shows, plus the shapes that used to read wrong: replicas with no
//! node, every replica on the drained node, v1 and v2 volumes side by side, a v2 volume
//! whose only trace on the node is an engine frontend, and an entry no volume owns.

use crate::support::states;

use longhorn_guard::policy::drain::{analyze_node, NodeAnalysis};
use longhorn_guard::policy::Policy;
use serde_json::{json, Value};
use states::*;

/// vol-a (v1, 2 replicas): healthy vol-a-r-1 on node-1 (drained), vol-a-r-2 on node-2.
fn base(attached: bool) -> Vec<Value> {
    let mut items = three_nodes();
    let (state, on) = if attached { ("attached", "node-3") } else { ("detached", "") };
    items.push(volume("vol-a", "v1", 2, state, on));
    items.push(replica("vol-a", "vol-a-r-1", "node-1", "v1"));
    items.push(replica("vol-a", "vol-a-r-2", "node-2", "v1"));
    if attached {
        let mut e = engine("vol-a", "node-3", "v1", &[("vol-a-r-1", "RW"), ("vol-a-r-2", "RW")]);
        e["status"]["currentReplicaAddressMap"] =
            json!({"vol-a-r-1": "10.0.0.1:10000", "vol-a-r-2": "10.0.0.2:10000"});
        items.push(e);
    }
    items
}

fn analyze(items: &[Value], node: &str) -> NodeAnalysis {
    analyze_node(&view(items), node, &Policy::default(), now())
}

/// The one line of `volume` in a drain of `node`.
fn line(items: &[Value], node: &str, volume: &str) -> String {
    let a = analyze(items, node);
    let v = a.volumes.iter().find(|v| v.volume == volume).unwrap_or_else(|| panic!("{volume} not in {a:?}"));
    v.line()
}

fn r2(items: &mut [Value], f: impl FnOnce(&mut Value)) {
    edit(items, "Replica", "vol-a-r-2", f);
}

fn mode(items: &mut [Value], m: &str) {
    edit(items, "Engine", "vol-a-e-0", |e| e["status"]["replicaModeMap"]["vol-a-r-2"] = json!(m));
}

fn rebuilding(items: &mut [Value], progress: i64) {
    mode(items, "WO");
    edit(items, "Engine", "vol-a-e-0", |e| {
        e["status"]["rebuildStatus"] =
            json!({"tcp://10.0.0.2:10000": {"isRebuilding": true, "progress": progress}});
        e["status"]["replicaTransitionTimeMap"] = json!({"vol-a-r-2": T});
    });
    r2(items, |r| r["spec"]["healthyAt"] = json!(""));
}

const LEAD: &str = "vol-a: last healthy replica is on node-1; its replica on node-2";
const ELSEWHERE: &str = "wait for Longhorn to rebuild a healthy replica elsewhere";
const ATTACH: &str = "attach the volume so Longhorn rebuilds a healthy replica elsewhere, then wait";

#[test]
fn deleting() {
    let mut items = base(false);
    r2(&mut items, |r| r["metadata"]["deletionTimestamp"] = json!(T));
    assert_eq!(line(&items, "node-1", "vol-a"), format!("{LEAD} is being deleted; {ATTACH}"));
}

#[test]
fn failed_with_a_time_and_without() {
    let mut items = base(false);
    r2(&mut items, |r| r["spec"]["failedAt"] = json!("2026-11-30T11:40:00Z"));
    assert_eq!(line(&items, "node-1", "vol-a"), format!("{LEAD} failed 20m ago; {ATTACH}"));
    r2(&mut items, |r| r["spec"]["failedAt"] = json!("yesterday"));
    assert_eq!(line(&items, "node-1", "vol-a"), format!("{LEAD} failed at yesterday; {ATTACH}"));
}

#[test]
fn rebuilding_moving_and_stalled() {
    let mut items = base(true);
    rebuilding(&mut items, 37);
    assert_eq!(line(&items, "node-1", "vol-a"), format!("{LEAD} is rebuilding (37%); wait for the rebuild"));
    let mut items = base(true);
    rebuilding(&mut items, 0);
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        format!("{LEAD} is stuck rebuilding at 0% for 30m; check its engine and instance manager")
    );
}

#[test]
fn rebuilding_without_a_status() {
    let mut items = base(true);
    mode(&mut items, "WO");
    assert_eq!(line(&items, "node-1", "vol-a"), format!("{LEAD} is rebuilding; {ELSEWHERE}"));
}

#[test]
fn not_yet_healthy_and_never_healthy() {
    let mut items = base(false);
    r2(&mut items, |r| r["spec"]["healthyAt"] = json!(""));
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        format!("{LEAD} is being rebuilt and not yet healthy; {ATTACH}")
    );
    r2(&mut items, |r| r["spec"]["lastHealthyAt"] = json!(""));
    assert_eq!(line(&items, "node-1", "vol-a"), format!("{LEAD} has never been healthy; {ATTACH}"));
}

#[test]
fn err_mode_and_not_in_the_engine() {
    let mut items = base(true);
    mode(&mut items, "ERR");
    assert_eq!(line(&items, "node-1", "vol-a"), format!("{LEAD} is in ERR mode; {ELSEWHERE}"));
    let mut items = base(true);
    edit(&mut items, "Engine", "vol-a-e-0", |e| {
        e["status"]["replicaModeMap"].as_object_mut().unwrap().remove("vol-a-r-2");
    });
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        format!("{LEAD} is not in its engine's replica set; {ELSEWHERE}")
    );
}

#[test]
fn no_node_unknown_node_cordoned_node() {
    let mut items = base(false);
    r2(&mut items, |r| {
        r["spec"]["nodeID"] = json!("");
        r["metadata"]["labels"]["longhornnode"] = json!("");
    });
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        format!("vol-a: last healthy replica is on node-1; its replica has no node; {ATTACH}")
    );
    let mut items = base(false);
    r2(&mut items, |r| r["spec"]["nodeID"] = json!("node-9"));
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        format!("vol-a: last healthy replica is on node-1; its replica on node-9 is on a node longhorn-guard does not see; {ATTACH}")
    );
    let mut items = base(false);
    edit(&mut items, "Node", "node-2", |n| n["spec"]["unschedulable"] = json!(true));
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        "vol-a: no other replica can protect it; its replica on node-2 is on a cordoned node; uncordon node-2, or evict the replica on node-1 in Longhorn (node or disk eviction) and wait for the rebuild elsewhere".to_string()
    );
}

#[test]
fn instance_manager_missing_or_not_running() {
    let mut items = base(false);
    edit(&mut items, "InstanceManager", &im_name("node-2", "v1"), |im| {
        im["status"]["currentState"] = json!("error")
    });
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        format!("{LEAD} has no running instance manager (state error); wait until the instance manager on node-2 is running")
    );
    let mut items = base(false);
    items.retain(|o| !(o["kind"] == "InstanceManager" && o["metadata"]["name"] == im_name("node-2", "v1")));
    r2(&mut items, |r| r["status"]["instanceManagerName"] = json!(""));
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        format!("{LEAD} has no instance manager; wait until the instance manager on node-2 is running")
    );
}

#[test]
fn replicas_with_no_node_are_counted_not_left_blank() {
    // The "its replicas on ,  each has never been healthy".
    let mut items = base(false);
    for r in ["vol-a-r-2", "vol-a-r-3"] {
        let mut x = replica("vol-a", r, "", "v1");
        x["spec"]["healthyAt"] = json!("");
        x["spec"]["lastHealthyAt"] = json!("");
        items.retain(|o| o["metadata"]["name"] != r);
        items.push(x);
    }
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        format!("vol-a: last healthy replica is on node-1; its 2 replicas with no node each has never been healthy; {ATTACH}")
    );
}

#[test]
fn several_replicas_on_one_other_node_are_counted() {
    let mut items = base(false);
    items.push(replica("vol-a", "vol-a-r-3", "node-2", "v1"));
    edit(&mut items, "Node", "node-2", |n| n["spec"]["unschedulable"] = json!(true));
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        "vol-a: no other replica can protect it; its 2 replicas on node-2 each is on a cordoned node; \
         uncordon node-2, or evict the replica on node-1 in Longhorn (node or disk eviction) and wait for the rebuild elsewhere"
    );
}

#[test]
fn every_replica_on_the_drained_node() {
    // The "no other replica exists (numberOfReplicas=2)" though a second one existed.
    let mut items = base(false);
    r2(&mut items, |r| r["spec"]["nodeID"] = json!("node-1"));
    r2(&mut items, |r| r["status"]["instanceManagerName"] = json!(im_name("node-1", "v1")));
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        "vol-a: all 2 healthy replicas are on node-1; all 2 of its replicas are on node-1 (numberOfReplicas=2); \
         evict the replicas on node-1 in Longhorn (node or disk eviction) and wait for the rebuild elsewhere"
    );
    // One replica, numberOfReplicas 3: "no other replica exists" is true then.
    items.retain(|o| o["metadata"]["name"] != "vol-a-r-2");
    edit(&mut items, "Volume", "vol-a", |v| v["spec"]["numberOfReplicas"] = json!(3));
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        "vol-a: last healthy replica is on node-1; no other replica exists (numberOfReplicas=3); \
         attach it so Longhorn rebuilds the missing replicas, then wait"
    );
}

/// A v2 volume attached through an engine frontend on node-1, its replicas on node-2/node-3.
fn v2_frontend_only() -> Vec<Value> {
    let mut items = three_nodes();
    items.push(volume("vol-v2", "v2", 2, "attached", "node-1"));
    items.push(replica("vol-v2", "vol-v2-r-1", "node-2", "v2"));
    items.push(replica("vol-v2", "vol-v2-r-2", "node-3", "v2"));
    edit(&mut items, "InstanceManager", &im_name("node-1", "v2"), |im| {
        im["status"]["instanceEngineFrontends"] = json!({"vol-v2-ef-0": {"status": {"state": "running"}}});
    });
    // The volume itself is not (yet) seen as attached to node-1.
    edit(&mut items, "Volume", "vol-v2", |v| v["status"]["currentNodeID"] = json!(""));
    items
}

#[test]
fn a_v2_engine_frontend_alone_blocks_naming_the_volume() {
    let items = v2_frontend_only();
    let a = analyze(&items, "node-1");
    assert!(a.would_block());
    assert_eq!(
        line(&items, "node-1", "vol-v2"),
        "vol-v2: attached to node-1 (engine frontend running in its instance manager); move its workload off node-1 first"
    );
}

#[test]
fn mixed_v1_and_v2_volumes() {
    let mut items = base(false);
    items.extend(v2_frontend_only().into_iter().filter(|o| {
        o["kind"] != "Node" && !o["kind"].as_str().unwrap().starts_with("Instance") && o["kind"] != "Pod"
    }));
    edit(&mut items, "InstanceManager", &im_name("node-1", "v2"), |im| {
        im["status"]["instanceEngineFrontends"] = json!({"vol-v2-ef-0": {}});
        im["status"]["instanceEngines"] = json!({"vol-v2-e-0": {}});
    });
    edit(&mut items, "Node", "node-2", |n| n["spec"]["unschedulable"] = json!(true));
    let a = analyze(&items, "node-1");
    let lines: Vec<String> = a.blocking().map(|v| v.line()).collect();
    assert_eq!(
        lines,
        [
            "vol-a: no other replica can protect it; its replica on node-2 is on a cordoned node; uncordon node-2, or evict the replica on node-1 in Longhorn (node or disk eviction) and wait for the rebuild elsewhere".to_string(),
            "vol-v2: attached to node-1 (engine and engine frontend running in its instance manager); move its workload off node-1 first"
                .to_string(),
        ]
    );
}

#[test]
fn an_entry_no_volume_owns_blocks_naming_it_and_its_instance_manager() {
    let mut items = three_nodes();
    edit(&mut items, "InstanceManager", &im_name("node-1", "v2"), |im| {
        im["status"]["instanceEngineFrontends"] = json!({"gone-ef-3": {}});
        im["status"]["instanceEngines"] = json!({"not-a-longhorn-name": {}});
    });
    let a = analyze(&items, "node-1");
    assert!(a.volumes.is_empty());
    assert!(a.would_block());
    let lines: Vec<String> = a.blocking_unmapped().map(|u| u.line()).collect();
    assert_eq!(
        lines,
        [
            "engine not-a-longhorn-name in instance manager instance-manager-v2-node-1: no known volume owns it; \
             wait until Longhorn stops it, or check that instance manager",
            "engine frontend gone-ef-3 in instance manager instance-manager-v2-node-1: no known volume owns it; \
             wait until Longhorn stops it, or check that instance manager",
        ]
    );
    // A node override lets it through, as it does volumes.
    edit(&mut items, "Node", "node-1", |n| {
        n["metadata"]["annotations"] = json!({"longhorn-guard.io/allow-drain": "replacing it"})
    });
    let a = analyze(&items, "node-1");
    assert!(!a.would_block());
    assert!(a.unmapped_instances.iter().all(|u| u.overridden));
}

#[test]
fn nodes_drained_for_removal_and_evicted_instance_managers_do_not_vouch() {
    // An autoscaler taints the node it removes and evicts without cordoning.
    let mut items = base(false);
    edit(&mut items, "Node", "node-2", |n| {
        n["spec"]["taints"] = json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
    });
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        format!(
            "vol-a: no other replica can protect it; its replica on node-2 is on a node tainted \
             karpenter.sh/disrupted (being drained for removal); node-2 is being removed: evict the replica on \
             node-1 in Longhorn (node or disk eviction) and wait for the rebuild on a node that stays"
        )
    );
    // Two such nodes never vouch for each other.
    edit(&mut items, "Node", "node-1", |n| {
        n["spec"]["taints"] =
            json!([{"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}])
    });
    assert!(analyze(&items, "node-2").would_block());
    // A node being deleted.
    let mut items = base(false);
    edit(&mut items, "Node", "node-2", |n| n["metadata"]["deletionTimestamp"] = json!(T));
    assert!(line(&items, "node-1", "vol-a").contains("its replica on node-2 is on a node being deleted"));
    // The instance manager's pod is being evicted: its replicas go with it.
    let mut items = base(false);
    edit(&mut items, "Pod", &im_name("node-2", "v1"), |p| p["metadata"]["deletionTimestamp"] = json!(T));
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        format!("{LEAD} has no running instance manager (state terminating); wait until the instance manager on node-2 is running")
    );
    // A replica naming an instance manager that does not exist has none (Longhorn finds none).
    let mut items = base(false);
    r2(&mut items, |r| r["status"]["instanceManagerName"] = json!("instance-manager-gone"));
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        format!("{LEAD} has no instance manager; wait until the instance manager on node-2 is running")
    );
}

#[test]
fn a_strict_local_volume_gets_a_remedy_longhorn_accepts() {
    // Longhorn refuses a second replica of a strict-local volume, and its workload cannot run
    // on another node: neither "raise numberOfReplicas" nor "move its workload" can work.
    const REMEDY: &str =
        "it is strict-local, so its only replica stays on node-1: back it up and restore it \
                          elsewhere, or override with the longhorn-guard.io/allow-drain annotation";
    let mut items = three_nodes();
    let mut v = volume("vol-sl", "v1", 1, "detached", "");
    v["spec"]["dataLocality"] = json!("strict-local");
    items.push(v);
    items.push(replica("vol-sl", "vol-sl-r-1", "node-1", "v1"));
    assert_eq!(line(&items, "node-1", "vol-sl"), format!("vol-sl: 1 replica (numberOfReplicas=1); {REMEDY}"));
    // Attached on the node: the same remedy, not "move its workload".
    edit(&mut items, "Volume", "vol-sl", |v| {
        v["status"] = json!({"state": "attached", "currentNodeID": "node-1"})
    });
    items.push(engine("vol-sl", "node-1", "v1", &[("vol-sl-r-1", "RW")]));
    let got = line(&items, "node-1", "vol-sl");
    assert!(got.starts_with("vol-sl: attached to node-1") && got.ends_with(REMEDY), "{got}");
}

#[test]
fn a_healthy_copy_on_a_cordoned_node_is_not_called_missing() {
    // The drained node's replica is not healthy; the healthy one is on cordoned node-2: its
    // data is not "only on node-1", and evicting node-1's replica would not help.
    let mut items = base(false);
    edit(&mut items, "Replica", "vol-a-r-1", |r| {
        r["spec"]["healthyAt"] = json!("");
        r["spec"]["lastHealthyAt"] = json!(T);
    });
    edit(&mut items, "Node", "node-2", |n| n["spec"]["unschedulable"] = json!(true));
    assert_eq!(
        line(&items, "node-1", "vol-a"),
        "vol-a: no other replica can protect it; its replica on node-2 is on a cordoned node; uncordon node-2"
    );
}

/// Longhorn 1.10 still lists an old instance manager's engines and replicas in
/// `status.instances` (and counts them before it lets the budget go): an engine there blocks
/// its node as one in `instanceEngines` does (it/longhorn_versions: only 1.10 has the map).
#[test]
fn an_engine_listed_in_status_instances_blocks_its_node() {
    let mut items = three_nodes();
    assert!(!analyze(&items, "node-1").would_block());
    edit(&mut items, "InstanceManager", &im_name("node-1", "v1"), |im| {
        im["status"]["instances"] = json!({
            "old-e-4d2a1f0b": {"spec": {"name": "old-e-4d2a1f0b"}, "status": {"type": "engine", "state": "running"}},
            "old-r-77e0c3a1": {"spec": {"name": "old-r-77e0c3a1"}, "status": {"type": "replica", "state": "running"}}});
    });
    let a = analyze(&items, "node-1");
    let lines: Vec<String> = a.blocking_unmapped().map(|u| u.line()).collect();
    assert_eq!(
        lines,
        ["engine old-e-4d2a1f0b in instance manager instance-manager-v1-node-1: no known volume owns it; \
          wait until Longhorn stops it, or check that instance manager"]
    );
}
