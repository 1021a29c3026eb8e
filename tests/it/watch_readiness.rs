//! Readiness and reconnection through watch faults, end to end over real TLS: `serve`'s
//! watches (with BOOKMARKs), probes, renewing API client and HTTPS server against stand-in API
//! servers whose etcd member is cut off from its peers: its watches stay open and go silent,
//! its consistent reads fail (`500 etcdserver: request timed out`). `maxViewAge` is 1 s and
//! `--unready-after` 2 s.
//!
//! - `/readyz` turns 503 with the reason once the view has been unproven for 2 s, and 200 again
//!   once it is proven; `/metrics` shows the flips and since when the view is unproven.
//! - While the view is unproven every API request asks to close its connection, so a Service
//!   in front of several API servers lands the next one elsewhere: through a proxy that sends
//!   new connections to a healthy API server, the watches resume there and the view holds the
//!   change the cut-off one never delivered.
//! - A confirmation that cannot complete gives up at `--confirm-timeout`: a 429 long before
//!   the request's deadline.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use longhorn_guard::admit::Admitter;
use longhorn_guard::cluster::{client, probe, watch, ClusterView, SharedView, Source};
use longhorn_guard::policy::drain::confirm;
use longhorn_guard::policy::Policy;
use longhorn_guard::server::Limits;
use longhorn_guard::synthetic::{Group, Synthetic};
use serde_json::{json, Value};
use support::proxy::Proxy;
use support::watchapi::WatchApi;
use support::*;

/// Node 3 holds replicas and no engine (its eviction is safe); volume 3 has its replicas on
/// nodes 3, 0 and 1.
const STORAGE_NODE: usize = 3;
const VICTIM: usize = 3;
const MAX_VIEW_AGE: Duration = Duration::from_secs(1);
const UNREADY_AFTER: Duration = Duration::from_secs(2);

