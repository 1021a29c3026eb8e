//! One kind's list-then-watch that yields its progress ([`Step::Progress`]: the list's
//! resource version and each BOOKMARK's), which kube's watcher keeps to itself; the view
//! compares them with the probes' reads ([`crate::cluster::proof`]). Errors are kube's
//! [`watcher::Error`]s, read by the caller as it reads the kube watcher's.
//!
//! A list is one plain LIST read object by object as it arrives ([`super::plain_list`]), or
//! a streaming list (a watch with `sendInitialEvents=true`, Kubernetes 1.27+ with the
//! `WatchList` feature, on by default since 1.32: every object arrives as one event from the
//! watch cache, and a BOOKMARK marked `k8s.io/initial-events-end` carries the version of the
//! whole set), or pages. Each way falls back to the next for good ([`Lists`]): a plain LIST
//! that broke off after it began answering (an API server's request time-out, a minute by
//! default, cuts a LIST that long), a streaming list the API server refused. docs/scale.md
//! has the figures: a plain LIST costs the API server the least CPU; a paged list's later
//! pages may be read from etcd, at several times the CPU of the same objects from its cache.

use std::collections::VecDeque;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{stream, StreamExt as _};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};
use kube::Resource;
use serde::de::DeserializeOwned;

pub use super::lists::{ListWay, Lists};
use super::plain_list;

/// What one kind's list-then-watch yields.
#[derive(Debug)]
pub enum Step<K> {
    Event(Event<K>),
    /// Every change of the kind up to this resource version has been delivered: the list just
    /// completed was read at it, or a watch BOOKMARK carried it.
    Progress(String),
    /// A watch the API server ended could not be started again ([`Params::resume_once`]); it
    /// is retried from the same resource version after [`RESUME_RETRY`], so no event is lost,
    /// but until a BOOKMARK of the resumed watch arrives (after what it replays) the kind is
    /// not known to be current.
    Interrupted(kube::Error),
}

/// How a kind is listed and watched.
#[derive(Clone, Debug)]
pub struct Params {
    /// How lists are read.
    pub lists: Lists,
    /// Objects per page of a list.
    pub page_size: u32,
    /// The watch's `timeoutSeconds`: the API server ends the watch then and it is resumed. The
    /// API server sends a watch its BOOKMARK 2 s before this deadline (else once a minute).
    pub timeout_secs: u32,
    /// A watch the API server ended that cannot be started again once is reported as
    /// [`Step::Interrupted`] and retried: one refused start of a short watch should not cost a
    /// relist of the kind.
    pub resume_once: bool,
}

/// How long an interrupted resumption waits before the watch is started again.
pub const RESUME_RETRY: Duration = Duration::from_millis(500);

/// A watch that ends sooner than this without a line (something on the way that does not
/// stream) is started again only this long after it opened, not in a tight loop.
const SHORTEST_WATCH: Duration = Duration::from_secs(1);

/// No line for this long past the watch's own deadline: the connection is taken as dead and
/// the watch resumed.
const IDLE_MARGIN: Duration = Duration::from_secs(5);

/// A streaming list's `timeoutSeconds`: the whole set must arrive within it (else the kind is
/// listed in pages from then on); the watch it opened is closed at its end marker, and the
/// kind watched as after a paged list.
const STREAM_TIMEOUT_SECS: u32 = 120;

/// A plain list with no object yet after this long is given up for streaming lists: served
/// from the watch cache its first objects come within seconds.
const FIRST_OBJECT: Duration = Duration::from_secs(30);

/// The annotation of the BOOKMARK that ends a streaming list's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

enum Phase<K> {
    Empty,
    /// A streaming list announced ([`Event::Init`], so its time is taken before its request
    /// is sent), not yet asked for.
    StartStreaming,
    /// A plain list announced ([`Event::Init`]), not yet asked for.
    StartPlain,
    /// A plain list in progress ([`super::plain_list`]); `began`: an object arrived.
    Plain {
        items: tokio::sync::mpsc::Receiver<kube::Result<plain_list::Item>>,
        began: bool,
    },
    /// A streaming list in progress: its initial events until the end marker.
    Streaming {
        events: BoxStream<'static, kube::Result<WatchEvent<K>>>,
    },
    Paging {
        cont: Option<String>,
        items: VecDeque<K>,
        rv: Option<String>,
    },
    /// Listed (or the watch ended) at `rv`; `announce` the list's version first.
    Listed {
        rv: String,
        announce: bool,
        resume: Resume,
    },
    Watching {
        rv: String,
        events: BoxStream<'static, kube::Result<WatchEvent<K>>>,
        /// When the watch opened, until it sends its first line.
        silent_since: Option<tokio::time::Instant>,
    },
}

