//! One kind's watcher as a stream of events, and when it is started over: after a `410 Gone`,
//! a lost event, the first event of a watch resumed after an error (its replay has no end
//! marker), or a quiet spell of [`RECHECK_AFTER`](super::RECHECK_AFTER) after an error.

use std::time::Duration;

use futures::stream::BoxStream;
use futures::{stream, StreamExt as _};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt as _;

use super::listwatch::{list_then_watch, ListWay, Lists, Params, Step};
use super::retry::{fault_of, Retry};
use super::Target;
use crate::cluster::model::{on_kind, Kind, ObjectKind};
use crate::cluster::sync::stats::WatchFault;
use crate::cluster::sync::watched::{Item, Watched};

pub(super) type KindEvents = BoxStream<'static, (ObjectKind, Result<Step<Item>, watcher::Error>)>;

/// True for an error inside a running watch stream that the stream may continue past: a line
/// it could not decode (an event it skipped), or an `ERROR` event (in place of one it could
/// not send). A broken connection (`ReadEvents`) is not one: the watcher resumes from the last
/// event it delivered. (A `410 Gone` is handled before this: the kind is listed again.)
pub fn loses_events(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::WatchFailed(err) => !matches!(err, kube::Error::ReadEvents(_)),
        watcher::Error::WatchError(status) => status.code != 410,
        _ => false,
    }
}

/// The events of one kind's watcher, each object parsed once into `T`. After an error, the
/// resumed watch's first event or `recheck_after` of quiet starts the watcher over (a list), as
/// a `410 Gone` or a lost event does at once; repeated restarts are paced `recheck_after` apart.
fn kind_events<T: Kind>(api: Api<Watched<T>>, kind: ObjectKind, tuning: Tuning, lists: Lists) -> KindEvents {
    let Tuning { recheck_after, watch_timeout_secs, resume_once, .. } = tuning;
    struct State<T: Kind> {
        api: Api<Watched<T>>,
        inner: Option<BoxStream<'static, Result<Step<Item>, watcher::Error>>>,
        /// When the last error of a failing spell arrived.
        failed_at: Option<tokio::time::Instant>,
        /// When the watcher was last started over (a `410 Gone`, a lost event, a resumed watch).
        gone_at: Option<tokio::time::Instant>,
        /// A restart that repeats within `recheck_after` waits until then.
        restart_at: Option<tokio::time::Instant>,
    }
    impl<T: Kind> State<T> {
        /// Schedules the next start of the watcher (after `inner` was dropped): at once, or
        /// `recheck_after` after the last restart when restarts repeat.
        fn restart_paced(&mut self, now: tokio::time::Instant, recheck_after: Duration) {
            let recent = self.gone_at.is_some_and(|t| now.duration_since(t) < recheck_after);
            self.restart_at = self.gone_at.filter(|_| recent).map(|t| t + recheck_after);
            self.gone_at = Some(now);
        }
    }
    let start = State { api, inner: None, failed_at: None, gone_at: None, restart_at: None };
    stream::unfold(start, move |mut st| {
        let lists = lists.clone();
        async move {
            loop {
                if st.inner.is_none() {
                    if let Some(at) = st.restart_at.take() {
                        tokio::time::sleep_until(at).await;
                        // Pace the next restart from this one, not from the error before it.
                        st.gone_at = Some(tokio::time::Instant::now());
                    }
                }
                let (api, lists) = (st.api.clone(), lists.clone());
                let inner = st.inner.get_or_insert_with(|| {
                    let page_size = kind.page_size();
                    let params = Params { lists, page_size, timeout_secs: watch_timeout_secs, resume_once };
                    list_then_watch(api, params).backoff(Retry::default()).boxed()
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
                        // A BOOKMARK counts as an answer; an interruption does not.
                        let resumed = !matches!(event, Step::Interrupted(_))
                            && st.failed_at.take().is_some()
                            && matches!(
                                event,
                                Step::Event(Event::Apply(_) | Event::Delete(_)) | Step::Progress(_)
                            );
                        if resumed {
                            // Its replay has no end marker: only a list makes the kind current.
                            tracing::info!(
                                kind = kind.display(),
                                "watch resumed after its error; listing the kind again"
                            );
                            st.inner = None;
                            st.restart_paced(tokio::time::Instant::now(), recheck_after);
                        }
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
                        } else if loses_events(&e) {
                            // The stream goes on past an event it could not read: the kind's state is
                            // unknown until it is listed again, so the watcher starts over.
                            st.inner = None;
                            st.restart_paced(now, recheck_after);
                        }
                        return Some(((kind, Err(e)), st));
                    }
                    // A watcher stream does not end; if it did, start it over.
                    None => st.inner = None,
                }
            }
        }
    })
    .boxed()
}

/// How the watches are paced.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// How long a resumed watch may stay quiet after an error before its kind is listed again.
    pub recheck_after: Duration,
    /// Each watch's `timeoutSeconds` ([`Params::timeout_secs`]).
    pub watch_timeout_secs: u32,
    /// One failed resumption of a watch is an interruption, not a failure ([`Params::resume_once`]).
    pub resume_once: bool,
    /// How lists are read first ([`Lists`]).
    pub lists: ListWay,
}

/// One kind's events, parsed into its lean type; its lists read as `lists` says.
pub(super) fn stream_for(client: &kube::Client, t: &Target, tuning: Tuning, lists: &Lists) -> KindEvents {
    fn api<T: Kind>(client: &kube::Client, t: &Target) -> Api<Watched<T>> {
        match t.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &t.resource),
            None => Api::all_with(client.clone(), &t.resource),
        }
    }
    let (k, r) = (t.kind, tuning);
    on_kind!(t.kind, K => kind_events(api::<K>(client, t), k, r, lists.clone()))
}
