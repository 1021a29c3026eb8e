//! Property: over many random cluster states, adding a protecting replica on another node
//! never turns an allowed drain into a denied one, and removing a protecting replica never
//! turns a denied drain into an allowed one.

use crate::support::states;

use longhorn_guard::admission::parse_review;
use longhorn_guard::cluster::{ClusterView, Source};
use longhorn_guard::policy::drain::analyze_node;
use longhorn_guard::policy::{self, Policy};
use proptest::prelude::*;
use serde_json::{json, Value};
use states::now;

const EVICTION: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/admission/eviction-create.json");
const NODES: usize = 4; // node-0 is drained

#[derive(Clone, Debug)]
struct ReplicaSpec {
    node: usize,
    healthy_at: bool,
    failed_at: bool,
    last_healthy_at: bool,
    last_failed_at: bool,
    deleting: bool,
    stopped: bool,
    im_name: bool,
    /// 0 RW, 1 WO, 2 ERR, 3 absent from the engine's map (never protects when the map is
    /// non-empty: the engine does not use it).
    mode: u8,
    progress: i64,
}

#[derive(Clone, Debug)]
struct VolumeSpec {
    attached: bool,
    engine_node: usize,
    number: i64,
    replicas: Vec<ReplicaSpec>,
}

#[derive(Clone, Debug)]
struct NodeSpec {
    cordoned: bool,
    /// 0 running, 1 error, 2 starting.
    im_state: u8,
}

#[derive(Clone, Debug)]
struct Cluster {
    nodes: Vec<NodeSpec>,
    volumes: Vec<VolumeSpec>,
}

fn replica_spec() -> impl Strategy<Value = ReplicaSpec> {
    use prop::bool::weighted;
    (
        (0..NODES, weighted(0.75), weighted(0.15), any::<bool>(), any::<bool>()),
        (weighted(0.1), weighted(0.3), any::<bool>(), prop_oneof![4 => Just(0u8), 1 => 1u8..4], 0i64..=100),
    )
        .prop_map(
            |(
                (node, healthy_at, failed_at, last_healthy_at, last_failed_at),
                (deleting, stopped, im_name, mode, progress),
            )| {
                ReplicaSpec {
                    node,
                    healthy_at,
                    failed_at,
                    last_healthy_at,
                    last_failed_at,
                    deleting,
                    stopped,
                    im_name,
                    mode,
                    progress,
                }
            },
        )
}

fn volume_spec() -> impl Strategy<Value = VolumeSpec> {
    (any::<bool>(), 0..NODES, 1i64..=3, prop::collection::vec(replica_spec(), 1..4)).prop_map(
        |(attached, engine_node, number, replicas)| VolumeSpec { attached, engine_node, number, replicas },
    )
}

fn cluster() -> impl Strategy<Value = Cluster> {
    (
        prop::collection::vec(
            (prop::bool::weighted(0.25), prop_oneof![3 => Just(0u8), 1 => 1u8..3])
                .prop_map(|(c, s)| NodeSpec { cordoned: c, im_state: s }),
            NODES,
        ),
        prop::collection::vec(volume_spec(), 1..4),
    )
        .prop_map(|(nodes, volumes)| Cluster { nodes, volumes })
}

const T: &str = "2026-11-30T11:00:00Z";

fn ts(on: bool) -> &'static str {
    if on {
        T
    } else {
        ""
    }
}

fn im_name(n: usize) -> String {
    format!("instance-manager-{n:032}")
}