/// How a watch is (re)started from [`Phase::Listed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resume {
    /// After a list, or after a start that failed as an error.
    Start,
    /// After the API server ended the watch: one failed start is [`Step::Interrupted`].
    Resuming,
    /// As [`Resume::Resuming`], from then: the watch ended at once without a line.
    Paced(tokio::time::Instant),
    /// Once interrupted: wait until then; another failed start is an error.
    RetryAt(tokio::time::Instant),
}

type Out<K> = Result<Step<K>, watcher::Error>;

/// The steps of `api`'s list-then-watch, forever, each object converted into a `T`.
pub fn list_then_watch<K, T>(api: Api<K>, params: Params) -> BoxStream<'static, Out<T>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    T: From<K> + Send + 'static,
{
    stream::unfold((api, Phase::Empty), move |(api, phase)| {
        let params = params.clone();
        async move {
            let mut phase = phase;
            loop {
                let (out, next) = step(&api, &params, phase).await;
                phase = next;
                if let Some(out) = out {
                    return Some((out, (api, phase)));
                }
            }
        }
    })
    .boxed()
}

async fn step<K, T>(api: &Api<K>, params: &Params, phase: Phase<K>) -> (Option<Out<T>>, Phase<K>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    T: From<K>,
{
    let paging = || Phase::Paging { cont: None, items: VecDeque::new(), rv: None };
    match phase {
        // The list's time is its start: `Init` is yielded, and its time taken, before the
        // request is sent (the list is consistent as of that request's arrival, not of its
        // answer).
        Phase::Empty => {
            let next = match params.lists.way() {
                ListWay::Plain => Phase::StartPlain,
                ListWay::Streaming => Phase::StartStreaming,
                ListWay::Paged => paging(),
            };
            (Some(Ok(Step::Event(Event::Init))), next)
        }
        Phase::StartPlain => (None, Phase::Plain { items: plain_list::start(api), began: false }),
        Phase::Plain { mut items, began } => {
            let idle = Duration::from_secs(STREAM_TIMEOUT_SECS.into()) + IDLE_MARGIN;
            // Cut off after it began answering, silent too long, or timed out (504, once the
            // client's own retries gave up): perhaps the API server's request time-out, which
            // a streaming list does not have. Lists are streamed from then on.
            let failed = |e: kube::Error, cut: bool| {
                if cut || matches!(&e, kube::Error::Api(s) if s.code == 504 || s.reason == "Timeout") {
                    params.lists.fall_back(ListWay::Plain, &e);
                }
                (Some(Err(watcher::Error::InitialListFailed(e))), Phase::Empty)
            };
            match tokio::time::timeout(if began { idle } else { FIRST_OBJECT }, items.recv()).await {
                Ok(Some(Ok(plain_list::Item::Object(json)))) => match serde_json::from_str::<K>(json.get()) {
                    Ok(o) => (
                        Some(Ok(Step::Event(Event::InitApply(o.into())))),
                        Phase::Plain { items, began: true },
                    ),
                    Err(e) => (
                        Some(Err(watcher::Error::InitialListFailed(kube::Error::SerdeError(e)))),
                        Phase::Empty,
                    ),
                },
                Ok(Some(Ok(plain_list::Item::End(Some(rv))))) => (
                    Some(Ok(Step::Event(Event::InitDone))),
                    Phase::Listed { rv, announce: true, resume: Resume::Start },
                ),
                Ok(Some(Ok(plain_list::Item::End(None)))) => {
                    (Some(Err(watcher::Error::NoResourceVersion)), Phase::Empty)
                }
                Ok(Some(Err(e))) => failed(e, began),
                Ok(None) => {
                    failed(kube::Error::Service("the list's reader ended without its end".into()), began)
                }
                // A 504 of the request time-out is retried by the client: it shows as silence.
                Err(_) => failed(kube::Error::Service("the list sent no object in time".into()), true),
            }
        }
        Phase::StartStreaming => {
            let wp = WatchParams { timeout: Some(STREAM_TIMEOUT_SECS), ..WatchParams::streaming_lists() };
            match api.watch(&wp, "").await {
                Ok(events) => (None, Phase::Streaming { events: events.boxed() }),
                // An API server without streaming lists refuses the parameters as invalid:
                // the same list goes on in pages (its time still the refused request's).
                Err(kube::Error::Api(status)) if matches!(status.code, 400 | 422) => {
                    params.lists.fall_back(ListWay::Streaming, &status.message);
                    (None, paging())
                }
                Err(e) => (Some(Err(watcher::Error::InitialListFailed(e))), Phase::Empty),
            }
        }
        Phase::Streaming { mut events } => {
            let idle = Duration::from_secs(STREAM_TIMEOUT_SECS.into()) + IDLE_MARGIN;
            let next = tokio::time::timeout(idle, events.next()).await.unwrap_or(None);
            match next {
                Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                    (Some(Ok(Step::Event(Event::InitApply(o.into())))), Phase::Streaming { events })
                }
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    let rv = b.metadata.resource_version;
                    if !b.metadata.annotations.contains_key(INITIAL_EVENTS_END) {
                        return (None, Phase::Streaming { events });
                    }
                    if rv.is_empty() {
                        return (Some(Err(watcher::Error::NoResourceVersion)), Phase::Empty);
                    }
                    // The set is complete: watch from its version as after a paged list.
                    (
                        Some(Ok(Step::Event(Event::InitDone))),
                        Phase::Listed { rv, announce: true, resume: Resume::Start },
                    )
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    (Some(Err(watcher::Error::WatchError(status))), Phase::Empty)
                }
                Some(Err(e)) => (Some(Err(watcher::Error::WatchFailed(e))), Phase::Empty),
                // Ended (or a deletion) before its end marker: not a streaming list as asked
                // for. The kind is listed again, in pages.
                Some(Ok(WatchEvent::Deleted(_))) | None => {
                    params.lists.fall_back(ListWay::Streaming, &"the watch did not end its initial events");
                    (Some(Ok(Step::Event(Event::Init))), paging())
                }
            }
        }
        Phase::Paging { cont, mut items, rv } => {
            if let Some(item) = items.pop_front() {
                let next = Phase::Paging { cont, items, rv };
                return (Some(Ok(Step::Event(Event::InitApply(item.into())))), next);
            }
            if let (None, Some(rv)) = (&cont, &rv) {
                let rv = rv.clone();
                let next = Phase::Listed { rv, announce: true, resume: Resume::Start };
                return (Some(Ok(Step::Event(Event::InitDone))), next);
            }
            let mut lp = ListParams::default().limit(params.page_size);
            lp.continue_token = cont;
            match api.list(&lp).await {
                Ok(list) => {
                    let rv = list.metadata.resource_version.filter(|s| !s.is_empty());
                    let cont = list.metadata.continue_.filter(|s| !s.is_empty());
                    if rv.is_none() && cont.is_none() {
                        return (Some(Err(watcher::Error::NoResourceVersion)), Phase::Empty);
                    }
                    (None, Phase::Paging { cont, items: list.items.into(), rv })
                }
                Err(e) => (Some(Err(watcher::Error::InitialListFailed(e))), Phase::Empty),
            }
        }
        Phase::Listed { rv, announce: true, resume } => {
            (Some(Ok(Step::Progress(rv.clone()))), Phase::Listed { rv, announce: false, resume })
        }
        Phase::Listed { rv, announce: false, resume } => {
            let resume = match resume {
                Resume::RetryAt(at) => {
                    tokio::time::sleep_until(at).await;
                    resume
                }
                Resume::Paced(at) => {
                    tokio::time::sleep_until(at).await;
                    Resume::Resuming
                }
                _ => resume,
            };
            let wp =
                WatchParams { timeout: Some(params.timeout_secs), bookmarks: true, ..Default::default() };
            match api.watch(&wp, &rv).await {
                Ok(events) => {
                    let silent_since = Some(tokio::time::Instant::now());
                    (None, Phase::Watching { rv, events: events.boxed(), silent_since })
                }
                Err(e) if resume == Resume::Resuming && params.resume_once && !is_gone(&e) => {
                    let resume = Resume::RetryAt(tokio::time::Instant::now() + RESUME_RETRY);
                    (Some(Ok(Step::Interrupted(e))), Phase::Listed { rv, announce: false, resume })
                }
                Err(e) => {
                    // A 410: the version is gone for good, only a list helps.
                    let next = if is_gone(&e) {
                        Phase::Empty
                    } else {
                        Phase::Listed { rv, announce: false, resume: Resume::Start }
                    };
                    (Some(Err(watcher::Error::WatchStartFailed(e))), next)
                }
            }
        }
        Phase::Watching { rv, mut events, silent_since } => {
            let idle = Duration::from_secs(params.timeout_secs.into()) + IDLE_MARGIN;
            let next = tokio::time::timeout(idle, events.next()).await.unwrap_or_else(|_| {
                tracing::debug!("watch idle past its deadline; resuming it");
                None
            });
            match next {
                Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => applied(o, events, Event::Apply),
                Some(Ok(WatchEvent::Deleted(o))) => applied(o, events, Event::Delete),
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    // The API server sends none at or below the watch's start; should one
                    // come, the watch still resumes from the newest version it saw.
                    let rv = newest(rv, b.metadata.resource_version);
                    (Some(Ok(Step::Progress(rv.clone()))), Phase::Watching { rv, events, silent_since: None })
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    let next = if status.code == 410 {
                        Phase::Empty
                    } else {
                        Phase::Watching { rv, events, silent_since: None }
                    };
                    (Some(Err(watcher::Error::WatchError(status))), next)
                }
                Some(Err(e)) => (
                    Some(Err(watcher::Error::WatchFailed(e))),
                    Phase::Watching { rv, events, silent_since: None },
                ),
                None => {
                    let resume = match silent_since {
                        Some(t) if t.elapsed() < SHORTEST_WATCH => Resume::Paced(t + SHORTEST_WATCH),
                        _ => Resume::Resuming,
                    };
                    (None, Phase::Listed { rv, announce: false, resume })
                }
            }
        }
    }
}