struct Guard {
    server: TestServer,
    view: SharedView,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Guard {
    /// Watches and probes (every 100 ms) through a renewing client for `config`, as `serve`
    /// runs them; every API server in `apis` sends BOOKMARKs every 100 ms after a write
    /// elsewhere in etcd (one etcd: each moves its resource version on alike).
    async fn start(config: kube::Config, apis: Vec<Arc<WatchApi>>, confirm_timeout: Duration) -> Self {
        let view = ClusterView::new(Source::Watch)
            .derive(longhorn_guard::policy::drain::derivations(), std::time::SystemTime::now());
        let view = SharedView::new(view);
        let renew = client::renew_while_unproven(view.clone(), MAX_VIEW_AGE, true);
        let client = client::build_renewing(config, renew).unwrap();
        let mut tasks = vec![
            tokio::spawn(watch::run_with(client.clone(), view.clone(), watch::tuning(true))),
            tokio::spawn(probe::run(client.clone(), view.clone(), Duration::from_millis(100))),
        ];
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                for api in &apis {
                    api.bump();
                    api.bookmark();
                }
            }
        }));
        let policy = Policy::parse("drain:\n  maxViewAge: 1s\n").unwrap();
        let confirmer = confirm::confirmer(client, view.clone());
        let admitter = Admitter::new(view.clone(), Arc::new(policy), Some(confirmer))
            .with_confirm_timeout(confirm_timeout);
        let limits = Limits { unready_after: Some(UNREADY_AFTER), ..test_limits() };
        let server = TestServer::serve_admitter(admitter, limits).await;
        let guard = Self { server, view, tasks };
        until("the first list of every kind", || guard.view.read().freshness().synced).await;
        guard
    }

    /// POSTs the eviction of node `n`'s instance manager: (allowed, code, message).
    async fn evict(&self, n: usize) -> (bool, u64, String) {
        let resp = evict_pod(&self.server, &Synthetic::instance_manager_name(n)).await;
        let code = resp["status"]["code"].as_u64().unwrap_or(200);
        (resp["allowed"].as_bool().unwrap(), code, resp["status"]["message"].as_str().unwrap_or("").into())
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let r = request(self.server.addr, &self.server.client, "GET", path, vec![]).await.unwrap();
        (r.status, r.text())
    }

    /// Polls `/readyz` every 50 ms until it answers `status`; returns its text.
    async fn readyz_until(&self, status: u16) -> String {
        let t0 = Instant::now();
        loop {
            let (s, text) = self.get("/readyz").await;
            if s == status {
                return text;
            }
            assert!(t0.elapsed() < WAIT, "/readyz never answered {status}: {s} {text}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn stop(self) {
        self.tasks.iter().for_each(|t| t.abort());
        self.server.handle.shutdown();
        assert!(self.server.handle.stopped().await);
    }
}

fn cluster() -> (Synthetic, Vec<Value>) {
    let s = Synthetic::new(4, 12).unwrap();
    let items = s.list()["items"].as_array().unwrap().clone();
    (s, items)
}

/// Volume `v`'s replicas off node `keep` failed (its engine reports them `ERR`): `keep` then
/// holds its last healthy replica.
fn fail_replicas(s: &Synthetic, v: usize, keep: usize) -> Vec<Value> {
    let (volume, keep) = (Synthetic::volume_name(v), Synthetic::node_name(keep));
    let mut engine = s.objects(Group::Engine).find(|e| e["spec"]["volumeName"] == volume.as_str()).unwrap();
    let mut out: Vec<Value> = s
        .objects(Group::Replica)
        .filter(|r| r["spec"]["volumeName"] == volume.as_str() && r["spec"]["nodeID"] != keep.as_str())
        .map(|mut r| {
            r["spec"]["healthyAt"] = json!("");
            r["spec"]["failedAt"] = json!(s.timestamp);
            r["status"]["currentState"] = json!("error");
            engine["status"]["replicaModeMap"][r["metadata"]["name"].as_str().unwrap()] = json!("ERR");
            r
        })
        .collect();
    out.push(engine);
    out
}

/// The value of the unlabelled metric `name` in `metrics`.
fn value(metrics: &str, name: &str) -> f64 {
    let line = metrics
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name}: {metrics}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_turns_503_with_the_reason_while_the_view_cannot_be_proven_and_200_once_proven() {
    let (_, items) = cluster();
    let api = Arc::new(WatchApi::start(items).await);
    let guard = Guard::start(api.config_at(api.addr), vec![api.clone()], Duration::from_secs(3)).await;
    assert_eq!(guard.readyz_until(200).await, "ok\n");
    // Proven all along: the connections are kept alive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let closing = api.closing_requests();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(api.closing_requests(), closing, "a proven view keeps its connections");
    let m = guard.get("/metrics").await.1;
    assert_eq!(
        (
            value(&m, "longhorn_guard_ready"),
            value(&m, "longhorn_guard_cluster_view_unproven_since_timestamp_seconds")
        ),
        (1.0, 0.0),
        "{m}"
    );

    // The API server's etcd member is cut off: watches silent, consistent reads failing.
    api.hold("/");
    api.fail_lists(true);
    let cut = Instant::now();
    let why = guard.readyz_until(503).await;
    // Unready once the view's age (counted from its last proof, before the cut) reaches 2 s.
    assert!(cut.elapsed() >= MAX_VIEW_AGE, "unready only once stale: {why}");
    assert!(
        why.starts_with("cluster view unproven for ")
            && why.contains("(--unready-after 2s)")
            && why.contains("no probe proved it current")
            && (why.contains("; the last consistent read was answered ")
                || why.contains("no consistent read (probe or confirmation) was answered since")),
        "{why}"
    );
    let m = guard.get("/metrics").await.1;
    assert_eq!(value(&m, "longhorn_guard_ready"), 0.0, "{m}");
    assert!(value(&m, "longhorn_guard_cluster_view_unproven_since_timestamp_seconds") > 0.0, "{m}");
    assert!(
        m.contains("longhorn_guard_readiness_flips_total{to=\"unready\",reason=\"view_stale\"} 1\n"),
        "{m}"
    );
    assert!(api.closing_requests() > closing, "an unproven view renews its connections");
    let (allowed, code, message) = guard.evict(STORAGE_NODE).await;
    assert!(!allowed && code == 429 && message.contains("could not confirm"), "{message}");

    // Healed: proven again, ready again, allowed again.
    api.release("/");
    api.fail_lists(false);
    assert_eq!(guard.readyz_until(200).await, "ok\n");
    let m = guard.get("/metrics").await.1;
    // Ready again by the first answered probe, or by the proof: either is counted.
    assert!(m.contains("longhorn_guard_readiness_flips_total{to=\"ready\",reason="), "{m}");
    let proven = || guard.view.read().unproven(std::time::SystemTime::now(), MAX_VIEW_AGE, true).is_none();
    until("the view proven again", proven).await;
    assert_eq!(value(&m, "longhorn_guard_ready"), 1.0, "{m}");
    let (allowed, _, message) = guard.evict(STORAGE_NODE).await;
    assert!(allowed, "{message}");
    guard.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unproven_view_reconnects_and_a_service_lands_it_on_a_healthy_api_server() {
    let (s, items) = cluster();
    let a = Arc::new(WatchApi::start(items.clone()).await);
    let b = Arc::new(WatchApi::start_beside(items, &a).await);
    let service = Proxy::start(a.addr).await;
    let guard =
        Guard::start(a.config_at(service.addr), vec![a.clone(), b.clone()], Duration::from_secs(3)).await;
    let (allowed, _, message) = guard.evict(STORAGE_NODE).await;
    assert!(allowed, "{message}");
    assert_eq!(b.connections(), 0, "everything went to A so far");

    // A's etcd member is cut off; the majority side (B) sees the victim's replicas fail. The
    // Service now sends new connections to B only.
    a.hold("/");
    a.fail_lists(true);
    for o in fail_replicas(&s, VICTIM, STORAGE_NODE) {
        b.modify(o);
    }
    service.point_to(b.addr);
    let victim = Synthetic::volume_name(VICTIM);
    let failed =
        |v: &ClusterView| v.replicas_of_volume(&victim).filter(|r| !r.spec.failed_at.is_empty()).count() == 2;
    until("the change through B's watches", || failed(&guard.view.read())).await;
    assert!(
        b.requests()
            .iter()
            .any(|q| q.starts_with("/apis/longhorn.io/v1beta2/namespaces/longhorn-system/replicas?")
                && q.contains("watch=")),
        "the replicas' watch resumed on B"
    );
    assert_eq!(guard.readyz_until(200).await, "ok\n");
    let (allowed, _, message) = guard.evict(STORAGE_NODE).await;
    assert!(!allowed && message.contains(&victim) && !message.contains("could not confirm"), "{message}");
    guard.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_that_cannot_complete_gives_up_at_the_confirm_timeout() {
    let (_, items) = cluster();
    let api = Arc::new(WatchApi::start(items).await);
    let guard = Guard::start(api.config_at(api.addr), vec![api.clone()], Duration::from_millis(700)).await;
    // Watches silent, and every read answered only after 30 s: the view goes stale and the
    // confirmation's reads hang.
    api.hold("/");
    api.delay_lists(Duration::from_secs(30));
    until("the view stale", || {
        !guard.view.read().freshness().is_fresh(std::time::SystemTime::now(), MAX_VIEW_AGE)
    })
    .await;
    let t0 = Instant::now();
    let (allowed, code, message) = guard.evict(STORAGE_NODE).await;
    let took = t0.elapsed();
    assert!(!allowed && code == 429, "{message}");
    assert!(
        message.contains("could not confirm") && message.contains("did not answer within 700ms"),
        "{message}"
    );
    // The request's own deadline (8 s) is far away.
    assert!(took < Duration::from_secs(4), "answered after {took:?}");
    guard.stop().await;
}
