//! Filling the cluster view from live watches, one per kind, each object parsed once into its
//! lean type ([`Watched`]); a (re)list is applied in one step when it completes ([`Relist`]).
//!
//! A watch error makes its kind, and so the view, stale until a completed list: the watcher
//! retries with backoff ([`RETRY_MIN`] to [`RETRY_MAX`]), and its first event after an error,
//! a `410 Gone`, or [`RECHECK_AFTER`] of quiet starts a list.

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use futures::{stream, StreamExt as _};
use kube::api::ApiResource;
use kube::core::GroupVersionKind;
use kube::runtime::watcher::Event;

mod kind;
mod lists;
pub mod listwatch;
mod plain_list;
mod retry;
pub mod supervise;

use kind::stream_for;
pub use kind::{loses_events, Tuning};
pub use listwatch::ListWay;
use listwatch::Step;
pub use retry::fault_of;

use super::relist::Relist;
use super::stats::{self, WatchFault};
pub use super::watched::{Item, Watched};
use super::{Object, ObjectKind, SharedView};

/// First wait before a failed watch is retried.
pub const RETRY_MIN: Duration = Duration::from_millis(500);
/// Longest wait between attempts: while a watch is down every drain allow costs a
/// confirmation, and the view must be current within `drain.maxViewAge` + 2 s of the API
/// server coming back (docs/drain.md, "Through etcd faults").
pub const RETRY_MAX: Duration = Duration::from_secs(2);
/// How long a kind may stay failing after its last error with no event before it is listed
/// again; longer than [`RETRY_MAX`], so that while the API server is down the watcher keeps
/// resuming (and meets the `410 Gone` the API server may answer once it is back).
pub const RECHECK_AFTER: Duration = Duration::from_secs(6);
/// Each watch's `timeoutSeconds` while probes run ([`crate::cluster::probe`]): the shortest
/// that brings a BOOKMARK (sent 2 s before the deadline).
pub const PROVING_WATCH_TIMEOUT_SECS: u32 = 3;
/// Each watch's `timeoutSeconds` without probes: a BOOKMARK then serves nothing but resuming.
pub const WATCH_TIMEOUT_SECS: u32 = 290;

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

/// The watches' pacing, as `serve` runs them and [`run`] (`check drain --wait`) too: short
/// watches (a BOOKMARK every few seconds) when probes run, else [`WATCH_TIMEOUT_SECS`]; lists
/// read as `serve --lists` reads them by default.
pub fn tuning(probing: bool) -> Tuning {
    let watch_timeout_secs = if probing { PROVING_WATCH_TIMEOUT_SECS } else { WATCH_TIMEOUT_SECS };
    // Short watches are started again every few seconds: one refused start is an interruption
    // that the resumed watch's next BOOKMARK ends, not a failure that costs a relist.
    Tuning {
        recheck_after: RECHECK_AFTER,
        watch_timeout_secs,
        resume_once: probing,
        lists: ListWay::default(),
    }
}

/// Runs every watch until the task is dropped, applying events to `view`.
pub async fn run(client: kube::Client, view: SharedView) {
    run_with(client, view, tuning(false)).await
}

/// [`run_with`], started again whenever it ends or panics ([`supervise`]): what `serve` runs.
pub async fn run_supervised(client: kube::Client, view: SharedView, tuning: Tuning) {
    let watched = view.clone();
    supervise::supervised(
        view,
        move || run_with(client.clone(), watched.clone(), tuning),
        Duration::from_secs(1),
    )
    .await
}

