//! Probes, end to end over real TLS: `serve`'s watches (with BOOKMARKs), its probes and its
//! HTTPS server against a stand-in API server whose watch cache sends BOOKMARKs at the current
//! resource version (as kube-apiserver's does on its timer). `maxViewAge` is 1 s, so the view
//! is stale by the old rule within a second of quiet.
//!
//! A quiet view is proven current by the probes and the watches' BOOKMARKs: a safe eviction
//! is allowed without reading the node's state. A watch that stalls (its stream delivers
//! nothing, while the other kinds' BOOKMARKs and the probes go on) proves nothing for its kind,
//! so a change it did not deliver is read by the confirmation, and the eviction it makes
//! unsafe is denied.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use longhorn_guard::admit::Admitter;
use longhorn_guard::cluster::{confirm, probe, stats, watch, ClusterView, ObjectKind, SharedView, Source};
use longhorn_guard::policy::Policy;
use longhorn_guard::synthetic::{Group, Synthetic};
use serde_json::json;
use support::watchapi::WatchApi;
use support::*;

const WAIT: Duration = Duration::from_secs(40);
/// 4 nodes, 12 volumes: node 3 holds replicas and no engine (its eviction is safe). Volume 3
/// has its replicas on nodes 3, 0 and 1.
const STORAGE_NODE: usize = 3;
const VICTIM: usize = 3;

struct Guard {
    server: TestServer,
    view: SharedView,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// What the stand-in's watch cache sends every 100 ms, after a write elsewhere in etcd has
/// moved the resource version on (as leases and events do all the time).
#[derive(Clone, Copy)]
enum Bookmarks {
    /// BOOKMARKs at the current resource version: a watch cache that keeps up.
    Current,
    /// BOOKMARKs at the resource version of the start: a watch cache stuck behind etcd.
    Stuck,
}

impl Guard {
    /// Watches with BOOKMARKs (3 s watches, resumed, as `serve` runs them with probes), probes
    /// every 100 ms, BOOKMARKs sent every 100 ms.
    async fn start(api: &Arc<WatchApi>, bookmarks: Bookmarks) -> Self {
        let client = api.client();
        let view = SharedView::new(ClusterView::new(Source::Watch));
        let mut tasks = vec![
            tokio::spawn(watch::run_with(client.clone(), view.clone(), watch::tuning(true))),
            tokio::spawn(probe::run(client.clone(), view.clone(), Duration::from_millis(100))),
        ];
        let (timer, stuck_at) = (api.clone(), api.resource_version());
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                timer.bump();
                match bookmarks {
                    Bookmarks::Current => timer.bookmark(),
                    Bookmarks::Stuck => timer.bookmark_at(stuck_at),
                }
            }
        }));
        let policy = Policy::parse("drain:\n  maxViewAge: 1s\n").unwrap();
        let admitter =
            Admitter::new(view.clone(), Arc::new(policy), Some(confirm::confirmer(client, view.clone())));
        let guard = Self { server: TestServer::with_admitter(admitter).await, view, tasks };
        let t0 = Instant::now();
        while !guard.view.read().freshness().synced {
            assert!(t0.elapsed() < WAIT, "gave up waiting for the first list of every kind");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        guard
    }

    /// POSTs the eviction of node `n`'s instance manager; returns (allowed, message) and the
    /// confirmation reads `api` got meanwhile (LISTs with a label selector: neither the watches
    /// nor the probes use one).
    async fn evict_reading(&self, api: &WatchApi, n: usize) -> (bool, String, Vec<String>) {
        let before = api.requests().len();
        let resp = &evict_pod(&self.server, &Synthetic::instance_manager_name(n)).await;
        let reads =
            api.requests()[before..].iter().filter(|q| q.contains("labelSelector=")).cloned().collect();
        (
            resp["allowed"].as_bool().unwrap(),
            resp["status"]["message"].as_str().unwrap_or("").to_string(),
            reads,
        )
    }

    async fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
        self.server.handle.shutdown();
        assert!(self.server.handle.stopped().await);
    }
}

