//! Property: the drain index kept current event by event gives, for every node and both
//! values of `drain.protectStoppedReplicas`, exactly the blocking and overridden volumes of
//! the full analysis (`analyze_node`), with the same reports, over random views and random
//! sequences of upserts and deletes of every kind the drain rule reads. And every snapshot
//! shipped in the repository and the fixtures gives the same answers both ways.

use crate::support::states;

use std::path::Path;

use longhorn_guard::cluster::{snapshot, ClusterView, Object, ObjectKind, Source};
use longhorn_guard::policy::drain::{
    analyze_node_with, Blockers, DrainIndex, Explained, NodeAnalysis, Verdict, VolumeReport,
};
use longhorn_guard::policy::Policy;
use proptest::prelude::*;
use serde_json::{json, Value};
use states::now;

const NODES: usize = 4;
const VOLUMES: usize = 4;
const T: &str = "2026-11-30T11:00:00Z";

fn node(i: usize) -> String {
    if i < NODES {
        format!("node-{i}")
    } else {
        String::new()
    }
}

fn ts(on: bool) -> &'static str {
    if on {
        T
    } else {
        ""
    }
}

fn lh(kind: &str, name: &str, labels: Value) -> Value {
    json!({"apiVersion": "longhorn.io/v1beta2", "kind": kind,
        "metadata": {"name": name, "namespace": "longhorn-system", "labels": labels}})
}

fn replica() -> impl Strategy<Value = Value> {
    (
        (
            0..VOLUMES,
            0..3usize,
            0..=NODES,
            any::<bool>(),
            prop::bool::weighted(0.2),
            any::<bool>(),
            any::<bool>(),
        ),
        (prop::bool::weighted(0.1), prop::bool::weighted(0.3), 0..8usize, prop::bool::weighted(0.1)),
    )
        .prop_map(|((vi, j, n, healthy, failed, lh_, lf), (deleting, stopped, im, label_only))| {
            let vol = format!("vol-{vi}");
            let mut o = lh(
                "Replica",
                &format!("{vol}-r-{j}"),
                json!({"longhornvolume": vol, "longhornnode": node(n)}),
            );
            if deleting {
                o["metadata"]["deletionTimestamp"] = json!(T);
            }
            let st = if stopped { "stopped" } else { "running" };
            let ip = format!("10.0.{vi}.{j}");
            o["spec"] = json!({"volumeName": if label_only { String::new() } else { vol.clone() },
                "nodeID": if label_only { String::new() } else { node(n) }, "dataEngine": "v1",
                "desireState": st, "healthyAt": ts(healthy), "failedAt": ts(failed),
                "lastHealthyAt": ts(lh_), "lastFailedAt": ts(lf)});
            o["status"] = json!({"currentState": st, "ip": ip, "storageIP": ip, "port": 1000 + j,
                "instanceManagerName": if im < 6 { format!("im-{im}") } else { String::new() }});
            o
        })
}

fn engine() -> impl Strategy<Value = Value> {
    (
        (0..VOLUMES, 0..2usize, 0..=NODES, 0..3usize, any::<bool>()),
        (prop::collection::vec(0..4u8, 3), prop::option::of((0..3usize, 0..=100i64))),
    )
        .prop_map(|((vi, j, n, state, active), (modes, rebuild))| {
            let vol = format!("vol-{vi}");
            let mut o = lh(
                "Engine",
                &format!("{vol}-e-{j}"),
                json!({"longhornvolume": vol, "longhornnode": node(n)}),
            );
            let mut mode_map = serde_json::Map::new();
            let mut addrs = serde_json::Map::new();
            for (r, m) in modes.iter().enumerate() {
                if *m > 0 {
                    let name = format!("{vol}-r-{r}");
                    mode_map.insert(name.clone(), json!((["RW", "WO", "ERR"][*m as usize - 1])));
                    addrs.insert(name, json!(format!("10.0.{vi}.{r}:{}", 1000 + r)));
                }
            }
            let rebuilds = rebuild.map_or(json!({}), |(r, p)| {
                json!({format!("tcp://10.0.{vi}.{r}:{}", 1000 + r): {"isRebuilding": true, "progress": p}})
            });
            o["spec"] = json!({"volumeName": vol, "nodeID": node(n), "active": active});
            o["status"] = json!({"currentState": (["running", "stopped", "starting"][state]),
                "replicaModeMap": mode_map, "currentReplicaAddressMap": addrs, "rebuildStatus": rebuilds,
                "replicaTransitionTimeMap": {}});
            o
        })
}

