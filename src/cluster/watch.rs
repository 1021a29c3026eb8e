//! Filling the cluster view from live watches (kube reflectors).
//!
//! One `kube::runtime::watcher` per kind (core Nodes, Pods in `longhorn-system`,
//! StorageClasses, and the Longhorn kinds in `longhorn-system`), read as `DynamicObject`s and
//! converted to the lean typed objects. A (re)list is buffered and applied in one step when it
//! completes, so the view never shows half a list. The view is marked synced once every kind
//! finished its first list.
//!
//! Watch faults. Any watch error (the API server unreachable, a dropped stream, `410 Gone`)
//! marks its kind as failing, which makes the whole view stale at once: drain allows are then
//! confirmed with consistent reads, whatever the view's age. The watcher retries after
//! [`RETRY_MIN`], doubling up to [`RETRY_MAX`], and resumes from the resource version it had,
//! so no event is lost: the API server replays what it missed, or answers `410 Gone` when it
//! no longer has those events, and then the kind is listed again at once. The kind is current
//! again at its next event (the resumed stream is continuous) or completed list. A resumed
//! watch that stays quiet for [`RECHECK_AFTER`] gives no such proof, so the kind is then
//! listed again. Errors are counted in `longhorn_guard_watch_errors_total` by kind and reason
//! (`gone` for 410, `error` otherwise).

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use futures::stream::BoxStream;
use futures::{stream, StreamExt as _};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt as _;

use super::stats::{self, WatchFault};
use super::{Object, ObjectKind, SharedView};

/// First wait before a failed watch is retried.
pub const RETRY_MIN: Duration = Duration::from_millis(500);
/// Longest wait between attempts while the API server stays unreachable: short, because while
/// a watch is down every drain allow costs a confirmation (several LISTs), more than a retry.
pub const RETRY_MAX: Duration = Duration::from_secs(4);
/// How long a kind may stay failing after its last error with no event before it is listed
/// again; longer than [`RETRY_MAX`], so that while the API server is down the watcher keeps
/// resuming (and meets the `410 Gone` the API server may answer once it is back).
pub const RECHECK_AFTER: Duration = Duration::from_secs(6);

/// One watched kind: what to ask the API server for and where.
#[derive(Clone, Debug)]
pub struct Target {
    pub kind: ObjectKind,
    pub resource: ApiResource,
    /// `None` for cluster-wide.
    pub namespace: Option<&'static str>,
}

/// Every kind the view holds, as the read-set declares it.
pub fn targets() -> Vec<Target> {
    super::readset::RESOURCES
        .iter()
        .map(|r| Target {
            kind: r.kind,
            resource: ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(r.group, r.version, r.type_name),
                r.plural,
            ),
            namespace: r.namespace,
        })
        .collect()
}

type WatchItem = (ObjectKind, Result<Event<DynamicObject>, watcher::Error>);

/// The delay before attempt `failures` + 1 after `failures` consecutive failures (1 or more):
/// [`RETRY_MIN`] doubled each time, at most [`RETRY_MAX`].
pub fn retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    RETRY_MIN.saturating_mul(1 << doublings).min(RETRY_MAX)
}

/// [`retry_delay`] as the watcher's backoff (reset by every event).
#[derive(Default)]
struct Retry {
    failures: u32,
}

impl Iterator for Retry {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        self.failures = self.failures.saturating_add(1);
        Some(retry_delay(self.failures))
    }
}