async fn cluster() -> (Synthetic, Arc<WatchApi>) {
    let s = Synthetic::new(4, 12).unwrap();
    let items = s.list()["items"].as_array().unwrap().clone();
    (s, Arc::new(WatchApi::start(items).await))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_view_is_proven_current_by_its_bookmarks_and_allows_without_reads() {
    let (_s, api) = cluster().await;
    let guard = Guard::start(&api, Bookmarks::Current).await;
    // Quiet for three times maxViewAge: no object changes, only probes and BOOKMARKs.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let f = guard.view.read().freshness();
    assert!(f.is_fresh(std::time::SystemTime::now(), Duration::from_secs(1)), "{f:?}");
    let (allowed, message, reads) = guard.evict_reading(&api, STORAGE_NODE).await;
    assert!(allowed, "{message}");
    assert!(reads.is_empty(), "an allow on a proven view reads nothing: {reads:#?}");
    // The probes are consistent reads (no resourceVersion) selecting a name no object has.
    let probes: Vec<String> = api
        .requests()
        .into_iter()
        .filter(|q| q.contains("fieldSelector=metadata.name%3Dlonghorn-guard-freshness-probe"))
        .collect();
    assert!(probes.iter().all(|q| !q.contains("resourceVersion")), "{probes:#?}");
    assert!(probes.len() >= 9, "{probes:#?}");
    let proofs: u64 = ObjectKind::ALL.iter().map(|k| stats::global().proofs(*k)).sum();
    assert!(proofs >= 9, "every kind proven at least once, counted: {proofs}");
    guard.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_watch_proves_nothing_so_the_change_it_hides_is_read_and_denied() {
    let (s, api) = cluster().await;
    let guard = Guard::start(&api, Bookmarks::Current).await;
    // The replicas' watch stalls; every other kind's BOOKMARKs and the probes go on.
    api.hold("/replicas");
    // Volume VICTIM's replicas off the storage node fail: only the storage node holds a healthy
    // one now. The view never hears of it.
    let volume = Synthetic::volume_name(VICTIM);
    let keep = Synthetic::node_name(STORAGE_NODE);
    for mut r in s.objects(Group::Replica).filter(|r| r["spec"]["volumeName"] == volume.as_str()) {
        if r["spec"]["nodeID"] != keep.as_str() {
            r["spec"]["healthyAt"] = json!("");
            r["spec"]["failedAt"] = json!(s.timestamp);
            r["status"]["currentState"] = json!("error");
            api.modify(r);
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let f = guard.view.read().freshness();
    assert!(!f.is_fresh(std::time::SystemTime::now(), Duration::from_secs(1)), "{f:?}");
    let (allowed, message, reads) = guard.evict_reading(&api, STORAGE_NODE).await;
    assert!(!allowed, "the stalled kind was trusted: {message}");
    assert!(message.contains(&volume), "{message}");
    assert!(reads.iter().any(|q| q.contains("/replicas?")), "{reads:#?}");
    guard.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_of_a_watch_cache_stuck_behind_etcd_prove_nothing() {
    let (_s, api) = cluster().await;
    let guard = Guard::start(&api, Bookmarks::Stuck).await;
    // BOOKMARKs keep arriving on every watch, but at a version every probe has passed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let f = guard.view.read().freshness();
    assert!(!f.is_fresh(std::time::SystemTime::now(), Duration::from_secs(1)), "{f:?}");
    let (allowed, message, reads) = guard.evict_reading(&api, STORAGE_NODE).await;
    assert!(allowed, "{message}");
    assert!(!reads.is_empty(), "the allow was confirmed by reads");
    guard.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_resumption_is_an_interruption_that_the_next_bookmark_ends_without_a_relist() {
    let (s, api) = cluster().await;
    let guard = Guard::start(&api, Bookmarks::Current).await;
    let lists_of_replicas = || {
        api.requests()
            .iter()
            .filter(|q| q.contains("/replicas?") && !q.contains("watch=") && !q.contains("fieldSelector"))
            .count()
    };
    let listed = lists_of_replicas();
    // The replicas' watch ends every 3 s; its next start is refused once (a 500).
    api.refuse_watches("/replicas", 1);
    let t0 = Instant::now();
    while !guard.view.read().freshness().failing.contains(&"replicas.longhorn.io") {
        assert!(
            t0.elapsed() < WAIT,
            "the interruption was never noted: errors {}",
            stats::global()
                .watch_errors(ObjectKind::Replica, longhorn_guard::cluster::stats::WatchFault::Error)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A change while the watch is down: the resumed watch replays it.
    let victim =
        s.objects(Group::Replica).find(|r| r["spec"]["nodeID"] == Synthetic::node_name(0).as_str()).unwrap();
    let name = victim["metadata"]["name"].as_str().unwrap().to_string();
    let mut changed = victim.clone();
    changed["status"]["currentState"] = json!("stopped");
    api.modify(changed);
    while !guard.view.read().freshness().failing.is_empty() {
        assert!(t0.elapsed() < WAIT, "the resumed watch's BOOKMARK never ended the interruption");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let state = guard.view.read().replica(&name).map(|r| r.status.current_state.to_string());
    assert_eq!(state.as_deref(), Some("stopped"), "the change made while the watch was down was replayed");
    assert_eq!(lists_of_replicas(), listed, "no relist: {:#?}", api.requests());
    assert!(guard.view.read().freshness().is_fresh(std::time::SystemTime::now(), Duration::from_secs(1)));
    guard.stop().await;
}