fn volume() -> impl Strategy<Value = Value> {
    (0..VOLUMES, 0..4usize, 0..=NODES, 1..=3i64, prop::bool::weighted(0.15)).prop_map(
        |(vi, state, n, number, allow)| {
            let mut o = lh("Volume", &format!("vol-{vi}"), json!({}));
            if allow {
                o["metadata"]["annotations"] = json!({"longhorn-guard.io/allow-drain": "test"});
            }
            o["spec"] = json!({"numberOfReplicas": number});
            o["status"] = json!({"state": (["attached", "detached", "attaching", ""][state]), "currentNodeID": node(n)});
            o
        },
    )
}

fn k8s_node() -> impl Strategy<Value = Value> {
    (0..NODES, prop::bool::weighted(0.3), prop::bool::weighted(0.1), 0..6usize).prop_map(
        |(n, cordoned, allow, removal)| {
            let mut o = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node(n)},
                "spec": {"unschedulable": cordoned}});
            if allow {
                o["metadata"]["annotations"] = json!({"longhorn-guard.io/allow-drain": "node test"});
            }
            // Drained for removal by an autoscaler (taint), a taint that is not one, or deleted.
            match removal {
                0 => {
                    o["spec"]["taints"] =
                        json!([{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}])
                }
                1 => {
                    o["spec"]["taints"] =
                        json!([{"key": "karpenter.sh/disrupted", "effect": "PreferNoSchedule"}])
                }
                2 => o["metadata"]["deletionTimestamp"] = json!(T),
                _ => {}
            }
            o
        },
    )
}

/// The pod of instance manager `im-{k}`, on its node or elsewhere, maybe being evicted.
fn instance_manager_pod() -> impl Strategy<Value = Value> {
    (0..6usize, 0..=NODES, any::<bool>()).prop_map(|(k, n, terminating)| {
        let mut o = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("im-{k}"), "namespace": "longhorn-system",
                "labels": {"longhorn.io/component": "instance-manager", "longhorn.io/node": node(n)}},
            "spec": {"nodeName": node(n)}});
        if terminating {
            o["metadata"]["deletionTimestamp"] = json!(T);
        }
        o
    })
}

fn instance_manager() -> impl Strategy<Value = Value> {
    (0..6usize, 0..=NODES, 0..3usize, 0..3usize, any::<bool>(), prop::collection::vec(any::<bool>(), 9)).prop_map(
        |(k, n, type_, state, image, engines)| {
            let mut o = lh("InstanceManager", &format!("im-{k}"), json!({}));
            let (mut names, mut frontends) = (serde_json::Map::new(), serde_json::Map::new());
            for (i, on) in engines.iter().enumerate() {
                if *on {
                    let name = if i == 8 { "ghost-e-0".to_string() } else { format!("vol-{}-e-{}", i / 2, i % 2) };
                    names.insert(name, json!({"status": {"state": "running"}}));
                }
            }
            // v2 engine frontends: of a volume, of an unknown volume, and a name no volume implies.
            for (i, on) in engines.iter().take(4).enumerate() {
                if *on && type_ != 1 {
                    let name = ["vol-1-ef-0", "ghost-ef-1", "not-a-frontend", "vol-3-ef-2"][i];
                    frontends.insert(name.to_string(), json!({"status": {"state": "running"}}));
                }
            }
            o["spec"] = json!({"nodeID": node(n), "type": (["aio", "replica", "engine"][type_]), "dataEngine": "v1",
                "image": if image { "img-a" } else { "img-b" }});
            o["status"] = json!({"currentState": (["running", "error", "starting"][state]), "instanceEngines": names,
                "instanceEngineFrontends": frontends});
            o
        },
    )
}

fn setting() -> impl Strategy<Value = Value> {
    (any::<bool>(), 0..3usize).prop_map(|(which, value)| {
        let (name, value) = if which {
            ("default-instance-manager-image", ["img-a", "img-b", ""][value])
        } else {
            ("storage-network", ["", "kube-system/storage", ""][value])
        };
        let mut o = lh("Setting", name, json!({}));
        o["value"] = json!(value);
        o
    })
}

fn object() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => replica(),
        2 => engine(),
        2 => volume(),
        1 => k8s_node(),
        2 => instance_manager(),
        1 => instance_manager_pod(),
        1 => setting(),
    ]
}

#[derive(Clone, Debug)]
enum Event {
    Upsert(Value),
    /// Delete the object with the same kind and name as this one.
    Delete(Value),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![3 => object().prop_map(Event::Upsert), 1 => object().prop_map(Event::Delete)]
}

fn parse(o: &Value) -> Object {
    states::object(o).expect("a kind the view holds")
}

