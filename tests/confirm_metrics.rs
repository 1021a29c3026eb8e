//! `/metrics` counts the API requests of a confirmation by kind and verb, the confirmation's
//! result and its latency. One test in this binary: the counters are process-wide.

// Its own binary: the API request and confirmation counters it reads exactly are process-wide.
#[path = "it/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use longhorn_guard::admit::Admitter;
use longhorn_guard::cluster::SharedView;
use longhorn_guard::policy::drain::confirm;
use longhorn_guard::policy::Policy;
use serde_json::Value;
use support::apiserver::FakeApi;
use support::generated::{fixture_items, stale_watch_view};
use support::*;

fn metric(text: &str, series: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn a_confirmed_eviction_shows_in_metrics() {
    let items = fixture_items();
    let fake = FakeApi::start(items.clone(), Duration::ZERO).await;
    let stale = SharedView::new(stale_watch_view(&items));
    let confirmer = confirm::confirmer(fake.client(), stale.clone());
    let admitter = Admitter::new(stale, Arc::new(Policy::default()), Some(confirmer));
    let server = TestServer::with_admitter(admitter).await;
    let (addr, tls) = (server.addr, &server.client);

    let mut body: Value = serde_json::from_slice(&fixture("eviction-create.json")).unwrap();
    body["request"]["name"] = "instance-manager-e3a5c7b9d1f2406a8c0e2b4d6f8a1c3e".into(); // node-3
    let reply = request(addr, tls, "POST", "/validate", body.to_string().into_bytes()).await.unwrap();
    assert_eq!(reply.json()["response"]["allowed"], true, "{}", reply.text());

    let text = request(addr, tls, "GET", "/metrics", Vec::new()).await.unwrap().text();
    // node-3 holds one volume: 7 small or by-node reads (instance managers twice: node-3's
    // whole, the others as a Table; no Longhorn node, as node-3 has a Kubernetes Node), then one
    // batch of 3 per-volume reads.
    for (kind, n) in [
        ("replicas.longhorn.io", 2),
        ("engines.longhorn.io", 2),
        ("volumes.longhorn.io", 1),
        ("instancemanagers.longhorn.io", 2),
        ("settings.longhorn.io", 1),
        ("nodes", 1),
        ("pods", 1),
    ] {
        let series = format!("longhorn_guard_api_requests_total{{kind=\"{kind}\",verb=\"list\"}}");
        assert_eq!(metric(&text, &series), Some(n), "{series} in\n{text}");
    }
    let lh_nodes = "longhorn_guard_api_requests_total{kind=\"nodes.longhorn.io\",verb=\"list\"}";
    assert_eq!(metric(&text, lh_nodes), None, "{text}");
    assert_eq!(fake.seen.requests().len(), 10);
    assert_eq!(metric(&text, "longhorn_guard_confirmations_total{result=\"allowed\"}"), Some(1), "{text}");
    assert_eq!(metric(&text, "longhorn_guard_confirmations_total{result=\"denied\"}"), Some(0), "{text}");
    assert_eq!(metric(&text, "longhorn_guard_confirmations_total{result=\"failed\"}"), Some(0), "{text}");
    assert_eq!(metric(&text, "longhorn_guard_confirmation_duration_seconds_count"), Some(1), "{text}");
    assert_eq!(
        metric(&text, "longhorn_guard_confirmation_duration_seconds_bucket{le=\"+Inf\"}"),
        Some(1),
        "{text}"
    );
    assert!(text.contains("# TYPE longhorn_guard_confirmation_duration_seconds histogram"), "{text}");

    server.handle.shutdown();
    assert!(server.handle.stopped().await);
}
