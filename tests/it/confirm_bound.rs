//! A confirmation reads a bounded number of LISTs, at most 4 at once, and the decision it
//! confirms is the decision a snapshot of the same state gives. The stand-in API server
//! (real TLS on 127.0.0.1:0) serves a Longhorn state built from the fixture snapshot's objects
//! (`support::generated`).

use crate::support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use longhorn_guard::admit::{Admitter, WebhookKind};
use longhorn_guard::cluster::SharedView;
use longhorn_guard::policy::drain::analyze_node;
use longhorn_guard::policy::drain::confirm;
use longhorn_guard::policy::Policy;
use serde_json::Value;
use support::apiserver::{FakeApi, Mangle};
use support::generated::*;

/// How long the stand-in holds each answer, so that concurrent reads overlap.
const HOLD: Duration = Duration::from_millis(20);

/// The response a snapshot of `items` gives, and the one a stale watch view confirmed against
/// the stand-in serving `items` gives.
async fn snapshot_and_confirmed(items: &[Value]) -> (Value, Value, FakeApi) {
    let body = eviction_of_drained(items);
    let policy = Arc::new(Policy::default());
    let snap = Admitter::new(SharedView::new(snapshot_view(items)), policy.clone(), None);
    let from_snapshot = snap.admit(WebhookKind::Validate, &body, Duration::from_secs(5)).await.unwrap();
    let fake = FakeApi::start(items.to_vec(), HOLD).await;
    // As `serve` confirms: expecting the volumes the stale view has on the node.
    let stale = SharedView::new(stale_watch_view(items));
    let confirmer = confirm::confirmer(fake.client(), stale.clone());
    let confirming = Admitter::new(stale, policy, Some(confirmer));
    let confirmed = confirming.admit(WebhookKind::Validate, &body, Duration::from_secs(20)).await.unwrap();
    assert!(confirmed.decision.confirm_node.is_none());
    (from_snapshot.response_json(), confirmed.response_json(), fake)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_makes_at_most_ten_requests_for_10_and_1000_volumes() {
    // Without an expectation (`check drain`) and with the cache's (`serve`).
    for (volumes, expecting) in [(10, false), (1_000, false), (10, true), (1_000, true)] {
        let items =
            state(&Layout { volumes, replica_nodes: &["node-1", "node-2", DRAINED], failed_elsewhere: 0 });
        let fake = FakeApi::start(items.clone(), HOLD).await;
        let expected = if expecting {
            longhorn_guard::policy::drain::volumes_on_node(&snapshot_view(&items), DRAINED)
        } else {
            Default::default()
        };
        let view = confirm::read_node_state_expecting(&fake.client(), DRAINED, &expected).await.unwrap();
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
    let view = SharedView::new(stale_watch_view(&items));
    let admitter =
        Admitter::new(view.clone(), Arc::new(Policy::default()), Some(confirm::confirmer(client, view)));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_list_answer_denies_as_could_not_confirm() {
    // The API server's state: the drained node holds each volume's last healthy replica. The
    // stale cache still has the others healthy, so it allows and the confirmation decides.
    let now = state(&Layout { volumes: 3, replica_nodes: &["node-1", DRAINED], failed_elsewhere: 3 });
    let cached = state(&Layout { volumes: 3, replica_nodes: &["node-1", DRAINED], failed_elsewhere: 0 });
    fn on_node(path: &str, query: &str) -> bool {
        path.ends_with("/replicas") && query.contains("longhornnode%3Dnode-3")
    }
    let manglings: [(&str, Mangle, &str); 5] = [
        ("control: answered as is", |_, _, _| {}, "would strand 3 volumes"),
        (
            "no items field",
            |p, q, b| {
                if on_node(p, q) {
                    b.as_object_mut().unwrap().remove("items");
                }
            },
            "has no items field",
        ),
        (
            "a Status answered with 200",
            |p, q, b| {
                if on_node(p, q) {
                    *b = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});
                }
            },
            "the answer is a \"Status\", not a ReplicaList",
        ),
        (
            "one page of a longer list",
            |p, q, b| {
                if on_node(p, q) {
                    b["metadata"]["continue"] = "page-2".into();
                    b["items"].as_array_mut().unwrap().truncate(1);
                }
            },
            "one page of a longer list",
        ),
        (
            "metadata only",
            |p, q, b| {
                if on_node(p, q) {
                    b["kind"] = "PartialObjectMetadataList".into();
                }
            },
            "not a ReplicaList",
        ),
    ];
    for (what, mangle, want) in manglings {
        let fake = FakeApi::start_mangled(now.clone(), mangle).await;
        let stale = SharedView::new(stale_watch_view(&cached));
        let confirmer = confirm::confirmer(fake.client(), stale.clone());
        let admitter = Admitter::new(stale, Arc::new(Policy::default()), Some(confirmer));
        let body = eviction_of_drained(&cached);
        let out = admitter.admit(WebhookKind::Validate, &body, Duration::from_secs(5)).await.unwrap();
        assert!(!out.decision.allowed, "{what}");
        let message = out.decision.status.unwrap().message;
        assert!(message.contains(want), "{what}: {message}");
        assert!(fake.seen.requests().iter().any(|r| r.contains("longhornnode%3Dnode-3")), "{what}");
    }
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
