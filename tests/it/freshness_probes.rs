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

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use longhorn_guard::admit::Admitter;
use longhorn_guard::cluster::{probe, stats, watch, ClusterView, ObjectKind, SharedView, Source};
use longhorn_guard::policy::drain::confirm;
use longhorn_guard::policy::Policy;
use longhorn_guard::synthetic::{Group, Synthetic};
use serde_json::json;
use support::watchapi::WatchApi;
use support::*;

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
    /// BOOKMARKs 20 versions (2 s of writes) behind: a watch cache lagging behind etcd by
    /// more than `maxViewAge`.
    Lagging,
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
        let timer = api.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                timer.bump();
                match bookmarks {
                    Bookmarks::Current => timer.bookmark(),
                    Bookmarks::Lagging => timer.bookmark_at(timer.resource_version().saturating_sub(20)),
                }
            }
        }));
        let policy = Policy::parse("drain:\n  maxViewAge: 1s\n").unwrap();
        let admitter =
            Admitter::new(view.clone(), Arc::new(policy), Some(confirm::confirmer(client, view.clone())));
        let guard = Self { server: TestServer::with_admitter(admitter).await, view, tasks };
        until("the first list of every kind", || guard.view.read().freshness().synced).await;
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

/// Lists of the replicas `api` got so far (the watch's lists: neither a watch nor a probe).
fn replica_lists(api: &WatchApi) -> usize {
    let list = |q: &String| q.contains("/replicas?") && !q.contains("watch=") && !q.contains("fieldSelector");
    api.requests().iter().filter(|q| list(q)).count()
}

/// Watches of the replicas `api` got so far (started and refused alike; not the streaming
/// list the stand-in refuses first).
fn replica_watches(api: &WatchApi) -> usize {
    let watch =
        |q: &String| q.contains("/replicas?") && q.contains("watch=") && !q.contains("sendInitialEvents");
    api.requests().iter().filter(|q| watch(q)).count()
}

async fn cluster() -> (Synthetic, Arc<WatchApi>) {
    let s = Synthetic::new(4, 12).unwrap();
    let items = s.list()["items"].as_array().unwrap().clone();
    (s, Arc::new(WatchApi::start(items).await))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_view_is_proven_current_by_its_bookmarks_and_allows_without_reads() {
    let (_s, api) = cluster().await;
    // The proof counters are process-wide and only grow: this guard's proofs are what it adds.
    let proofs_before: Vec<u64> = ObjectKind::ALL.iter().map(|k| stats::global().proofs(*k)).collect();
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
    for (k, before) in ObjectKind::ALL.iter().zip(proofs_before) {
        assert!(stats::global().proofs(*k) > before, "{} never proven", k.display());
    }
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
async fn bookmarks_of_a_watch_cache_lagging_behind_etcd_prove_only_as_much_as_they_reached() {
    let (_s, api) = cluster().await;
    let guard = Guard::start(&api, Bookmarks::Lagging).await;
    // BOOKMARKs keep arriving on every watch, each at a version the probes passed 2 s before:
    // they prove the view only as it was 2 s ago, older than maxViewAge.
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
    let (lists_of_replicas, watches) = (|| replica_lists(&api), || replica_watches(&api));
    // The replicas' first watch has started, so the next is a resumption (after its 3 s).
    until("the replicas' first watch", || watches() > 0).await;
    let listed = lists_of_replicas();
    // That resumption is refused once (a 500).
    api.refuse_watches("/replicas", 1);
    let interrupted = || guard.view.read().freshness().failing.contains(&"replicas.longhorn.io");
    until("the interruption noted", interrupted).await;
    // A change while the watch is down: the resumed watch replays it.
    let victim =
        s.objects(Group::Replica).find(|r| r["spec"]["nodeID"] == Synthetic::node_name(0).as_str()).unwrap();
    let name = victim["metadata"]["name"].as_str().unwrap().to_string();
    let mut changed = victim.clone();
    changed["status"]["currentState"] = json!("stopped");
    api.modify(changed);
    until("the resumed watch's BOOKMARK", || guard.view.read().freshness().failing.is_empty()).await;
    let state = guard.view.read().replica(&name).map(|r| r.status.current_state.to_string());
    assert_eq!(state.as_deref(), Some("stopped"), "the change made while the watch was down was replayed");
    assert_eq!(lists_of_replicas(), listed, "no relist: {:#?}", api.requests());
    assert!(guard.view.read().freshness().is_fresh(std::time::SystemTime::now(), Duration::from_secs(1)));
    guard.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interruption_after_a_watch_error_still_ends_in_a_relist() {
    let (_s, api) = cluster().await;
    let guard = Guard::start(&api, Bookmarks::Current).await;
    let (lists, watches) = (|| replica_lists(&api), || replica_watches(&api));
    until("the replicas' first watch", || watches() > 0).await;
    let listed = lists();
    // The next resumption is refused twice: an interruption, then an error (the kind failing
    // until listed again).
    api.refuse_watches("/replicas", 2);
    until("both refusals", || api.refusals_left() == 0).await;
    // The retry after the error is held (its stream says nothing until it ends, after 3 s),
    // and the resumption after that is refused once more: an interruption within the error's
    // failing spell. Then the watch works again.
    let n = watches();
    api.hold("/replicas");
    until("the retry after the error", || watches() > n).await;
    api.refuse_watches("/replicas", 1);
    until("the third refusal", || api.refusals_left() == 0).await;
    api.release("/replicas");
    let fresh = || {
        let f = guard.view.read().freshness();
        f.failing.is_empty() && f.is_fresh(std::time::SystemTime::now(), Duration::from_secs(1))
    };
    until("the replicas listed again and the view current", fresh).await;
    // Only a list ends an error's failing spell.
    assert!(lists() > listed, "the kind was cleared without a relist: {:#?}", api.requests());
    guard.stop().await;
}
