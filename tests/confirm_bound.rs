//! A confirmation reads a bounded number of LISTs, at most 4 at once, and the decision it
//! confirms is the decision a snapshot of the same state gives. The stand-in API server
//! (real TLS on 127.0.0.1:0) serves a Longhorn state built from the fixture snapshot's objects:
//! its nodes, instance managers, pods and settings, and N volumes cloned from `vol-healthy`.

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use longhorn_guard::admit::{Admitter, WebhookKind};
use longhorn_guard::cluster::confirm;
use longhorn_guard::cluster::{ClusterView, Object, ObjectKind, SharedView, Source};
use longhorn_guard::policy::drain::analyze_node;
use longhorn_guard::policy::Policy;
use serde_json::{json, Value};
use support::apiserver::FakeApi;
use support::*;

const DRAINED: &str = "node-3";
/// How long the stand-in holds each answer, so that concurrent reads overlap.
const HOLD: Duration = Duration::from_millis(20);

fn fixture_items() -> Vec<Value> {
    let v: Value = serde_json::from_slice(&std::fs::read(SNAPSHOT).unwrap()).unwrap();
    v["items"].as_array().unwrap().clone()
}

fn named<'a>(items: &'a [Value], kind: &str, name: &str) -> &'a Value {
    items.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name).unwrap()
}

/// The instance manager (and its pod) of each fixture node.
fn im_of(items: &[Value], node: &str) -> String {
    items
        .iter()
        .find(|o| o["kind"] == "InstanceManager" && o["spec"]["nodeID"] == node)
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap()
        .to_string()
}

/// Volume `i`, named like a CSI volume (`pvc-<uuid>`, 40 characters).
fn volume_name(i: usize) -> String {
    format!("pvc-{i:08x}-0000-4000-8000-{:012x}", i * 7919)
}

/// How the generated volumes look.
struct Layout {
    volumes: usize,
    /// Nodes holding a replica of every volume.
    replica_nodes: &'static [&'static str],
    /// Volumes whose replicas off the drained node have all failed (they block the drain).
    failed_elsewhere: usize,
}

