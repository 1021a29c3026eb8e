//! Decision throughput and view memory on a large synthetic cluster.
//!
//! `cargo bench --bench decide` (or `make bench`). Prints the time to parse the objects and
//! build the view, the resident memory the objects and the view take, and per request kind
//! the mean time of parse -> decide -> serialise (no TLS, no sockets), including an
//! instance-manager eviction that is allowed (first node), one that is denied for
//! `BENCH_STRANDED` volumes whose only healthy replica is there (second node), and one that is
//! denied for the `BENCH_ATTACHED` volumes whose engines run there (third node). Sizes:
//! `BENCH_NODES` (default 30), `BENCH_VOLUMES` (default 10000), 3 replicas each; every odd
//! volume is attached. `BENCH_INDEX=0` builds the view without the drain index.
//! `BENCH_ONLY=deny` runs only the cases whose name contains that text
//! (for a profiler: `valgrind --tool=callgrind --toggle-collect=decide::bench` counts only the
//! measured cases, not the cluster's construction).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Instant, SystemTime};

use longhorn_guard::admission::{parse_review, response_review};
use longhorn_guard::cluster::{ClusterView, Object, ObjectKind, SharedView, Source};
use longhorn_guard::policy::drain::confirm::{self, cached::Cached};
use longhorn_guard::policy::{self, Policy};
use serde_json::{json, Value};

/// The system allocator, counting the bytes in use: the view's own heap, apart from what the
/// allocator keeps resident after the parse's temporary values are freed.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn obj(kind: ObjectKind, v: Value) -> Object {
    Object::from_value(kind, v).expect("synthetic object parses")
}

/// What a real API server adds to every object: the view must drop all of it.
fn baggage(name: &str, kind: &str) -> Value {
    json!({
        "uid": format!("{:08x}-0000-4000-8000-{:012x}", name.len(), name.len() * 7919),
        "resourceVersion": "123456789", "generation": 3, "creationTimestamp": "2026-11-01T10:00:00Z",
        "finalizers": ["longhorn.io"],
        "ownerReferences": [{"apiVersion": "longhorn.io/v1beta2", "kind": kind, "name": name,
                             "uid": "3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f", "controller": true}],
        "managedFields": [{"manager": "longhorn-manager", "operation": "Update", "apiVersion": "longhorn.io/v1beta2",
                           "time": "2026-11-30T10:00:00Z", "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:longhornnode": {}, "f:longhornvolume": {}}},
                                        "f:spec": {".": {}, "f:nodeID": {}, "f:volumeName": {}, "f:image": {}},
                                        "f:status": {".": {}, "f:currentState": {}, "f:ip": {}, "f:port": {}}}}]
    })
}

/// `metadata` with the API server's baggage, the name, namespace and labels.
fn meta(name: &str, kind: &str, labels: Value) -> Value {
    let mut m = baggage(name, kind);
    m["name"] = json!(name);
    m["namespace"] = json!("longhorn-system");
    m["labels"] = labels;
    m
}

fn node_name(n: usize) -> String {
    format!("worker-{n:02}.storage.example.internal")
}

fn im_name(n: usize) -> String {
    format!("instance-manager-{n:032x}")
}