fn build(c: &Cluster) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, n) in c.nodes.iter().enumerate() {
        let node = format!("node-{i}");
        out.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
            "spec": {"unschedulable": n.cordoned}}));
        let state = ["running", "error", "starting"][n.im_state as usize];
        out.push(json!({"apiVersion": "longhorn.io/v1beta2", "kind": "InstanceManager",
            "metadata": {"name": im_name(i), "namespace": "longhorn-system"},
            "spec": {"nodeID": node, "type": "aio", "dataEngine": "v1"},
            "status": {"currentState": state}}));
        out.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": im_name(i), "namespace": "longhorn-system",
                "labels": {"longhorn.io/component": "instance-manager", "longhorn.io/node": node}},
            "spec": {"nodeName": node}}));
    }
    for (vi, v) in c.volumes.iter().enumerate() {
        let vol = format!("vol-{vi}");
        let mut modes = serde_json::Map::new();
        let mut addrs = serde_json::Map::new();
        let mut rebuilds = serde_json::Map::new();
        for (ri, r) in v.replicas.iter().enumerate() {
            let name = format!("{vol}-r-{ri}");
            let ip = format!("10.0.{}.{}", r.node, vi * 10 + ri);
            let mut meta = json!({"name": name, "namespace": "longhorn-system",
                "labels": {"longhornvolume": vol, "longhornnode": format!("node-{}", r.node)}});
            if r.deleting {
                meta["deletionTimestamp"] = json!(T);
            }
            let st = if r.stopped { "stopped" } else { "running" };
            out.push(json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Replica", "metadata": meta,
                "spec": {"volumeName": vol, "nodeID": format!("node-{}", r.node), "dataEngine": "v1",
                    "desireState": st, "healthyAt": ts(r.healthy_at), "failedAt": ts(r.failed_at),
                    "lastHealthyAt": ts(r.last_healthy_at), "lastFailedAt": ts(r.last_failed_at)},
                "status": {"currentState": st, "ip": ip, "storageIP": ip, "port": 10000,
                    "instanceManagerName": if r.im_name { im_name(r.node) } else { String::new() }}}));
            if r.mode < 3 {
                modes.insert(name.clone(), json!(["RW", "WO", "ERR"][r.mode as usize]));
                addrs.insert(name.clone(), json!(format!("{ip}:10000")));
            }
            if r.mode == 1 {
                rebuilds.insert(
                    format!("tcp://{ip}:10000"),
                    json!({"isRebuilding": true, "progress": r.progress}),
                );
            }
        }
        let (state, cur) = if v.attached {
            ("attached", format!("node-{}", v.engine_node))
        } else {
            ("detached", String::new())
        };
        out.push(json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
            "metadata": {"name": vol, "namespace": "longhorn-system"},
            "spec": {"numberOfReplicas": v.number},
            "status": {"state": state, "currentNodeID": cur}}));
        if v.attached {
            out.push(json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Engine",
                "metadata": {"name": format!("{vol}-e-0"), "namespace": "longhorn-system",
                    "labels": {"longhornvolume": vol, "longhornnode": cur}},
                "spec": {"volumeName": vol, "nodeID": cur, "active": true},
                "status": {"currentState": "running", "replicaModeMap": modes,
                    "currentReplicaAddressMap": addrs, "rebuildStatus": rebuilds}}));
        }
    }
    out
}

fn view(items: &[Value]) -> ClusterView {
    let objects = items.iter().map(|o| states::object(o).expect("a kind the view holds"));
    ClusterView::from_objects(Source::Snapshot("prop".into()), objects, now())
}

/// The eviction decision for node-0's instance-manager pod, and the analysis's view of it.
fn allowed(items: &[Value]) -> bool {
    let mut body: Value = serde_json::from_str(&std::fs::read_to_string(EVICTION).unwrap()).unwrap();
    body["request"]["name"] = json!(im_name(0));
    let req = parse_review(body.to_string().as_bytes()).unwrap();
    let v = view(items);
    let d = policy::validate(&req, &v, &Policy::default(), now());
    let a = analyze_node(&v, "node-0", &Policy::default(), now());
    assert_eq!(d.allowed, !a.would_block(), "the rule and the analysis disagree");
    d.allowed
}