impl Backoff for Retry {
    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// The events of one kind's watcher. After an error, an event, a started list or
/// `recheck_after` ([`RECHECK_AFTER`]) with neither ends the failing spell; in the last case the watcher is
/// started over, so the kind is listed again. A `410 Gone` starts it over at once.
fn kind_events(
    api: Api<DynamicObject>,
    kind: ObjectKind,
    recheck_after: Duration,
) -> BoxStream<'static, WatchItem> {
    struct State {
        api: Api<DynamicObject>,
        inner: Option<BoxStream<'static, Result<Event<DynamicObject>, watcher::Error>>>,
        /// When the last error of a failing spell arrived.
        failed_at: Option<tokio::time::Instant>,
        /// When a `410 Gone` last restarted the watcher at once.
        gone_at: Option<tokio::time::Instant>,
    }
    let start = State { api, inner: None, failed_at: None, gone_at: None };
    stream::unfold(start, move |mut st| async move {
        loop {
            let api = st.api.clone();
            let inner = st.inner.get_or_insert_with(|| {
                watcher::watcher(api, watcher::Config::default()).backoff(Retry::default()).boxed()
            });
            let next = match st.failed_at {
                None => inner.next().await,
                Some(at) => match tokio::time::timeout_at(at + recheck_after, inner.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        tracing::info!(
                            kind = kind.display(),
                            "watch resumed with no event since its error; listing the kind again"
                        );
                        st.inner = None;
                        st.failed_at = None;
                        continue;
                    }
                },
            };
            match next {
                Some(Ok(event)) => {
                    st.failed_at = None;
                    return Some(((kind, Ok(event)), st));
                }
                Some(Err(e)) => {
                    let now = tokio::time::Instant::now();
                    st.failed_at = Some(now);
                    // The API server answered: list again at once rather than after the
                    // backoff, unless 410s repeat (then the backoff paces the lists).
                    let recent = st.gone_at.is_some_and(|t| now.duration_since(t) < recheck_after);
                    if fault_of(&e) == WatchFault::Gone && !recent {
                        st.inner = None;
                        st.gone_at = Some(now);
                    }
                    return Some(((kind, Err(e)), st));
                }
                // A watcher stream does not end; if it did, start it over.
                None => st.inner = None,
            }
        }
    })
    .boxed()
}

/// `gone` for `410 Gone` (in the watch stream or as the answer to the request), else `error`.
pub fn fault_of(e: &watcher::Error) -> WatchFault {
    let code = match e {
        watcher::Error::WatchError(status) => Some(status.code),
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    };
    if code == Some(410) {
        WatchFault::Gone
    } else {
        WatchFault::Error
    }
}

/// Runs every watch until the task is dropped, applying events to `view`.
pub async fn run(client: kube::Client, view: SharedView) {
    run_with(client, view, RECHECK_AFTER).await
}

/// [`run`] with another bound than [`RECHECK_AFTER`] for a quiet resumed watch (tests).
pub async fn run_with(client: kube::Client, view: SharedView, recheck_after: Duration) {
    let all = targets();
    let total = all.len();
    let streams = all.into_iter().map(|t| {
        let api: Api<DynamicObject> = match t.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &t.resource),
            None => Api::all_with(client.clone(), &t.resource),
        };
        kind_events(api, t.kind, recheck_after)
    });
    let mut merged = stream::select_all(streams);
    let mut pending: std::collections::HashMap<ObjectKind, (Vec<Object>, Vec<String>)> = Default::default();
    let mut listed: BTreeSet<ObjectKind> = BTreeSet::new();
    while let Some((kind, event)) = merged.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                let fault = fault_of(&e);
                stats::global().watch_error(kind, fault);
                view.update(|v| v.note_watch_failed(kind));
                match fault {
                    WatchFault::Gone => tracing::warn!(
                        kind = kind.display(),
                        error = %e,
                        "watch expired (410 Gone): listing the kind again; the view is stale until then"
                    ),
                    WatchFault::Error => tracing::warn!(
                        kind = kind.display(),
                        error = %e,
                        "watch failed; retrying, the view is stale until the kind is current again"
                    ),
                }
                continue;
            }
        };
        let now = SystemTime::now();
        match event {
            Event::Init => {
                pending.insert(kind, Default::default());
            }
            Event::InitApply(o) => {
                let (objects, unreadable) = pending.entry(kind).or_default();
                match convert(kind, o) {
                    Ok(obj) => objects.push(obj),
                    Err(name) => unreadable.push(name),
                }
            }
            Event::InitDone => {
                let (objects, unreadable) = pending.remove(&kind).unwrap_or_default();
                let n = objects.len();
                let first = listed.insert(kind);
                let all_listed = listed.len() == total;
                let still_failing = view.update(|v| {
                    v.replace_kind(kind, objects, now);
                    for name in &unreadable {
                        v.note_unreadable(kind, name);
                    }
                    if first && all_listed {
                        v.mark_synced(now);
                    }
                    v.freshness().failing.len()
                });
                if first {
                    tracing::info!(kind = kind.display(), objects = n, "listed");
                } else {
                    tracing::info!(kind = kind.display(), objects = n, failing = still_failing, "relisted");
                }
                if first && all_listed {
                    tracing::info!("cluster view synced: every watched kind is listed");
                }
            }
            // An event on a resumed watch: the stream is continuous from the resource version
            // the watch had, so the kind is current again.
            Event::Apply(o) => match convert(kind, o) {
                Ok(obj) => view.update(|v| {
                    v.upsert(obj, now);
                    v.note_watch_recovered(kind);
                }),
                // Keep the last readable version; allows are confirmed until this clears.
                Err(name) => view.update(|v| {
                    v.note_unreadable(kind, &name);
                    v.touch_kind(kind, now);
                    v.note_watch_recovered(kind);
                }),
            },
            Event::Delete(o) => {
                let ns = o.metadata.namespace.clone();
                let name = o.metadata.name.clone().unwrap_or_default();
                view.update(|v| {
                    v.remove(kind, ns.as_deref(), &name);
                    v.touch_kind(kind, now);
                    v.note_watch_recovered(kind);
                });
            }
        }
    }
}