/// An added, changed or deleted object, which moves the watch on to its resource version.
fn applied<K: Resource, T: From<K>>(
    o: K,
    events: BoxStream<'static, kube::Result<WatchEvent<K>>>,
    event: fn(T) -> Event<T>,
) -> (Option<Out<T>>, Phase<K>) {
    match o.meta().resource_version.clone().filter(|rv| !rv.is_empty()) {
        Some(rv) => {
            (Some(Ok(Step::Event(event(o.into())))), Phase::Watching { rv, events, silent_since: None })
        }
        None => (Some(Err(watcher::Error::NoResourceVersion)), Phase::Empty),
    }
}

/// A `410 Gone`: the resource version is too old to watch from; only a list helps.
fn is_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 410)
}

/// The newer of two resource versions where both are numbers ([`crate::cluster::proof::parse_version`]);
/// a number over anything else (an empty version would resume "from now", losing deletes);
/// else the later one.
fn newest(had: String, came: String) -> String {
    use crate::cluster::store::proof::parse_version;
    match (parse_version(&had), parse_version(&came)) {
        (Some(a), Some(b)) if a > b => had,
        (Some(_), None) => had,
        _ => came,
    }
}

#[cfg(test)]
mod tests {
    use super::newest;

    #[test]
    fn a_watch_resumes_from_the_newest_version_it_saw_and_never_from_an_unreadable_one() {
        let n = |a: &str, b: &str| newest(a.to_string(), b.to_string());
        assert_eq!(n("10", "12"), "12");
        assert_eq!(n("12", "10"), "12", "an older BOOKMARK does not move the watch back");
        assert_eq!(n("12", ""), "12", "an empty version would resume from now, losing deletes");
        assert_eq!(n("12", "x"), "12");
        assert_eq!(n("", "12"), "12");
        assert_eq!(n("a", "b"), "b", "neither a number: the later one, as the API server sent it");
    }
}
