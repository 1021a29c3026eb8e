//! Streaming lists, end to end over real TLS against the stand-in API server: where the API
//! server streams lists (`sendInitialEvents=true`, kube-apiserver 1.32+), every kind is listed
//! by one watch and no paged LIST, and the watch resumes from the end marker's version; where
//! it refuses them (`422`, an older API server or the `WatchList` feature off), the kinds are
//! listed in pages and a relist does not ask again. And plain lists (`serve --lists plain`): one
//! LIST a kind, read object by object, then the watch from its version.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use longhorn_guard::cluster::{watch, ClusterView, ObjectKind, SharedView, Source};
use longhorn_guard::synthetic::{Group, Synthetic};
use serde_json::json;
use support::watchapi::WatchApi;
use support::*;

async fn cluster(streams: bool) -> (Synthetic, Arc<WatchApi>) {
    let s = Synthetic::new(4, 30).unwrap();
    let items = s.list()["items"].as_array().unwrap().clone();
    let api = Arc::new(WatchApi::start(items).await);
    api.stream_lists(streams);
    (s, api)
}

/// The watches of `api` into a new view, synced, lists streamed first.
async fn synced(api: &WatchApi) -> (SharedView, tokio::task::JoinHandle<()>) {
    synced_by(api, watch::ListWay::Streaming).await
}

/// The watches of `api` into a new view, synced, lists read `lists`' way first.
async fn synced_by(api: &WatchApi, lists: watch::ListWay) -> (SharedView, tokio::task::JoinHandle<()>) {
    let view = SharedView::new(ClusterView::new(Source::Watch));
    let tuning = watch::Tuning { lists, ..watch::tuning(true) };
    let task = tokio::spawn(watch::run_with(api.client(), view.clone(), tuning));
    until("the first list of every kind", || view.read().freshness().synced).await;
    (view, task)
}

fn streamed(q: &str) -> bool {
    q.contains("watch=")
        && q.contains("sendInitialEvents=true")
        && q.contains("resourceVersionMatch=NotOlderThan")
}

fn paged(q: &str) -> bool {
    !q.contains("watch=") && q.contains("limit=") && !q.contains("fieldSelector")
}

/// A plain LIST: no watch, no pages, no selector (a probe selects by name).
fn plain(q: &str) -> bool {
    !q.contains("watch=") && !q.contains("limit=") && !q.contains("fieldSelector")
}