fn policies() -> [Policy; 2] {
    let mut lenient = Policy::default();
    lenient.drain.protect_stopped_replicas = false;
    [Policy::default(), lenient]
}

/// The blocking and overridden reports, in order.
fn not_safe(a: &NodeAnalysis) -> Vec<VolumeReport> {
    a.volumes.iter().filter(|v| v.verdict != Verdict::Safe).cloned().collect()
}

/// Every node (and a node the view does not know) agrees between the index and the full
/// analysis, with and without a node override.
fn assert_agrees(view: &ClusterView, context: &str) -> Result<(), TestCaseError> {
    let index = view.derived::<DrainIndex>().expect("every view keeps a drain index");
    let mut nodes: Vec<String> = (0..NODES).map(node).collect();
    nodes.push("node-x".into());
    for policy in policies() {
        for n in &nodes {
            for over in [None, Some("maintenance".to_string())] {
                let full = analyze_node_with(view, n, &policy, now(), over.clone());
                let fast = index.analyze(view, n, &policy, now(), over.clone());
                prop_assert_eq!(
                    not_safe(&full),
                    fast.volumes.clone(),
                    "{} node {} protectStoppedReplicas {}",
                    context,
                    n,
                    policy.drain.protect_stopped_replicas
                );
                prop_assert_eq!(&full.node_override, &fast.node_override);
                prop_assert_eq!(
                    &full.unmapped_instances,
                    &fast.unmapped_instances,
                    "{} node {} unmapped entries",
                    context,
                    n
                );
                // What the admission path decides by name, and the reports it renders on demand.
                let b = Blockers::of(view, n, &policy, over.clone());
                let names = |verdict: Verdict| -> Vec<String> {
                    full.volumes.iter().filter(|v| v.verdict == verdict).map(|v| v.volume.clone()).collect()
                };
                let blocking: Vec<String> = b.blocking.iter().map(|v| v.to_string()).collect();
                let overridden: Vec<String> = b.overridden.iter().map(|(v, _)| v.to_string()).collect();
                prop_assert_eq!(names(Verdict::Block), blocking, "{} node {} blocking", context, n);
                prop_assert_eq!(names(Verdict::Overridden), overridden, "{} node {} overridden", context, n);
                prop_assert_eq!(&full.unmapped_instances, &b.unmapped, "{} node {} entries", context, n);
                prop_assert_eq!(full.would_block(), b.would_block());
                let rendered: Vec<Explained> = b.reports(
                    b.blocking.iter().chain(b.overridden.iter().map(|(v, _)| v)),
                    usize::MAX,
                    &policy,
                    now(),
                );
                let mut expected = not_safe(&full);
                expected.sort_by_key(|v| v.verdict != Verdict::Block);
                let expected: Vec<Explained> = expected.iter().map(VolumeReport::explained).collect();
                prop_assert_eq!(expected, rendered, "{} node {} reports", context, n);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_incremental_index_matches_the_full_analysis(
        initial in prop::collection::vec(object(), 0..24),
        events in prop::collection::vec(event(), 1..24),
    ) {
        let mut view = ClusterView::from_objects(Source::Watch, initial.iter().map(parse), now()).derive(longhorn_guard::policy::drain::derivations(), now());
        assert_agrees(&view, "initial view")?;
        let key = |o: &Object| (o.kind(), o.name().to_string());
        let mut state: std::collections::BTreeMap<(ObjectKind, String), Object> =
            initial.iter().map(parse).map(|o| (key(&o), o)).collect();
        for (i, e) in events.iter().enumerate() {
            match e {
                Event::Upsert(o) => {
                    let o = parse(o);
                    state.insert(key(&o), o.clone());
                    view.upsert(o, now());
                }
                Event::Delete(o) => {
                    let o = parse(o);
                    state.remove(&key(&o));
                    view.remove(o.kind(), o.metadata().namespace.as_deref(), o.name());
                }
            }
            assert_agrees(&view, &format!("after event {i} ({e:?})"))?;
        }
        // Relisting every kind into the first view, kind by kind, gives the same answers.
        let mut relisted = ClusterView::from_objects(Source::Watch, initial.iter().map(parse), now()).derive(longhorn_guard::policy::drain::derivations(), now());
        for kind in ObjectKind::ALL {
            let objects = state.values().filter(|o| o.kind() == kind).cloned().collect();
            relisted.replace_kind(kind, objects, now());
        }
        assert_agrees(&relisted, "after a relist")?;
    }
}

/// Every snapshot in the repository and the shared fixtures: the index answers as the full
/// analysis for every node it names.
#[test]
fn every_shipped_snapshot_gives_the_same_answers_from_the_index() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [root.join("demo"), root.join("../shared/fixtures")] {
        collect(&dir, &mut files);
    }
    let mut checked = 0;
    for f in files {
        let Ok(view) = snapshot::load(&f) else { continue };
        let view = view.derive(longhorn_guard::policy::drain::derivations(), now());
        if view.volume_names().next().is_none() {
            continue;
        }
        let index = view.derived::<DrainIndex>().expect("drain index");
        let nodes: Vec<String> = view.longhorn_nodes().filter_map(|n| n.metadata.name.clone()).collect();
        for policy in policies() {
            for n in &nodes {
                let full = analyze_node_with(&view, n, &policy, now(), None);
                let fast = index.analyze(&view, n, &policy, now(), None);
                assert_eq!(not_safe(&full), fast.volumes, "{} node {n}", f.display());
                assert_eq!(full.unmapped_instances, fast.unmapped_instances, "{} node {n}", f.display());
            }
        }
        checked += 1;
    }
    assert!(checked >= 2, "expected snapshots under demo/ and ../shared/fixtures, checked {checked}");
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "json" || x == "yaml" || x == "yml") {
            out.push(p);
        }
    }
}

