//! Watch faults, end to end over real TLS: `serve`'s watches and HTTPS server against a
//! stand-in API server that crashes (every connection dropped, new ones refused), comes back,
//! and may have expired every resource version it handed out (`410 Gone`, as after etcd
//! compaction). The policy's `maxViewAge` is 60 s, so only the fault itself can make the view
//! stale here.
//!
//! While a watch is broken the view is stale: the eviction that fresh data allows is denied
//! with 429 "could not confirm" (the confirmation reads fail too), an unsafe one is still
//! denied for what it is. After the API server is back, each kind is current again once it is
//! listed again (its resumed watch's first event, or a quiet spell, starts the list), and decisions rest on what the API server holds, including changes made
//! while longhorn-guard could not see them.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use longhorn_guard::admit::Admitter;
use longhorn_guard::cluster::stats::{self, WatchFault};
use longhorn_guard::cluster::{watch, ClusterView, ObjectKind, SharedView, Source};
use longhorn_guard::policy::drain::confirm;
use longhorn_guard::policy::Policy;
use longhorn_guard::synthetic::{Group, Synthetic};
use serde_json::{json, Value};
use support::watchapi::WatchApi;
use support::*;

/// 4 nodes, 12 volumes: node 3 holds replicas and no engine (its eviction is safe), node 0
/// runs engines (its eviction is not). Volume 3 has its replicas on nodes 3, 0 and 1.
fn cluster() -> (Synthetic, Vec<Value>) {
    let s = Synthetic::new(4, 12).unwrap();
    let items = s.list()["items"].as_array().unwrap().clone();
    (s, items)
}

const STORAGE_NODE: usize = 3;
const VICTIM: usize = 3;

/// longhorn-guard in watch mode against `api`: the watches, the confirmer and the HTTPS server.
struct Guard {
    server: TestServer,
    view: SharedView,
    watches: tokio::task::JoinHandle<()>,
}

/// An eviction's answer: allowed, HTTP code of the denial (200 when allowed), message.
struct Answer {
    allowed: bool,
    code: u64,
    message: String,
}

impl Guard {
    /// `recheck_after`: how long a resumed watch may stay quiet before its kind is listed again.
    async fn start(api: &WatchApi, recheck_after: Duration) -> Self {
        Self::start_listing(api, recheck_after, watch::ListWay::Plain).await
    }

    /// [`Guard::start`], lists read `lists`' way first.
    async fn start_listing(api: &WatchApi, recheck_after: Duration, lists: watch::ListWay) -> Self {
        let client = api.client();
        let view = SharedView::new(ClusterView::new(Source::Watch));
        let tuning = watch::Tuning {
            recheck_after,
            watch_timeout_secs: watch::WATCH_TIMEOUT_SECS,
            resume_once: false,
            lists,
        };
        let watches = tokio::spawn(watch::run_with(client.clone(), view.clone(), tuning));
        let policy = Policy::parse("drain:\n  maxViewAge: 60s\n").unwrap();
        let admitter =
            Admitter::new(view.clone(), Arc::new(policy), Some(confirm::confirmer(client, view.clone())));
        let guard = Self { server: TestServer::with_admitter(admitter).await, view, watches };
        until("the first list of every kind", || guard.view.read().freshness().synced).await;
        guard
    }

    /// POSTs the eviction of node `n`'s instance manager to `/validate`.
    async fn evict(&self, n: usize) -> Answer {
        let resp = &evict_pod(&self.server, &Synthetic::instance_manager_name(n)).await;
        Answer {
            allowed: resp["allowed"].as_bool().unwrap(),
            code: resp["status"]["code"].as_u64().unwrap_or(200),
            message: resp["status"]["message"].as_str().unwrap_or("").to_string(),
        }
    }