/// The typed object of a watched `DynamicObject`, or its name (after a log line) when it
/// does not fit the model.
fn convert(kind: ObjectKind, o: DynamicObject) -> Result<Object, String> {
    let name = o.metadata.name.clone().unwrap_or_default();
    let value = serde_json::to_value(&o).map_err(|e| {
        tracing::warn!(kind = kind.display(), name, error = %e, "cannot read watched object");
        name.clone()
    })?;
    Object::from_value(kind, value).map_err(|e| {
        tracing::warn!(
            kind = kind.display(),
            name,
            error = %e,
            "watched object does not parse; drain allows are confirmed with the API server until it does"
        );
        name.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ClusterView, Source};
    use serde_json::json;

    fn replica(name: &str, node: &str) -> Object {
        Object::from_value(
            ObjectKind::Replica,
            json!({"metadata": {"name": name, "namespace": "longhorn-system"},
                   "spec": {"nodeID": node, "volumeName": "v"}}),
        )
        .unwrap()
    }

    #[test]
    fn a_relist_replaces_the_kind_and_keeps_indexes_consistent() {
        let now = SystemTime::now();
        let mut v = ClusterView::new(Source::Watch);
        v.replace_kind(ObjectKind::Replica, vec![replica("r1", "n1"), replica("r2", "n2")], now);
        assert_eq!(v.replicas_on_node("n1").count(), 1);
        v.replace_kind(ObjectKind::Replica, vec![replica("r2", "n1"), replica("r3", "n3")], now);
        assert!(v.replica("r1").is_none());
        assert_eq!(
            v.replicas_on_node("n1").map(|r| r.metadata.name.clone().unwrap()).collect::<Vec<_>>(),
            ["r2"]
        );
        assert_eq!(v.replicas_on_node("n2").count(), 0);
        assert_eq!(v.replicas_of_volume("v").count(), 2);
        assert!(!v.freshness().synced);
    }

    #[test]
    fn unreadable_objects_make_the_view_untrusted_until_read_again() {
        let now = SystemTime::now();
        let mut v = ClusterView::new(Source::Watch);
        for kind in ObjectKind::ALL {
            v.replace_kind(kind, Vec::new(), now);
        }
        v.mark_synced(now);
        let bound = std::time::Duration::from_secs(5);
        assert!(v.freshness().is_fresh(now, bound));
        v.note_unreadable(ObjectKind::Replica, "r1");
        assert_eq!(v.freshness().unreadable, ["replicas.longhorn.io/r1"]);
        assert!(!v.freshness().is_fresh(now, bound));
        v.upsert(replica("r1", "n1"), now);
        assert!(v.freshness().is_fresh(now, bound));
        v.note_unreadable(ObjectKind::Replica, "r2");
        v.remove(ObjectKind::Replica, Some("longhorn-system"), "r2");
        assert!(v.freshness().is_fresh(now, bound));
    }

    #[test]
    fn the_view_is_as_old_as_its_least_recently_updated_kind() {
        let t0 = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let mut v = ClusterView::new(Source::Watch);
        for kind in ObjectKind::ALL {
            v.replace_kind(kind, Vec::new(), t0);
        }
        v.mark_synced(t0);
        // Every kind but Replica keeps receiving events; the replica watch is broken.
        let later = t0 + std::time::Duration::from_secs(60);
        for kind in ObjectKind::ALL.into_iter().filter(|k| *k != ObjectKind::Replica) {
            v.touch_kind(kind, later);
        }
        assert_eq!(v.freshness().age(later), Some(std::time::Duration::from_secs(60)));
        assert!(!v.freshness().is_fresh(later, std::time::Duration::from_secs(5)));
        v.replace_kind(ObjectKind::Replica, vec![replica("r1", "n1")], later);
        assert!(v.freshness().is_fresh(later, std::time::Duration::from_secs(5)));
    }

    #[test]
    fn a_failed_watch_makes_the_view_stale_until_its_kind_is_relisted() {
        let now = SystemTime::now();
        let bound = Duration::from_secs(5);
        let mut v = ClusterView::new(Source::Watch);
        for kind in ObjectKind::ALL {
            v.replace_kind(kind, Vec::new(), now);
        }
        v.mark_synced(now);
        assert!(v.freshness().is_fresh(now, bound));
        v.note_watch_failed(ObjectKind::Replica);
        v.note_watch_failed(ObjectKind::Node);
        let f = v.freshness();
        assert_eq!(f.failing, ["nodes", "replicas.longhorn.io"]);
        assert_eq!(f.age(now), Some(Duration::ZERO), "data just arrived, yet:");
        assert!(!f.is_fresh(now, bound));
        // Data through other paths (confirmation reads, snapshots) does not clear it.
        v.upsert(replica("r1", "n1"), now);
        v.touch(now);
        assert!(!v.freshness().is_fresh(now, bound));
        // A completed relist does; so does an event on the resumed watch.
        v.replace_kind(ObjectKind::Replica, vec![replica("r1", "n1")], now);
        assert_eq!(v.freshness().failing, ["nodes"]);
        v.note_watch_recovered(ObjectKind::Node);
        assert!(v.freshness().is_fresh(now, bound));
    }

    #[test]
    fn retries_start_fast_and_stay_within_a_few_seconds() {
        assert_eq!(retry_delay(1), RETRY_MIN);
        assert_eq!(retry_delay(2), RETRY_MIN * 2);
        assert_eq!(retry_delay(4), RETRY_MAX);
        assert_eq!(retry_delay(u32::MAX), RETRY_MAX);
    }

    #[test]
    fn a_410_is_gone_and_anything_else_an_error() {
        let status = |code: u16| -> Box<kube::core::Status> {
            Box::new(
                serde_json::from_value(
                    json!({"code": code, "reason": "Expired", "message": "too old resource version: 7 (9)"}),
                )
                .unwrap(),
            )
        };
        assert_eq!(fault_of(&watcher::Error::WatchError(status(410))), WatchFault::Gone);
        assert_eq!(
            fault_of(&watcher::Error::WatchStartFailed(kube::Error::Api(status(410)))),
            WatchFault::Gone
        );
        assert_eq!(fault_of(&watcher::Error::WatchError(status(500))), WatchFault::Error);
        assert_eq!(
            fault_of(&watcher::Error::InitialListFailed(kube::Error::Api(status(403)))),
            WatchFault::Error
        );
        assert_eq!(fault_of(&watcher::Error::NoResourceVersion), WatchFault::Error);
    }

    #[test]
    fn every_kind_is_watched_once() {
        let kinds: BTreeSet<ObjectKind> = targets().iter().map(|t| t.kind).collect();
        assert_eq!(kinds.len(), targets().len());
        assert_eq!(kinds.len(), ClusterView::new(Source::Watch).counts().len());
    }
}