/// A missing instance-manager pod means "its process is gone" only in a view that holds
/// instance-manager pods: the first to arrive and the last to leave (here im-2's, on a node
/// without replicas) change the verdict of volumes on every other instance manager, and the
/// index recomputes them.
#[test]
fn the_first_and_the_last_instance_manager_pod_change_every_verdict() {
    let mut objects = Vec::new();
    for k in 0..3 {
        let mut im = lh("InstanceManager", &format!("im-{k}"), json!({}));
        im["spec"] = json!({"nodeID": node(k), "type": "aio", "dataEngine": "v1", "image": "img-a"});
        im["status"] = json!({"currentState": "running"});
        objects.push(im);
        objects.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node(k)}, "spec": {}}));
        if k == 2 {
            continue;
        }
        let mut r = lh(
            "Replica",
            &format!("vol-0-r-{k}"),
            json!({"longhornvolume": "vol-0", "longhornnode": node(k)}),
        );
        r["spec"] = json!({"volumeName": "vol-0", "nodeID": node(k), "dataEngine": "v1", "desireState": "running",
            "healthyAt": T, "lastHealthyAt": T});
        r["status"] = json!({"currentState": "running", "instanceManagerName": format!("im-{k}")});
        objects.push(r);
    }
    let mut vol = lh("Volume", "vol-0", json!({}));
    vol["spec"] = json!({"numberOfReplicas": 2});
    vol["status"] = json!({"state": "detached", "currentNodeID": ""});
    objects.push(vol);
    let pod = |k: usize| {
        parse(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("im-{k}"), "namespace": "longhorn-system",
                "labels": {"longhorn.io/component": "instance-manager", "longhorn.io/node": node(k)}},
            "spec": {"nodeName": node(k)}}))
    };
    let blocks = |view: &ClusterView| {
        let index = view.derived::<DrainIndex>().unwrap();
        !index.analyze(view, "node-0", &Policy::default(), now(), None).volumes.is_empty()
    };
    let mut view = ClusterView::from_objects(Source::Watch, objects.iter().map(parse), now())
        .derive(longhorn_guard::policy::drain::derivations(), now());
    let ns = Some("longhorn-system");
    type Step<'a> = Box<dyn Fn(&mut ClusterView) + 'a>;
    let manager = parse(&json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "longhorn-manager-x", "namespace": "longhorn-system",
            "labels": {"app": "longhorn-manager"}}, "spec": {"nodeName": node(0)}}));
    let steps: [(&str, Step<'_>, bool); 6] = [
        ("no pods: the state alone decides", Box::new(|_| {}), false),
        // Only instance-manager pods count: a confirmation reads no other.
        ("another pod there", Box::new(|v| v.upsert(manager.clone(), now())), false),
        ("the first pod (im-2's) arrives: im-1's is gone", Box::new(|v| v.upsert(pod(2), now())), true),
        ("im-1's pod arrives", Box::new(|v| v.upsert(pod(1), now())), false),
        ("im-1's pod leaves", Box::new(|v| v.remove(ObjectKind::Pod, ns, "im-1")), true),
        ("the last pod (im-2's) leaves", Box::new(|v| v.remove(ObjectKind::Pod, ns, "im-2")), false),
    ];
    for (what, step, want) in steps {
        step(&mut view);
        assert_agrees(&view, what).unwrap();
        assert_eq!(blocks(&view), want, "{what}");
    }
}