/// The fixture's nodes, Longhorn nodes, instance managers, pods and settings, with `layout`'s
/// volumes, replicas and engines instead of the fixture's. Engines run on node-1 and node-2
/// (never on the drained node), and the instance managers report exactly those engines.
fn state(layout: &Layout) -> Vec<Value> {
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
/// and the old one is stopped, and node-1's replicas name neither (so the analysis picks one
/// by `default-instance-manager-image`, which names the new image).
fn upgrade(mut items: Vec<Value>) -> Vec<Value> {
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
    for r in items.iter_mut().filter(|o| o["kind"] == "Replica" && o["spec"]["nodeID"] == "node-1") {
        r["status"]["instanceManagerName"] = json!("");
    }
    let mut setting = named(&items, "Setting", "storage-network").clone();
    setting["metadata"]["name"] = json!("default-instance-manager-image");
    setting["value"] = json!("longhornio/longhorn-instance-manager:v1.13.0");
    items.push(setting);
    items
}

fn objects(items: &[Value]) -> Vec<Object> {
    items
        .iter()
        .filter_map(|o| {
            let kind = ObjectKind::from_type(o["apiVersion"].as_str()?, o["kind"].as_str()?)?;
            Some(Object::from_value(kind, o.clone()).unwrap())
        })
        .collect()
}

fn snapshot_view(items: &[Value]) -> ClusterView {
    ClusterView::from_objects(Source::Snapshot("generated".into()), objects(items), SystemTime::now())
}

fn stale_watch_view(items: &[Value]) -> ClusterView {
    ClusterView::from_objects(Source::Watch, objects(items), SystemTime::now() - Duration::from_secs(600))
}

fn eviction_of_drained(items: &[Value]) -> Vec<u8> {
    let mut body: Value = serde_json::from_slice(&fixture("eviction-create.json")).unwrap();
    body["request"]["name"] = json!(im_of(items, DRAINED));
    body.to_string().into_bytes()
}

/// The response a snapshot of `items` gives, and the one a stale watch view confirmed against
/// the stand-in serving `items` gives.
async fn snapshot_and_confirmed(items: &[Value]) -> (Value, Value, FakeApi) {
    let body = eviction_of_drained(items);
    let policy = Arc::new(Policy::default());
    let snap = Admitter::new(SharedView::new(snapshot_view(items)), policy.clone(), None);
    let from_snapshot = snap.admit(WebhookKind::Validate, &body, Duration::from_secs(5)).await.unwrap();
    let fake = FakeApi::start(items.to_vec(), HOLD).await;
    let stale = SharedView::new(stale_watch_view(items));
    let confirming = Admitter::new(stale, policy, Some(confirm::confirmer(fake.client())));
    let confirmed = confirming.admit(WebhookKind::Validate, &body, Duration::from_secs(20)).await.unwrap();
    assert!(confirmed.decision.confirm_node.is_none());
    (from_snapshot.response, confirmed.response, fake)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_makes_at_most_ten_requests_for_10_and_1000_volumes() {
    for volumes in [10, 1_000] {
        let items =
            state(&Layout { volumes, replica_nodes: &["node-1", "node-2", DRAINED], failed_elsewhere: 0 });
        let fake = FakeApi::start(items.clone(), HOLD).await;
        let view = confirm::read_node_state(&fake.client(), DRAINED).await.unwrap();
        let requests = fake.seen.requests();
        assert_eq!(requests.len(), confirm::request_count(1), "{volumes} volumes: {requests:#?}");
        assert!(requests.len() <= 10, "{volumes} volumes: {} requests", requests.len());
        assert!(requests.iter().all(|r| r.len() <= 50 * 1024 + 200), "{volumes} volumes: a URL is too long");
        let max = fake.seen.max_in_flight();
        assert!((2..=4).contains(&max), "{volumes} volumes: {max} requests in flight at once");

        let now = SystemTime::now();
        let confirmed = analyze_node(&view, DRAINED, &Policy::default(), now);
        assert_eq!(confirmed.volumes.len(), volumes);
        assert!(!confirmed.would_block(), "{volumes} volumes: {:?}", confirmed.blocking().next());
        assert_eq!(confirmed, analyze_node(&snapshot_view(&items), DRAINED, &Policy::default(), now));
    }
}

#[tokio::test]
async fn the_confirmed_decision_is_the_snapshot_decision_for_a_safe_drain() {
    let items =
        state(&Layout { volumes: 10, replica_nodes: &["node-1", "node-2", DRAINED], failed_elsewhere: 0 });
    let (from_snapshot, confirmed, _) = snapshot_and_confirmed(&items).await;
    assert_eq!(confirmed["response"]["allowed"], true, "{confirmed}");
    assert_eq!(confirmed, from_snapshot);
}

#[tokio::test]
async fn the_confirmed_decision_is_the_snapshot_decision_for_an_unsafe_drain() {
    let items =
        state(&Layout { volumes: 10, replica_nodes: &["node-1", "node-2", DRAINED], failed_elsewhere: 3 });
    let (from_snapshot, confirmed, _) = snapshot_and_confirmed(&items).await;
    assert_eq!(confirmed["response"]["allowed"], false, "{confirmed}");
    let message = confirmed["response"]["status"]["message"].as_str().unwrap();
    assert!(message.starts_with("longhorn-guard: draining node-3 would strand 3 volumes:"), "{message}");
    assert_eq!(confirmed, from_snapshot);
}

#[tokio::test]
async fn old_and_new_instance_managers_side_by_side_confirm_as_the_snapshot_decides() {
    // Two replicas per volume, on node-1 (mid-upgrade) and the drained node: only the
    // instance manager picked by default-instance-manager-image makes node-1's replica protect.
    let items =
        upgrade(state(&Layout { volumes: 10, replica_nodes: &["node-1", DRAINED], failed_elsewhere: 0 }));
    let (from_snapshot, confirmed, fake) = snapshot_and_confirmed(&items).await;
    assert_eq!(confirmed["response"]["allowed"], true, "{confirmed}");
    assert_eq!(confirmed, from_snapshot);

    // The setting decides it: without it the same state blocks.
    let without: Vec<Value> =
        items.iter().filter(|o| o["metadata"]["name"] != "default-instance-manager-image").cloned().collect();
    let analysis = analyze_node(&snapshot_view(&without), DRAINED, &Policy::default(), SystemTime::now());
    assert!(analysis.would_block());
    // And the confirmation read it (settings are read whole and kept by the read-set).
    assert!(fake
        .seen
        .requests()
        .iter()
        .any(|r| r.starts_with("/apis/longhorn.io/v1beta2/namespaces/longhorn-system/settings")));
}

#[tokio::test]
async fn an_api_error_denies_as_could_not_confirm() {
    // Behind a path prefix the stand-in does not serve, every read gets a 400 Status.
    let fake = FakeApi::start(Vec::new(), Duration::ZERO).await;
    let mut client_config = fake.config();
    client_config.cluster_url = format!("https://127.0.0.1:{}/nowhere", fake.addr.port()).parse().unwrap();
    let client = longhorn_guard::cluster::client::build(client_config).unwrap();
    let items = state(&Layout { volumes: 1, replica_nodes: &["node-1", DRAINED], failed_elsewhere: 0 });
    let admitter = Admitter::new(
        SharedView::new(stale_watch_view(&items)),
        Arc::new(Policy::default()),
        Some(confirm::confirmer(client)),
    );
    let out = admitter
        .admit(WebhookKind::Validate, &eviction_of_drained(&items), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!out.decision.allowed);
    let st = out.decision.status.unwrap();
    assert_eq!(st.code, 429);
    assert!(
        st.message
            .starts_with("longhorn-guard: could not confirm that draining node-3 is safe (cannot list "),
        "{}",
        st.message
    );
    assert!(!st.message.contains('\n'), "{}", st.message);
}

/// Not a check: prints how long confirmations take against the stand-in (which answers at
/// once), for the notes. `cargo test --release --test confirm_bound -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure_confirmation_latency() {
    for volumes in [300, 1_000] {
        let items =
            state(&Layout { volumes, replica_nodes: &["node-1", "node-2", DRAINED], failed_elsewhere: 0 });
        let fake = FakeApi::start(items.clone(), Duration::ZERO).await;
        let client = fake.client();
        let policy = Policy::default();
        let mut took = Vec::new();
        for _ in 0..30 {
            let started = std::time::Instant::now();
            let view = confirm::read_node_state(&client, DRAINED).await.unwrap();
            assert!(!analyze_node(&view, DRAINED, &policy, SystemTime::now()).would_block());
            took.push(started.elapsed());
        }
        took.sort();
        let requests = fake.seen.requests().len() / 30;
        println!(
            "{volumes} volumes on the node: {requests} requests per confirmation, p50 {:?}, p99 {:?} (30 runs)",
            took[took.len() / 2],
            took[took.len() * 99 / 100]
        );
    }
}