    fn failing(&self) -> Vec<&'static str> {
        self.view.read().freshness().failing
    }

    async fn metrics(&self) -> String {
        request(self.server.addr, &self.server.client, "GET", "/metrics", vec![]).await.unwrap().text()
    }

    /// [`Guard::evict`], and the LISTs `api` got meanwhile (confirmation reads).
    async fn evict_reading(&self, api: &WatchApi, n: usize) -> (Answer, Vec<String>) {
        let before = api.requests().len();
        let a = self.evict(n).await;
        let lists = api.requests()[before..].iter().filter(|q| !q.contains("watch=")).cloned().collect();
        (a, lists)
    }

    async fn stop(self) {
        self.watches.abort();
        self.server.handle.shutdown();
        assert!(self.server.handle.stopped().await);
    }
}

/// The replicas of volume `v` that are not on node `keep`, and its engine, as failed (the
/// engine reports them `ERR`) or healthy again (`RW`): with them failed, `keep` holds the
/// volume's last healthy replica.
fn fail_replicas(s: &Synthetic, v: usize, keep: usize, failed: bool) -> Vec<Value> {
    let volume = Synthetic::volume_name(v);
    let keep = Synthetic::node_name(keep);
    let mut out = Vec::new();
    let mut failed_names = Vec::new();
    for mut r in s.objects(Group::Replica).filter(|r| r["spec"]["volumeName"] == volume.as_str()) {
        if r["spec"]["nodeID"] == keep.as_str() {
            continue;
        }
        if failed {
            r["spec"]["healthyAt"] = json!("");
            r["spec"]["failedAt"] = json!(s.timestamp);
            r["status"]["currentState"] = json!("error");
        }
        failed_names.push(r["metadata"]["name"].as_str().unwrap().to_string());
        out.push(r);
    }
    let mut engine = s.objects(Group::Engine).find(|e| e["spec"]["volumeName"] == volume.as_str()).unwrap();
    for name in &failed_names {
        engine["status"]["replicaModeMap"][name] = json!(if failed { "ERR" } else { "RW" });
    }
    out.push(engine);
    out
}

