//! Small cluster states as JSON objects (the shapes `kubectl get -o json` returns), turned
//! into a view: the one way the tests build a view from objects by hand. It stands alone, so a
//! test that needs nothing else of the support tree includes it by path
//! (`#[path = "support/states.rs"] mod states;`).
#![allow(dead_code)]

use std::time::SystemTime;

use longhorn_guard::cluster::{ClusterView, Object, ObjectKind, Source};
use serde_json::{json, Value};

/// The fixed "now" of these views.
pub fn now() -> SystemTime {
    SystemTime::from(
        time::OffsetDateTime::parse("2026-11-30T12:00:00Z", &time::format_description::well_known::Rfc3339)
            .unwrap(),
    )
}

/// A time 30 minutes before [`now`].
pub const T: &str = "2026-11-30T11:30:00Z";

/// The typed object of a JSON object of a kind the view holds (`None` for other kinds).
pub fn object(o: &Value) -> Option<Object> {
    let kind = ObjectKind::from_type(o["apiVersion"].as_str()?, o["kind"].as_str()?)?;
    Some(Object::from_value(kind, o.clone()).unwrap())
}

/// The typed objects of `items`, skipping kinds the view does not hold.
pub fn objects(items: &[Value]) -> Vec<Object> {
    items.iter().filter_map(object).collect()
}

/// `items` as a snapshot view at [`now`], keeping the drain rule's derived state.
pub fn view(items: &[Value]) -> ClusterView {
    let objects = items.iter().map(|o| object(o).expect("a kind the view holds"));
    ClusterView::from_objects(Source::Snapshot("test".into()), objects, now())
        .derive(longhorn_guard::policy::drain::derivations(), now())
}

pub fn node(name: &str, cordoned: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {"unschedulable": cordoned}})
}

/// The instance-manager name for a node and data engine.
pub fn im_name(node: &str, engine: &str) -> String {
    format!("instance-manager-{engine}-{node}")
}

/// An `aio` instance manager (v2: SPDK) with its engine and engine-frontend entries.
pub fn im(node: &str, engine: &str, state: &str, engines: &[&str], frontends: &[&str]) -> Value {
    let map = |names: &[&str]| -> Value {
        names
            .iter()
            .map(|n| (n.to_string(), json!({"spec": {"name": n}, "status": {"state": "running"}})))
            .collect()
    };
    json!({"apiVersion": "longhorn.io/v1beta2", "kind": "InstanceManager",
        "metadata": {"name": im_name(node, engine), "namespace": "longhorn-system",
            "labels": {"longhorn.io/node": node, "longhorn.io/data-engine": engine}},
        "spec": {"nodeID": node, "type": "aio", "dataEngine": engine},
        "status": {"currentState": state, "instanceEngines": map(engines),
            "instanceEngineFrontends": map(frontends)}})
}

/// The instance-manager pod Longhorn names after its InstanceManager.
pub fn im_pod(node: &str, engine: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": im_name(node, engine), "namespace": "longhorn-system",
            "labels": {"longhorn.io/component": "instance-manager", "longhorn.io/node": node}},
        "spec": {"nodeName": node}})
}

pub fn volume(name: &str, engine: &str, replicas: i64, state: &str, on: &str) -> Value {
    json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
        "metadata": {"name": name, "namespace": "longhorn-system"},
        "spec": {"numberOfReplicas": replicas, "dataEngine": engine},
        "status": {"state": state, "currentNodeID": on}})
}

/// A replica; `node` may be empty (not scheduled). Healthy since [`T`] unless changed.
pub fn replica(volume: &str, name: &str, node: &str, engine: &str) -> Value {
    json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
        "metadata": {"name": name, "namespace": "longhorn-system",
            "labels": {"longhornvolume": volume, "longhornnode": node}},
        "spec": {"volumeName": volume, "nodeID": node, "dataEngine": engine, "desireState": "running",
            "healthyAt": T, "lastHealthyAt": T, "failedAt": "", "lastFailedAt": ""},
        "status": {"currentState": "running", "port": 10000,
            "instanceManagerName": if node.is_empty() { String::new() } else { im_name(node, engine) }}})
}

/// A running engine of `volume` on `node` with these replica modes.
pub fn engine(volume: &str, node: &str, data_engine: &str, modes: &[(&str, &str)]) -> Value {
    let modes: serde_json::Map<String, Value> =
        modes.iter().map(|(r, m)| (r.to_string(), json!(m))).collect();
    json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Engine",
        "metadata": {"name": format!("{volume}-e-0"), "namespace": "longhorn-system",
            "labels": {"longhornvolume": volume, "longhornnode": node}},
        "spec": {"volumeName": volume, "nodeID": node, "active": true, "dataEngine": data_engine},
        "status": {"currentState": "running", "replicaModeMap": modes}})
}

/// Three schedulable nodes with running v1 and v2 instance managers (and their pods).
pub fn three_nodes() -> Vec<Value> {
    let mut out = Vec::new();
    for n in ["node-1", "node-2", "node-3"] {
        out.push(node(n, false));
        for e in ["v1", "v2"] {
            out.push(im(n, e, "running", &[], &[]));
            out.push(im_pod(n, e));
        }
    }
    out
}

/// Replaces the object of `kind` named `name` with `f(object)`.
pub fn edit(items: &mut [Value], kind: &str, name: &str, f: impl FnOnce(&mut Value)) {
    let o = items
        .iter_mut()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"));
    f(o);
}