/// A cluster of `nodes` nodes and `volumes` volumes of 3 replicas each, every odd volume
/// attached: the first `attached` odd ones to the third node, the others to a node after it.
/// Draining the first node is safe (every volume keeps two healthy replicas elsewhere); on the
/// second node `stranded` attached volumes have their only healthy replica, and on the third
/// `attached` volumes run their engines, so draining either is denied.
fn synthetic_cluster(nodes: usize, volumes: usize, stranded: usize, attached_here: usize) -> Vec<Object> {
    let mut out = Vec::new();
    let mut im_engines: Vec<serde_json::Map<String, Value>> = vec![Default::default(); nodes];
    let mut im_replicas: Vec<serde_json::Map<String, Value>> = vec![Default::default(); nodes];
    let instance = |ip: String| {
        json!({"spec": {"name": "x", "dataEngine": "v1"},
        "status": {"state": "running", "ip": ip, "port": 10000, "storageIP": "", "conditions": {}}})
    };
    let mut stranded_left = stranded;
    for v in 0..volumes {
        let vol = format!("pvc-{v:08x}-1c2d-4e5f-8a9b-{:012x}", v * 2_654_435_761);
        let is_attached = v % 2 == 1;
        let attached = if is_attached && v / 2 < attached_here { 2 } else { 3 + (v * 7) % (nodes - 3) };
        let engine = format!("{vol}-e-0");
        let replica_nodes = [v % nodes, (v + 13) % nodes, (v + 26) % nodes];
        let degraded = is_attached && stranded_left > 0 && replica_nodes.contains(&1);
        if degraded {
            stranded_left -= 1;
        }
        out.push(obj(
            ObjectKind::Volume,
            json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
                   "metadata": meta(&vol, "Volume", json!({"longhornvolume": vol})),
                   "spec": {"numberOfReplicas": 3, "dataEngine": "v1", "frontend": "blockdev", "size": "10737418240"},
                   "status": {"state": if is_attached { "attached" } else { "detached" },
                              "robustness": if !is_attached { "unknown" } else if degraded { "degraded" } else { "healthy" },
                              "currentNodeID": if is_attached { node_name(attached) } else { String::new() },
                              "kubernetesStatus": {"namespace": "apps", "pvcName": format!("data-{v}"), "pvName": vol}}}),
        ));
        let mut modes = serde_json::Map::new();
        let mut addrs = serde_json::Map::new();
        for (r, &n) in replica_nodes.iter().enumerate() {
            let node = node_name(n);
            let name = format!("{vol}-r-{r:08x}");
            let failed = degraded && n != 1;
            // Each replica its own time, as on a real cluster (a shared one would be stored once).
            let ts = &(time::OffsetDateTime::UNIX_EPOCH
                + time::Duration::seconds(1_796_032_800 + (v * 3 + r) as i64))
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
            let ts = ts.as_str();
            let ip = format!("10.42.{}.{}", n, 10 + r);
            if !failed && is_attached {
                modes.insert(name.clone(), json!("RW"));
                addrs.insert(name.clone(), json!(format!("{ip}:{}", 10000 + v % 5000)));
            }
            im_replicas[n].insert(name.clone(), instance(ip.clone()));
            out.push(obj(
                ObjectKind::Replica,
                json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
                       "metadata": meta(&name, "Volume", json!({"longhornnode": node, "longhornvolume": vol,
                                                                "longhorndiskuuid": "6f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"})),
                       "spec": {"volumeName": vol, "nodeID": node, "desireState": if failed { "stopped" } else { "running" },
                                "dataEngine": "v1", "engineName": engine, "image": "longhornio/longhorn-engine:v1.9.1",
                                "diskID": "6f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", "dataDirectoryName": format!("{vol}-{r}"),
                                "healthyAt": if failed { "" } else { ts }, "lastHealthyAt": ts,
                                "failedAt": if failed { ts } else { "" }, "lastFailedAt": if failed { ts } else { "" }},
                       "status": {"currentState": if failed { "stopped" } else { "running" },
                                  "instanceManagerName": im_name(n), "ip": ip, "storageIP": ip,
                                  "port": 10000 + v % 5000, "started": !failed}}),
            ));
        }
        if is_attached {
            im_engines[attached].insert(engine.clone(), instance(format!("10.42.{attached}.1")));
        }
        let (engine_state, engine_node) =
            if is_attached { ("running", node_name(attached)) } else { ("stopped", String::new()) };
        out.push(obj(
            ObjectKind::Engine,
            json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Engine",
                   "metadata": meta(&engine, "Volume", json!({"longhornnode": engine_node, "longhornvolume": vol})),
                   "spec": {"volumeName": vol, "nodeID": engine_node, "active": true,
                            "desireState": engine_state, "dataEngine": "v1",
                            "image": "longhornio/longhorn-engine:v1.9.1", "frontend": "blockdev"},
                   "status": {"currentState": engine_state,
                              "instanceManagerName": if is_attached { im_name(attached) } else { String::new() },
                              "ip": format!("10.42.{attached}.1"), "port": 10001, "started": is_attached,
                              "replicaModeMap": modes, "currentReplicaAddressMap": addrs,
                              "replicaTransitionTimeMap": {}, "rebuildStatus": {}}}),
        ));
    }
    for n in 0..nodes {
        let node = node_name(n);
        let im = im_name(n);
        out.push(obj(
            ObjectKind::Node,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
                   "spec": {}}),
        ));
        out.push(obj(
            ObjectKind::LonghornNode,
            json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Node", "metadata": meta(&node, "Node", json!({})),
                   "spec": {"allowScheduling": true, "disks": {"d": {"allowScheduling": true}}},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Schedulable", "status": "True"}]}}),
        ));
        out.push(obj(
            ObjectKind::InstanceManager,
            json!({"apiVersion": "longhorn.io/v1beta2", "kind": "InstanceManager",
                   "metadata": meta(&im, "Node", json!({"longhorn.io/component": "instance-manager", "longhorn.io/node": node})),
                   "spec": {"nodeID": node, "type": "aio", "dataEngine": "v1", "image": "longhornio/longhorn-instance-manager:v1.9.1"},
                   "status": {"currentState": "running", "ip": format!("10.42.{n}.1"),
                              "instanceEngines": std::mem::take(&mut im_engines[n]),
                              "instanceReplicas": std::mem::take(&mut im_replicas[n])}}),
        ));
        out.push(obj(
            ObjectKind::Pod,
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": meta(&im, "InstanceManager", json!({"longhorn.io/component": "instance-manager", "longhorn.io/node": node})),
                   "spec": {"nodeName": node}, "status": {"phase": "Running", "podIP": format!("10.42.{n}.1")}}),
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
    if std::env::var("BENCH_ONLY").is_ok_and(|only| !name.contains(&only)) {
        return;
    }
    let iterations = env_usize("BENCH_ITERATIONS", 2000);
    let now = SystemTime::now();
    let mut outcome = "";
    let req = parse_review(body).expect("bench request parses");
    let first = policy::validate(&req, view, policy, now);
    // What a denial says, as a check that the case is the one named.
    let said = first.status.as_ref().map(|s| {
        let lines: Vec<&str> = s.message.lines().collect();
        format!("; {} / {}", lines[0], lines[lines.len() - 1])
    });
    for _ in 0..50 {
        let req = parse_review(body).expect("bench request parses");
        black_box(policy::validate(&req, view, policy, now));
    }
    let start = Instant::now();
    for _ in 0..iterations {
        let req = parse_review(black_box(body)).expect("bench request parses");
        let d = policy::validate(&req, view, policy, now);
        outcome = d.outcome();
        black_box(response_review(&req.uid, &d).to_bytes());
    }
    let per = start.elapsed() / iterations as u32;
    println!(
        "{name:<32} {:>9.1} us/decision  ({outcome}{})",
        per.as_secs_f64() * 1e6,
        said.unwrap_or_default()
    );
}