fn gone_total() -> u64 {
    ObjectKind::ALL.iter().map(|k| stats::global().watch_errors(*k, WatchFault::Gone)).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_and_expired_watches_never_let_an_unconfirmed_eviction_through() {
    let (s, items) = cluster();
    let api = WatchApi::start(items).await;
    let guard = Guard::start(&api, watch::RECHECK_AFTER).await;

    // Healthy: the safe eviction is allowed from the view, without a read; the unsafe denied.
    let (a, lists) = guard.evict_reading(&api, STORAGE_NODE).await;
    assert!(a.allowed, "{}", a.message);
    assert!(lists.is_empty(), "a fresh view needs no confirmation: {lists:?}");
    let a = guard.evict(0).await;
    assert!(!a.allowed && a.message.contains("attached to scale-node-000"), "{}", a.message);

    // The API server crashes.
    api.stop();
    until("every watch marked failing", || guard.failing().len() == ObjectKind::ALL.len()).await;
    let m = guard.metrics().await;
    let failing = format!("longhorn_guard_cluster_view_failing_watches {}\n", ObjectKind::ALL.len());
    assert!(m.contains(&failing), "{m}");
    assert!(
        m.contains("longhorn_guard_watch_errors_total{kind=\"replicas.longhorn.io\",reason=\"error\"}"),
        "{m}"
    );
    let a = guard.evict(STORAGE_NODE).await;
    assert!(!a.allowed, "a stale view never allows: {}", a.message);
    assert_eq!(a.code, 429, "{}", a.message);
    assert!(
        a.message.starts_with("longhorn-guard: could not confirm that draining scale-node-003 is safe ("),
        "{}",
        a.message
    );
    let a = guard.evict(0).await;
    assert!(!a.allowed, "{}", a.message);
    assert!(
        a.message.contains("attached to scale-node-000") && !a.message.contains("could not confirm"),
        "{}",
        a.message
    );

    // While it is down, volume 3 loses its replicas on nodes 0 and 1 (changes longhorn-guard
    // cannot see), and etcd is compacted: every resource version handed out is gone.
    for o in fail_replicas(&s, VICTIM, STORAGE_NODE, true) {
        api.modify(o);
    }
    let gone_before = gone_total();
    api.start_again(true);
    until("every kind current again", || guard.failing().is_empty()).await;
    assert!(gone_total() >= gone_before + 9, "each resumed watch met 410 Gone");
    let m = guard.metrics().await;
    assert!(m.contains("longhorn_guard_cluster_view_failing_watches 0\n"), "{m}");
    assert!(
        m.contains("longhorn_guard_watch_errors_total{kind=\"replicas.longhorn.io\",reason=\"gone\"}"),
        "{m}"
    );

    // The relist brought the change made while down: node 3 now holds volume 3's last
    // healthy replica.
    let victim = Synthetic::volume_name(VICTIM);
    let a = guard.evict(STORAGE_NODE).await;
    assert!(!a.allowed, "{}", a.message);
    assert!(a.message.contains(&victim) && !a.message.contains("could not confirm"), "{}", a.message);

    // A change after the recovery arrives through the watch: healed, the eviction is allowed.
    for o in fail_replicas(&s, VICTIM, STORAGE_NODE, false) {
        api.modify(o);
    }
    let healed = |v: &ClusterView| {
        v.replicas_of_volume(&victim).all(|r| r.spec.failed_at.is_empty())
            && v.engine_of(&victim).is_some_and(|e| e.status.replica_mode_map.values().all(|m| m == "RW"))
    };
    until("the healed replicas in the view", || healed(&guard.view.read())).await;
    let a = guard.evict(STORAGE_NODE).await;
    assert!(a.allowed, "{}", a.message);
    guard.stop().await;
}

const VOLUMES: &str = "/apis/longhorn.io/v1beta2/namespaces/longhorn-system/volumes?";
const REPLICAS: &str = "/apis/longhorn.io/v1beta2/namespaces/longhorn-system/replicas?";

fn lists_of(path: &str, requests: &[String]) -> usize {
    requests.iter().filter(|q| q.starts_with(path) && !q.contains("watch=")).count()
}

/// Stops and starts `api` again without expiring anything: the watches resume from their
/// resource versions. Returns the index of the first request after the restart.
async fn crash_and_resume(api: &WatchApi, guard: &Guard) -> usize {
    api.stop();
    until("every watch marked failing", || guard.failing().len() == ObjectKind::ALL.len()).await;
    let mark = api.requests().len();
    api.start_again(false);
    mark
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_watch_is_listed_again_at_its_first_event() {
    let (s, items) = cluster();
    let api = WatchApi::start(items).await;
    // Quiet resumed watches are never listed again here: only an event can start the list.
    let guard = Guard::start(&api, Duration::from_secs(3600)).await;
    let mark = crash_and_resume(&api, &guard).await;
    until("the volume watch resumed", || {
        api.requests()[mark..].iter().any(|q| q.starts_with(VOLUMES) && q.contains("watch="))
    })
    .await;
    let mut volume = s.objects(Group::Volume).next().unwrap();
    volume["metadata"]["annotations"] = json!({"e2e": "touched"});
    api.modify(volume);
    // The event may be the first of a replayed burst: the kind is current again only through
    // a list that the event starts.
    until("volumes current again", || !guard.failing().contains(&"volumes.longhorn.io")).await;
    assert!(lists_of(VOLUMES, &api.requests()[mark..]) >= 1, "current through a list, not the event");
    assert!(guard.failing().contains(&"replicas.longhorn.io"), "the quiet kinds stay stale");
    // Stale still: the allow rests on confirmation reads, which the API server answers.
    let (a, lists) = guard.evict_reading(&api, STORAGE_NODE).await;
    assert!(a.allowed, "{}", a.message);
    assert!(lists_of(REPLICAS, &lists) >= 1, "confirmed with reads: {lists:?}");
    guard.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_managers_are_listed_a_few_per_page() {
    // Each instance manager's status names every engine and replica it runs (1.5 MB at 10,000
    // volumes): listed 500 per page, one body held all of them (45 MB) and set a relist's peak.
    // (A plain list is read object by object and holds no page.)
    let (_, items) = cluster();
    let api = WatchApi::start(items).await;
    let guard = Guard::start_listing(&api, watch::RECHECK_AFTER, watch::ListWay::Paged).await;
    let lists = |path: &str| -> Vec<String> {
        api.requests().into_iter().filter(|q| q.starts_with(path) && !q.contains("watch=")).collect()
    };
    let ims = lists("/apis/longhorn.io/v1beta2/namespaces/longhorn-system/instancemanagers?");
    assert!(!ims.is_empty() && ims.iter().all(|q| q.contains("limit=4")), "{ims:?}");
    let replicas = lists(REPLICAS);
    assert!(!replicas.is_empty() && replicas.iter().all(|q| q.contains("limit=500")), "{replicas:?}");
    guard.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_resumed_watches_are_listed_again_then_trusted() {
    let (_, items) = cluster();
    let api = WatchApi::start(items).await;
    let guard = Guard::start(&api, Duration::from_millis(500)).await;
    let mark = crash_and_resume(&api, &guard).await;
    until("every kind current again", || guard.failing().is_empty()).await;
    let after = api.requests()[mark..].to_vec();
    for path in [VOLUMES, REPLICAS, "/api/v1/nodes?"] {
        assert!(lists_of(path, &after) >= 1, "{path} listed again: {after:?}");
    }
    let (a, lists) = guard.evict_reading(&api, STORAGE_NODE).await;
    assert!(a.allowed, "{}", a.message);
    assert!(lists.is_empty(), "fresh again: no confirmation: {lists:?}");
    guard.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_the_watch_cannot_read_makes_its_kind_list_again() {
    let (s, items) = cluster();
    let api = WatchApi::start(items).await;
    let guard = Guard::start(&api, Duration::from_secs(3600)).await;
    let a = guard.evict(STORAGE_NODE).await;
    assert!(a.allowed, "{}", a.message);
    let mark = api.requests().len();
    // The victim's other replicas fail, in events the watch cannot read; then an unrelated
    // replica and engine change in events it can read (the stream goes on past the lost ones).
    for o in fail_replicas(&s, VICTIM, STORAGE_NODE, true) {
        api.modify_unreadably(o);
    }
    let victim_name = Synthetic::volume_name(VICTIM);
    let mut other =
        s.objects(Group::Replica).find(|r| r["spec"]["volumeName"] != victim_name.as_str()).unwrap();
    other["metadata"]["annotations"] = json!({"e2e": "touched"});
    api.modify(other);
    let victim = Synthetic::volume_name(VICTIM);
    let mut engine = s.objects(Group::Engine).find(|e| e["spec"]["volumeName"] != victim.as_str()).unwrap();
    engine["metadata"]["annotations"] = json!({"e2e": "touched"});
    api.modify(engine);
    let whole_list =
        |q: &String| q.starts_with(REPLICAS) && !q.contains("watch=") && !q.contains("labelSelector");
    until("replicas listed again", || api.requests()[mark..].iter().any(whole_list)).await;
    until("every kind current again", || guard.failing().is_empty()).await;
    let a = guard.evict(STORAGE_NODE).await;
    assert!(!a.allowed, "the lost change is in the view after the list");
    assert_eq!(a.code, 429);
    assert!(a.message.contains("would strand"), "{}", a.message);
    guard.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_list_leaves_its_kind_as_old_as_the_lists_start() {
    // Every page of a list shows the state at its start: a list answered 1.5 s late holds data
    // 1.5 s old when it ends, and the view must not count it as newer.
    let (_, items) = cluster();
    let api = WatchApi::start(items).await;
    api.delay_lists(Duration::from_millis(1500));
    let view = SharedView::new(ClusterView::new(Source::Watch));
    let watches = tokio::spawn(watch::run_with(api.client(), view.clone(), watch::tuning(false)));
    until("the first list of every kind", || view.read().freshness().synced).await;
    let age = view.read().freshness().monotonic_age.expect("every kind listed");
    assert!(age >= Duration::from_millis(1400), "the view was synced with data only {age:?} old");
    watches.abort();
}
