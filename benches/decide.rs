//! Decision throughput and view memory on a large synthetic cluster.
//!
//! `cargo bench --bench decide` (or `make bench`). Prints, per request kind, the mean time of
//! parse -> decide -> serialise (no TLS, no sockets), and the resident memory the cluster view
//! takes. Sizes: `BENCH_NODES` (default 100), `BENCH_VOLUMES` (default 5000), 3 replicas each.

use std::hint::black_box;
use std::time::{Instant, SystemTime};

use longhorn_guard::admission::{parse_review, response_review};
use longhorn_guard::cluster::{ClusterView, Object, ObjectKind, Source};
use longhorn_guard::policy::{self, Policy};
use serde_json::{json, Value};

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn obj(kind: ObjectKind, v: Value) -> Object {
    Object::from_value(kind, v).expect("synthetic object parses")
}

fn synthetic_cluster(nodes: usize, volumes: usize) -> Vec<Object> {
    let ts = "2026-11-30T10:00:00Z";
    let mut out = Vec::new();
    for n in 0..nodes {
        let node = format!("node-{n}");
        let im = format!("instance-manager-{n:032x}");
        out.push(obj(ObjectKind::Node, json!({"metadata": {"name": node}, "spec": {}})));
        out.push(obj(
            ObjectKind::LonghornNode,
            json!({"metadata": {"name": node, "namespace": "longhorn-system"},
                   "spec": {"allowScheduling": true, "disks": {"d": {"allowScheduling": true}}},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Schedulable", "status": "True"}]}}),
        ));
        out.push(obj(
            ObjectKind::InstanceManager,
            json!({"metadata": {"name": im, "namespace": "longhorn-system"},
                   "spec": {"nodeID": node, "type": "aio", "dataEngine": "v1"},
                   "status": {"currentState": "running"}}),
        ));
        out.push(obj(
            ObjectKind::Pod,
            json!({"metadata": {"name": im, "namespace": "longhorn-system",
                                "labels": {"longhorn.io/component": "instance-manager", "longhorn.io/node": node}},
                   "spec": {"nodeName": node}, "status": {"phase": "Running"}}),
        ));
    }
    for v in 0..volumes {
        let vol = format!("pvc-{v:08}");
        let attached = format!("node-{}", (v * 7) % nodes);
        out.push(obj(
            ObjectKind::Volume,
            json!({"metadata": {"name": vol, "namespace": "longhorn-system"},
                   "spec": {"numberOfReplicas": 3, "dataEngine": "v1"},
                   "status": {"state": "attached", "robustness": "healthy", "currentNodeID": attached}}),
        ));
        let mut modes = serde_json::Map::new();
        for r in 0..3 {
            let node = format!("node-{}", (v + r * 13) % nodes);
            let name = format!("{vol}-r-{r:08x}");
            modes.insert(name.clone(), json!("RW"));
            out.push(obj(
                ObjectKind::Replica,
                json!({"metadata": {"name": name, "namespace": "longhorn-system",
                                    "labels": {"longhornnode": node, "longhornvolume": vol}},
                       "spec": {"volumeName": vol, "nodeID": node, "desireState": "running", "dataEngine": "v1",
                                "healthyAt": ts, "lastHealthyAt": ts},
                       "status": {"currentState": "running",
                                  "instanceManagerName": format!("instance-manager-{:032x}", (v + r * 13) % nodes)}}),
            ));
        }
        out.push(obj(
            ObjectKind::Engine,
            json!({"metadata": {"name": format!("{vol}-e-0"), "namespace": "longhorn-system"},
                   "spec": {"volumeName": vol, "nodeID": attached, "active": true},
                   "status": {"currentState": "running", "replicaModeMap": modes}}),
        ));
    }
    out
}

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn review(request: Value) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}),
    )
    .expect("serialises")
}

fn bench(name: &str, body: &[u8], view: &ClusterView, policy: &Policy) {
    let iterations = env_usize("BENCH_ITERATIONS", 2000);
    let now = SystemTime::now();
    let mut outcome = "";
    for _ in 0..50 {
        let req = parse_review(body).expect("bench request parses");
        black_box(policy::validate(&req, view, policy, now));
    }
    let start = Instant::now();
    for _ in 0..iterations {
        let req = parse_review(black_box(body)).expect("bench request parses");
        let d = policy::validate(&req, view, policy, now);
        outcome = d.outcome();
        black_box(serde_json::to_vec(&response_review(&req.uid, &d)).expect("serialises"));
    }
    let per = start.elapsed() / iterations as u32;
    println!("{name:<32} {:>9.1} us/decision  ({outcome})", per.as_secs_f64() * 1e6);
}

fn main() {
    let nodes = env_usize("BENCH_NODES", 100);
    let volumes = env_usize("BENCH_VOLUMES", 5000);
    let before = rss_kib();
    let t = Instant::now();
    let objects = synthetic_cluster(nodes, volumes);
    let view = ClusterView::from_objects(Source::Direct, objects, SystemTime::now());
    let built = t.elapsed();
    let after = rss_kib();
    println!(
        "cluster: {nodes} nodes, {volumes} volumes, {} replicas; view built in {:?}",
        volumes * 3,
        built
    );
    if let (Some(b), Some(a)) = (before, after) {
        println!("resident memory of objects + view: {:.1} MiB", (a.saturating_sub(b)) as f64 / 1024.0);
    }
    let policy = Policy::default();
    let ns = "longhorn-system";
    let eviction = review(json!({
        "uid": "b-1", "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "eviction",
        "name": format!("instance-manager-{:032x}", 1), "namespace": ns, "operation": "CREATE",
        "userInfo": {"username": "bench"},
        "object": {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "x", "namespace": ns}}
    }));
    let other = review(json!({
        "uid": "b-2", "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "eviction",
        "name": "web-0", "namespace": "default", "operation": "CREATE", "userInfo": {"username": "bench"},
        "object": {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0"}}
    }));
    let volume = review(json!({
        "uid": "b-3", "kind": {"group": "longhorn.io", "version": "v1beta2", "kind": "Volume"},
        "resource": {"group": "longhorn.io", "version": "v1beta2", "resource": "volumes"},
        "name": "pvc-new", "namespace": ns, "operation": "CREATE", "userInfo": {"username": "bench"},
        "object": {"apiVersion": "longhorn.io/v1beta2", "kind": "Volume", "metadata": {"name": "pvc-new", "namespace": ns},
                   "spec": {"numberOfReplicas": 1}}
    }));
    let cordon = review(json!({
        "uid": "b-4", "kind": {"group": "", "version": "v1", "kind": "Node"},
        "resource": {"group": "", "version": "v1", "resource": "nodes"}, "name": "node-2", "operation": "UPDATE",
        "userInfo": {"username": "bench"},
        "object": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-2"}, "spec": {"unschedulable": true}},
        "oldObject": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-2"}, "spec": {}}
    }));
    bench("eviction of an instance manager", &eviction, &view, &policy);
    bench("eviction of another pod", &other, &view, &policy);
    bench("cordon (warnings)", &cordon, &view, &policy);
    bench("volume create (1 replica)", &volume, &view, &policy);
}