/// Adds to volume `vi` a replica that protects by definition: healthy and not failed, RW
/// in the engine, on node-9 (schedulable, with a running instance manager and its pod).
fn add_protecting(items: &mut Vec<Value>, vi: usize) {
    let vol = format!("vol-{vi}");
    let name = format!("{vol}-r-extra");
    if !items.iter().any(|o| o["kind"] == "Node" && o["metadata"]["name"] == "node-9") {
        items.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-9"}, "spec": {}}));
        items.push(json!({"apiVersion": "longhorn.io/v1beta2", "kind": "InstanceManager",
            "metadata": {"name": im_name(9), "namespace": "longhorn-system"},
            "spec": {"nodeID": "node-9", "type": "aio", "dataEngine": "v1"}, "status": {"currentState": "running"}}));
        items.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": im_name(9), "namespace": "longhorn-system",
                "labels": {"longhorn.io/component": "instance-manager", "longhorn.io/node": "node-9"}},
            "spec": {"nodeName": "node-9"}}));
    }
    items.push(json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
        "metadata": {"name": name, "namespace": "longhorn-system", "labels": {"longhornvolume": vol, "longhornnode": "node-9"}},
        "spec": {"volumeName": vol, "nodeID": "node-9", "dataEngine": "v1", "desireState": "running",
            "healthyAt": T, "lastHealthyAt": T, "failedAt": "", "lastFailedAt": ""},
        "status": {"currentState": "running", "instanceManagerName": im_name(9), "ip": "10.0.9.1", "storageIP": "10.0.9.1", "port": 10000}}));
    if let Some(e) =
        items.iter_mut().find(|o| o["kind"] == "Engine" && o["metadata"]["name"] == format!("{vol}-e-0"))
    {
        e["status"]["replicaModeMap"][&name] = json!("RW");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn adding_a_protecting_replica_never_turns_allow_into_deny(c in cluster(), pick in any::<prop::sample::Index>()) {
        let mut items = build(&c);
        let before = allowed(&items);
        add_protecting(&mut items, pick.index(c.volumes.len()));
        let after = allowed(&items);
        prop_assert!(!before || after, "allow became deny after adding a protecting replica: {c:?}");
    }

    #[test]
    fn removing_a_protecting_replica_never_turns_deny_into_allow(
        c in cluster(),
        pick in any::<prop::sample::Index>(),
        extra in any::<Option<prop::sample::Index>>(),
    ) {
        let mut items = build(&c);
        if let Some(vi) = extra {
            add_protecting(&mut items, vi.index(c.volumes.len()));
        }
        let before = allowed(&items);
        let a = analyze_node(&view(&items), "node-0", &Policy::default(), now());
        let protecting: Vec<String> = a.volumes.iter().flat_map(|v| v.protecting.clone()).collect();
        prop_assume!(!protecting.is_empty());
        let gone = &protecting[pick.index(protecting.len())];
        items.retain(|o| !(o["kind"] == "Replica" && o["metadata"]["name"] == gone.as_str()));
        let after = allowed(&items);
        prop_assert!(before || !after, "deny became allow after removing {gone}: {c:?}");
    }

    #[test]
    fn a_replica_its_running_engine_does_not_list_never_protects(c in cluster()) {
        let items = build(&c);
        let a = analyze_node(&view(&items), "node-0", &Policy::default(), now());
        for v in &a.volumes {
            let vi: usize = v.volume.trim_start_matches("vol-").parse().unwrap();
            let spec = &c.volumes[vi];
            // The engine's map is non-empty when any replica has a mode (0..3).
            if !spec.attached || spec.replicas.iter().all(|r| r.mode == 3) {
                continue;
            }
            for (ri, r) in spec.replicas.iter().enumerate() {
                if r.mode == 3 {
                    let name = format!("{}-r-{ri}", v.volume);
                    prop_assert!(!v.protecting.contains(&name), "{name} protects: {v:?}");
                }
            }
        }
    }

    #[test]
    fn a_volume_with_a_protecting_replica_and_no_engine_on_the_node_is_safe(c in cluster()) {
        let items = build(&c);
        let a = analyze_node(&view(&items), "node-0", &Policy::default(), now());
        for v in &a.volumes {
            if !v.protecting.is_empty() && !v.attached_here {
                prop_assert_eq!(v.verdict, longhorn_guard::policy::drain::Verdict::Safe, "{:?}", v);
            }
        }
    }
}