/// [`run`] with other pacing (tests: a shorter bound for a quiet resumed watch).
pub async fn run_with(client: kube::Client, view: SharedView, tuning: Tuning) {
    let all = targets();
    let total = all.len();
    let watching_since = Instant::now();
    // One API client: once a way of listing failed as only it can, every kind lists the next way.
    let lists = listwatch::Lists::new(tuning.lists);
    let mut merged = stream::select_all(all.iter().map(|t| stream_for(&client, t, tuning, &lists)));
    // Each kind's list in progress: the listed keys and changed objects, the names it could
    // not read, and when it started (the time of its data, however long the pages take).
    type Listing = (Relist, Vec<String>, Option<(SystemTime, Instant)>);
    let mut pending: std::collections::HashMap<ObjectKind, Listing> = Default::default();
    let mut listed: BTreeSet<ObjectKind> = BTreeSet::new();
    while let Some((kind, event)) = merged.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                let fault = fault_of(&e);
                stats::global().watch_error(kind, fault);
                view.update(|v| v.note_watch_failed(kind));
                let what = match fault {
                    WatchFault::Gone => "watch expired (410 Gone): listing the kind again; the view is stale until then",
                    WatchFault::Error if loses_events(&e) => "watch skipped an event it could not read: listing the kind again; the view is stale until then",
                    WatchFault::Error => "watch failed; retrying, the view is stale until the kind is current again",
                };
                tracing::warn!(kind = kind.display(), error = %e, "{what}");
                continue;
            }
        };
        let now = SystemTime::now();
        let event = match event {
            Step::Event(e) => e,
            Step::Progress(rv) => {
                count_proof(kind, view.update(|v| v.note_progress(kind, &rv)));
                continue;
            }
            Step::Interrupted(e) => {
                stats::global().watch_error(kind, WatchFault::Error);
                view.update(|v| v.note_watch_interrupted(kind));
                tracing::info!(
                    kind = kind.display(),
                    error = %e,
                    "watch could not be resumed; retrying from the same resource version (nothing is missed), the view is stale until its next BOOKMARK"
                );
                continue;
            }
        };
        match event {
            Event::Init => {
                pending.insert(kind, (Relist::default(), Vec::new(), Some((now, Instant::now()))));
                view.update(|v| v.note_list_started(kind));
            }
            Event::InitApply(item) => {
                let (relist, unreadable, _) = pending.entry(kind).or_default();
                match readable(kind, item) {
                    Ok(obj) => relist.push(&view.read(), obj),
                    Err(name) => unreadable.push(name),
                }
            }
            Event::InitDone => {
                let (relist, unreadable, started) = pending.remove(&kind).unwrap_or_default();
                let (started, started_mono) = started.unwrap_or((now, Instant::now()));
                let (n, changed) = (relist.keep.len(), relist.changed.len());
                // From the list's request to its last object, as this guard waited for it.
                let list_ms = started_mono.elapsed().as_millis() as u64;
                let first = listed.insert(kind);
                let all_listed = listed.len() == total;
                let (still_failing, oldest) = view.update(|v| {
                    v.apply_relist(kind, relist, started, started_mono);
                    for name in &unreadable {
                        v.note_unreadable(kind, name);
                    }
                    if first && all_listed {
                        v.mark_synced();
                    }
                    (v.freshness().failing.len(), v.oldest_kind())
                });
                // Applying it to the view (its objects, indexes and derived states).
                let apply_ms = (started_mono.elapsed().as_millis() as u64).saturating_sub(list_ms);
                if first {
                    tracing::info!(kind = kind.display(), objects = n, changed, list_ms, apply_ms, "listed");
                } else {
                    tracing::info!(
                        kind = kind.display(),
                        objects = n,
                        changed,
                        failing = still_failing,
                        list_ms,
                        apply_ms,
                        "relisted"
                    );
                }
                if first && all_listed {
                    let sync_ms = watching_since.elapsed().as_millis() as u64;
                    // The oldest kind is what the view's first proof waits for (docs/scale.md).
                    let (oldest_kind, oldest_ms) =
                        oldest.map_or(("", 0), |(k, age)| (k.display(), age.as_millis() as u64));
                    tracing::info!(
                        sync_ms,
                        oldest_kind,
                        oldest_ms,
                        "cluster view synced: every watched kind is listed"
                    );
                }
                // The list's pages are gone: give their memory back (the first sync of each
                // kind is one burst, so once when all are in).
                if !first || all_listed {
                    crate::heap::release_soon();
                }
            }
            // A kind whose watch failed stays failing through the events of its resumed watch
            // (the replay of what it missed has no end marker) until its list completes; one
            // only interrupted, until the resumed watch's first BOOKMARK (its end marker).
            Event::Apply(item) => {
                let rv = item.resource_version.clone().unwrap_or_default();
                let proven = match readable(kind, item) {
                    Ok(obj) => view.update(|v| {
                        v.upsert(obj, now);
                        v.note_delivered(kind, &rv)
                    }),
                    // Keep the last readable version; allows are confirmed until this clears.
                    Err(name) => view.update(|v| {
                        v.note_unreadable(kind, &name);
                        v.touch_kind(kind, now);
                        v.note_delivered(kind, &rv)
                    }),
                };
                count_proof(kind, proven);
            }
            Event::Delete(item) => {
                let proven = view.update(|v| {
                    v.remove(kind, item.namespace.as_deref(), &item.name);
                    v.touch_kind(kind, now);
                    v.note_delivered(kind, item.resource_version.as_deref().unwrap_or_default())
                });
                count_proof(kind, proven);
            }
        }
    }
}

/// Counts a probe of `kind` that the watch just proved (`longhorn_guard_freshness_proofs_total`).
fn count_proof(kind: ObjectKind, proven: bool) {
    if proven {
        stats::global().proof(kind);
    }
}

/// The lean object of a watched item, or its name (after a log line) when it does not fit
/// the model.
fn readable(kind: ObjectKind, item: Item) -> Result<Object, String> {
    item.object.map_err(|error| {
        tracing::warn!(
            kind = kind.display(),
            name = item.name,
            error,
            "watched object does not parse; drain allows are confirmed with the API server until it does"
        );
        item.name
    })
}

#[cfg(test)]
pub(crate) mod tests;