/// The replica `api` serves first, moved to another node: it must reach the view by its watch.
async fn moved_after_the_list(s: &Synthetic, api: &WatchApi, view: &SharedView) {
    let mut r = s.objects(Group::Replica).next().unwrap();
    let name = r["metadata"]["name"].as_str().unwrap().to_string();
    r["spec"]["nodeID"] = json!("elsewhere");
    api.modify(r);
    let moved = || {
        view.read()
            .objects::<longhorn_guard::cluster::Replica>()
            .get("", &name)
            .is_some_and(|r| r.spec.node_id.as_str() == "elsewhere")
    };
    until("the change after the list", moved).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_list_fills_the_view_with_one_list_a_kind_and_the_watch_goes_on_from_its_version() {
    let (s, api) = cluster(true).await;
    let (view, task) = synced_by(&api, watch::ListWay::Plain).await;
    let requests = api.requests();
    assert!(!requests.iter().any(|q| paged(q) || streamed(q)), "{requests:#?}");
    assert_eq!(requests.iter().filter(|q| plain(q)).count(), ObjectKind::ALL.len(), "{requests:#?}");
    let replicas = view.read().objects::<longhorn_guard::cluster::Replica>().len();
    assert_eq!(replicas, s.count(Group::Replica));
    assert!(s.count(Group::Replica) > 64, "more objects than the reader holds ahead");
    moved_after_the_list(&s, &api, &view).await;
    task.abort();
}

/// A list (`way`, seen in the requests by `asked`) answered 1.5 s late: its data is 1.5 s old
/// when it ends, and the view must not count it as newer.
async fn a_slow_list_leaves_its_kind_as_old_as_its_request(way: watch::ListWay, asked: fn(&str) -> bool) {
    let (_s, api) = cluster(true).await;
    api.delay_lists(Duration::from_millis(1500));
    let (view, task) = synced_by(&api, way).await;
    assert!(api.requests().iter().any(|q| asked(q)), "{:#?}", api.requests());
    let age = view.read().freshness().monotonic_age.expect("every kind listed");
    assert!(age >= Duration::from_millis(1400), "the view was synced with data only {age:?} old");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_plain_list_leaves_its_kind_as_old_as_its_request() {
    a_slow_list_leaves_its_kind_as_old_as_its_request(watch::ListWay::Plain, plain).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_fills_the_view_without_a_paged_list_and_the_watch_goes_on_from_its_end() {
    let (s, api) = cluster(true).await;
    let (view, task) = synced(&api).await;
    let requests = api.requests();
    assert!(!requests.iter().any(|q| paged(q)), "{requests:#?}");
    assert_eq!(requests.iter().filter(|q| streamed(q)).count(), ObjectKind::ALL.len(), "{requests:#?}");
    let replicas = view.read().objects::<longhorn_guard::cluster::Replica>().len();
    assert_eq!(replicas, s.count(Group::Replica));
    // After the end marker each kind is watched from its version: a change arrives.
    moved_after_the_list(&s, &api, &view).await;
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_refusing_streaming_lists_is_listed_in_pages_and_not_asked_again() {
    let (_s, api) = cluster(false).await;
    let (view, task) = synced(&api).await;
    let asked = || api.requests().iter().filter(|q| streamed(q)).count();
    let first = asked();
    assert!((1..=ObjectKind::ALL.len()).contains(&first), "{:#?}", api.requests());
    assert!(api.requests().iter().any(|q| paged(q) && q.contains("/replicas?")));
    // A 410 Gone makes every kind list again: in pages, without asking to stream.
    let mark = api.requests().len();
    api.stop();
    api.start_again(true);
    let relisted = || api.requests()[mark..].iter().filter(|q| paged(q)).count() >= ObjectKind::ALL.len();
    until("every kind listed again", relisted).await;
    until("the view current again", || view.read().freshness().failing.is_empty()).await;
    assert_eq!(asked(), first, "{:#?}", &api.requests()[mark..]);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_streaming_list_leaves_its_kind_as_old_as_its_request() {
    // A streaming list is read when its request arrives; its answer may come much later (the
    // API server first waits for its cache to reach etcd's revision). Answered 1.5 s late, its
    // data is 1.5 s old when it ends, and the view must not count it as newer: the list's time
    // is taken before its request is sent, not when its answer begins.
    a_slow_list_leaves_its_kind_as_old_as_its_request(watch::ListWay::Streaming, streamed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_list_cut_off_falls_back_to_streaming_lists_for_good() {
    let (s, api) = cluster(true).await;
    api.cut_plain_lists(true);
    let (view, task) = synced_by(&api, watch::ListWay::Plain).await;
    let requests = api.requests();
    assert!(requests.iter().any(|q| plain(q)), "{requests:#?}");
    assert!(requests.iter().any(|q| streamed(q) && q.contains("/replicas?")), "{requests:#?}");
    assert_eq!(view.read().objects::<longhorn_guard::cluster::Replica>().len(), s.count(Group::Replica));
    // A 410 Gone makes every kind list again: streamed, without a plain LIST first.
    api.cut_plain_lists(false);
    let mark = api.requests().len();
    api.stop();
    api.start_again(true);
    let relisted = || api.requests()[mark..].iter().filter(|q| streamed(q)).count() >= ObjectKind::ALL.len();
    until("every kind listed again", relisted).await;
    let after = &api.requests()[mark..];
    assert!(!after.iter().any(|q| plain(q)), "{after:#?}");
    task.abort();
}