fn main() {
    let nodes = env_usize("BENCH_NODES", 30).max(4);
    let volumes = env_usize("BENCH_VOLUMES", 10_000);
    let stranded = env_usize("BENCH_STRANDED", 3);
    let attached = env_usize("BENCH_ATTACHED", 300);
    let before = rss_kib();
    let live_before = LIVE.load(Ordering::Relaxed);
    let t = Instant::now();
    let objects = synthetic_cluster(nodes, volumes, stranded, attached);
    let count = objects.len();
    // A watch view just synced: every kind current, as `drain.reuseCurrentKinds` reuses them.
    let now = SystemTime::now();
    // `BENCH_INDEX=0`: without the drain index (the rebuild marks only), as docs/layers.md
    // says a view answers the same, only slower.
    let derivations = if std::env::var("BENCH_INDEX").as_deref() == Ok("0") {
        longhorn_guard::cluster::Derivations::new(vec![Box::new(
            longhorn_guard::policy::drain::RebuildMarks::default(),
        )])
    } else {
        longhorn_guard::policy::drain::derivations()
    };
    let view = ClusterView::from_objects(Source::Watch, objects, now).derive(derivations, now);
    let built = t.elapsed();
    let after = rss_kib();
    let live = LIVE.load(Ordering::Relaxed).saturating_sub(live_before) as f64 / 1_048_576.0;
    println!(
        "cluster: {nodes} nodes, {volumes} volumes, {} replicas, {count} objects; parsed and view built in {:?}",
        volumes * 3,
        built
    );
    if let (Some(b), Some(a)) = (before, after) {
        let mib = (a.saturating_sub(b)) as f64 / 1024.0;
        println!(
            "resident memory of objects + view: {mib:.1} MiB ({:.2} MiB per 1,000 volumes); whole process {:.1} MiB",
            mib * 1000.0 / volumes.max(1) as f64,
            a as f64 / 1024.0
        );
    }
    println!(
        "heap in use by the view: {live:.1} MiB ({:.2} MiB per 1,000 volumes)",
        live * 1000.0 / volumes.max(1) as f64
    );
    println!(
        "replicas on the drained nodes: {} (allow), {} (deny, stranded), {} (deny, attached)",
        view.replica_count_on_node(&node_name(0)),
        view.replica_count_on_node(&node_name(1)),
        view.replica_count_on_node(&node_name(2))
    );
    let policy = Policy::default();
    let ns = "longhorn-system";
    let evict = |n: usize| {
        review(json!({
            "uid": format!("b-evict-{n}"), "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "eviction",
            "name": im_name(n), "namespace": ns, "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "x", "namespace": ns}}
        }))
    };
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
        "resource": {"group": "", "version": "v1", "resource": "nodes"}, "name": node_name(1), "operation": "UPDATE",
        "userInfo": {"username": "bench"},
        "object": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name(1)}, "spec": {"unschedulable": true}},
        "oldObject": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name(1)}, "spec": {}}
    }));
    bench("eviction, allow", &evict(0), &view, &policy);
    bench(&format!("eviction, deny ({stranded} stranded)"), &evict(1), &view, &policy);
    bench(&format!("eviction, deny ({attached} attached)"), &evict(2), &view, &policy);
    bench("eviction of another pod", &other, &view, &policy);
    bench("cordon (warnings)", &cordon, &view, &policy);
    bench("volume create (1 replica)", &volume, &view, &policy);

    if std::env::var("BENCH_ONLY").is_ok() {
        return;
    }
    // What a stale allow costs before its reads go out: the volumes the cache has on the
    // node (`confirm::confirmer` computes them under the view's read lock).
    let iterations = env_usize("BENCH_ITERATIONS", 2000) / 10;
    let start = Instant::now();
    let mut found = 0;
    for _ in 0..iterations {
        found = black_box(longhorn_guard::policy::drain::volumes_on_node(&view, &node_name(0))).len();
    }
    let per = start.elapsed() / iterations.max(1) as u32;
    println!(
        "{:<32} {:>9.1} us/confirmation ({found} volumes)",
        "expected volumes of a confirmation",
        per.as_secs_f64() * 1e6
    );

    // With `drain.reuseCurrentKinds`, the per-volume reads answered from the view: a scan of
    // each kind with the confirmation's selectors, under the view's read lock.
    let node = node_name(0);
    let volumes = longhorn_guard::policy::drain::volumes_on_node(&view, &node);
    let elsewhere = confirm::Selector::is_not(longhorn_guard::cluster::LONGHORN_NODE_LABEL, node.clone());
    let shared = SharedView::new(view);
    let cache = Cached::current(&shared, SystemTime::now(), std::time::Duration::from_secs(60));
    let max = confirm::MAX_SELECTOR_BYTES;
    let reads = [
        (ObjectKind::Volume, confirm::volume_selectors(&volumes, None, max)),
        (ObjectKind::Engine, confirm::volume_selectors(&volumes, None, max)),
        (ObjectKind::Replica, confirm::volume_selectors(&volumes, Some(&elsewhere), max)),
    ];
    let start = Instant::now();
    let mut objects = 0;
    for _ in 0..iterations {
        objects = 0;
        for (kind, selectors) in &reads {
            for (sel, _) in selectors {
                objects += black_box(cache.list(*kind, Some(sel))).map_or(0, |o| o.len());
            }
        }
    }
    let per = start.elapsed() / iterations.max(1) as u32;
    println!(
        "{:<32} {:>9.1} us/confirmation ({objects} objects)",
        "per-volume reads from the view",
        per.as_secs_f64() * 1e6
    );
}
