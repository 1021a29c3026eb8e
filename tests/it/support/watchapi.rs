//! A stand-in Kubernetes API server with watches, over real TLS on 127.0.0.1:0, that can be
//! stopped and started again like a crashing kube-apiserver: LISTs (label and name selectors,
//! as [`super::apiserver`] answers them) carry the current resource version; WATCH streams
//! carry MODIFIED events of [`WatchApi::modify`] and BOOKMARKs of [`WatchApi::bookmark`], end
//! after their `timeoutSeconds`, replay what a watch from an older resource version missed,
//! can be stalled ([`WatchApi::hold`]) or refused ([`WatchApi::refuse_watches`]); a watch from a resource version older than
//! the last [`WatchApi::start_again`] with `expire` gets the `410 Gone` ERROR event a real API
//! server sends after etcd compaction. A streaming list (`sendInitialEvents=true`) is refused
//! with the `422` of an API server without the `WatchList` feature, unless
//! [`WatchApi::stream_lists`] turned them on: then its initial events, its end marker, and what
//! comes.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use futures::StreamExt as _;
use http_body_util::{combinators::BoxBody, BodyExt as _, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::sync::{broadcast, watch};

use super::apiserver::{collection, list};

type Body = BoxBody<Bytes, Infallible>;

struct Shared {
    items: Mutex<Vec<Value>>,
    /// The resource version of the last change.
    rv: AtomicU64,
    /// Watches from a resource version below this are answered `410 Gone`.
    expired_below: AtomicU64,
    /// Serving (true) or stopped (false).
    up: watch::Sender<bool>,
    /// Every change as a watch event line (`{"type": "MODIFIED", "object": ...}`).
    events: broadcast::Sender<Value>,
    /// Every request as `path?query`, in arrival order.
    requests: Mutex<Vec<String>>,
    /// How long each LIST or streaming list waits before it is answered (a slow API server).
    list_delay: Mutex<std::time::Duration>,
    /// Watches whose path contains one of these deliver nothing more (a stalled stream).
    held: Mutex<Vec<String>>,
    /// Every change event with its resource version, for watches that resume from an older one.
    history: Mutex<Vec<(u64, Value)>>,
    /// Watch requests whose path contains the first element are refused with a 500 while the
    /// count lasts.
    refused: Mutex<(String, usize)>,
    /// LISTs are answered 500 "etcdserver: request timed out" (an etcd member cut off).
    lists_fail: AtomicBool,
    /// LISTs without `limit` are cut off halfway through their body.
    plain_lists_cut: AtomicBool,
    /// Streaming lists are served (else refused with a 422).
    streams_lists: AtomicBool,
    /// TLS connections accepted, and requests that asked to close theirs (`Connection: close`).
    connections: AtomicUsize,
    closing: AtomicUsize,
}

/// A running stand-in; the task ends when it is dropped.
pub struct WatchApi {
    pub addr: std::net::SocketAddr,
    /// Holds the CA and serving pair.
    pub certs: tempfile::TempDir,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WatchApi {
    fn drop(&mut self) {
        self.shared.up.send_replace(false);
        self.task.abort();
    }
}

impl WatchApi {
    /// Serves `items` (objects with apiVersion, kind and metadata) at resource version 1.
    pub async fn start(items: Vec<Value>) -> Self {
        Self::serve(items, super::tls_listener().await).await
    }

    /// [`WatchApi::start`] with `other`'s certificates (a second API server of one cluster).
    pub async fn start_beside(items: Vec<Value>, other: &WatchApi) -> Self {
        let certs = tempfile::tempdir().unwrap();
        for f in ["ca.crt", "tls.crt", "tls.key"] {
            std::fs::copy(other.certs.path().join(f), certs.path().join(f)).unwrap();
        }
        Self::serve(items, super::tls_listener_in(certs).await).await
    }

    async fn serve(
        items: Vec<Value>,
        (certs, acceptor, listener): (tempfile::TempDir, tokio_rustls::TlsAcceptor, tokio::net::TcpListener),
    ) -> Self {
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            items: Mutex::new(items),
            rv: AtomicU64::new(1),
            expired_below: AtomicU64::new(0),
            up: watch::Sender::new(true),
            events: broadcast::Sender::new(1024),
            requests: Mutex::new(Vec::new()),
            list_delay: Mutex::new(std::time::Duration::ZERO),
            held: Mutex::new(Vec::new()),
            history: Mutex::new(Vec::new()),
            refused: Mutex::new((String::new(), 0)),
            lists_fail: AtomicBool::new(false),
            plain_lists_cut: AtomicBool::new(false),
            streams_lists: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            closing: AtomicUsize::new(0),
        });
        let task = {
            let shared = shared.clone();
            tokio::spawn(async move {
                while let Ok((tcp, _)) = listener.accept().await {
                    // Stopped: the connection is closed at once, as a refused one would fail.
                    if !*shared.up.borrow() {
                        drop(tcp);
                        continue;
                    }
                    let (acceptor, shared) = (acceptor.clone(), shared.clone());
                    tokio::spawn(async move {
                        let mut down = shared.up.subscribe();
                        let Ok(tls) = acceptor.accept(tcp).await else { return };
                        shared.connections.fetch_add(1, Ordering::SeqCst);
                        let svc = {
                            let shared = shared.clone();
                            hyper::service::service_fn(move |req| answer(shared.clone(), req))
                        };
                        let conn = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tls), svc);
                        // A stop drops every open connection, watches included.
                        tokio::select! {
                            _ = conn => {}
                            _ = down.wait_for(|up| !*up) => {}
                        }
                    });
                }
            })
        };
        Self { addr, certs, shared, task }
    }

    /// Serves streaming lists (`sendInitialEvents=true`) from now on, as kube-apiserver 1.32+
    /// does, or refuses them as an older one does.
    pub fn stream_lists(&self, on: bool) {
        self.shared.streams_lists.store(on, Ordering::SeqCst);
    }

    /// A counting client (as `serve` builds it) trusting only this server's CA.
    pub fn client(&self) -> kube::Client {
        longhorn_guard::cluster::client::build(self.config_at(self.addr)).unwrap()
    }

    /// A client configuration for `addr` (this server, or a proxy in front of it) trusting only
    /// this server's CA.
    pub fn config_at(&self, addr: std::net::SocketAddr) -> kube::Config {
        let mut config = kube::Config::new(format!("https://127.0.0.1:{}", addr.port()).parse().unwrap());
        config.root_cert = Some(vec![super::pem_cert(&self.certs.path().join("ca.crt")).to_vec()]);
        config
    }

    /// From now on (`true`) every LIST is answered `500` "etcdserver: request timed out", as
    /// an API server on an etcd member cut off from its peers answers consistent reads.
    pub fn fail_lists(&self, fail: bool) {
        self.shared.lists_fail.store(fail, Ordering::SeqCst);
    }

    /// From now on (`true`) every LIST without `limit` is cut off halfway through its body, as
    /// an API server's request time-out (a minute by default) ends a LIST it could not finish.
    pub fn cut_plain_lists(&self, on: bool) {
        self.shared.plain_lists_cut.store(on, Ordering::SeqCst);
    }

    /// TLS connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Requests so far that asked to close their connection (`Connection: close`).
    pub fn closing_requests(&self) -> usize {
        self.shared.closing.load(Ordering::SeqCst)
    }

    /// Every request so far as `path?query` (`METHOD path?query` for any but a GET).
    pub fn requests(&self) -> Vec<String> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Stops serving: open connections are dropped, new ones closed at once.
    /// Answers every LIST and streaming list from now on only after `delay` (its data as of
    /// the request).
    pub fn delay_lists(&self, delay: std::time::Duration) {
        *self.shared.list_delay.lock().unwrap() = delay;
    }

    /// Sends every open watch a BOOKMARK at the current resource version, as the API server's
    /// watch cache does on its timer once it has caught up (held watches get none).
    pub fn bookmark(&self) {
        let _order = self.shared.items.lock().unwrap();
        self.send_bookmark(self.shared.rv.load(Ordering::SeqCst));
    }

    /// Sends a BOOKMARK at `rv` to every open watch that started below it: with an `rv` older
    /// than the current one, a watch cache that lags behind etcd.
    pub fn bookmark_at(&self, rv: u64) {
        let _order = self.shared.items.lock().unwrap();
        self.send_bookmark(rv);
    }

    fn send_bookmark(&self, rv: u64) {
        let rv = rv.to_string();
        let object = json!({"apiVersion": "v1", "kind": "Bookmark", "metadata": {"resourceVersion": rv}});
        let _ = self.shared.events.send(json!({"type": "BOOKMARK", "object": object}));
    }

    /// From now on, watches whose path contains `path_part` deliver nothing (events and
    /// BOOKMARKs stay unsent, the connection open): a stream stalled somewhere on the way.
    pub fn hold(&self, path_part: &str) {
        self.shared.held.lock().unwrap().push(path_part.to_string());
    }

    /// Watches whose path contains `path_part` deliver again, from the next one opened (a held
    /// stream stays silent until it ends: it lost what it did not send).
    pub fn release(&self, path_part: &str) {
        self.shared.held.lock().unwrap().retain(|h| h != path_part);
    }

    /// Refusals [`WatchApi::refuse_watches`] has yet to give.
    pub fn refusals_left(&self) -> usize {
        self.shared.refused.lock().unwrap().1
    }

    /// A write elsewhere in etcd (another resource): the resource version moves on, no watch
    /// here gets an event.
    pub fn bump(&self) -> u64 {
        let _order = self.shared.items.lock().unwrap();
        self.shared.rv.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The current resource version.
    pub fn resource_version(&self) -> u64 {
        self.shared.rv.load(Ordering::SeqCst)
    }

    /// The next `n` watch requests whose path contains `path_part` are refused with `500
    /// Internal Server Error` (etcd changing leader; kube's client itself retries 429, 503
    /// and 504, so those would never reach the watch).
    pub fn refuse_watches(&self, path_part: &str, n: usize) {
        *self.shared.refused.lock().unwrap() = (path_part.to_string(), n);
    }

    pub fn stop(&self) {
        self.shared.up.send_replace(false);
    }

    /// Serves again. With `expire`, every resource version handed out so far is too old to
    /// watch from (etcd compacted while the API server was down).
    pub fn start_again(&self, expire: bool) {
        if expire {
            let rv = self.shared.rv.fetch_add(1, Ordering::SeqCst) + 1;
            self.shared.expired_below.store(rv, Ordering::SeqCst);
        }
        self.shared.up.send_replace(true);
    }

    /// Replaces the object with `o`'s apiVersion, kind, namespace and name (adds it when
    /// absent) at a new resource version, and sends a MODIFIED event to open watches.
    pub fn modify(&self, o: Value) {
        self.change(o, false)
    }

    /// [`WatchApi::modify`], but the event line has `object` before `type`, as a proxy that
    /// sorts keys would write it: a line the watch cannot read.
    pub fn modify_unreadably(&self, o: Value) {
        self.change(o, true)
    }

    fn change(&self, mut o: Value, object_first: bool) {
        // Under the items' lock: a LIST reads its items and their version together.
        let mut items = self.shared.items.lock().unwrap();
        let rv = self.shared.rv.fetch_add(1, Ordering::SeqCst) + 1;
        o["metadata"]["resourceVersion"] = json!(rv.to_string());
        let same = |a: &Value| {
            ["apiVersion", "kind"].iter().all(|k| a[k] == o[k])
                && a["metadata"]["namespace"] == o["metadata"]["namespace"]
                && a["metadata"]["name"] == o["metadata"]["name"]
        };
        let event = json!({"type": "MODIFIED", "object": o, "objectFirst": object_first});
        match items.iter_mut().find(|a| same(a)) {
            Some(slot) => *slot = o.clone(),
            None => items.push(o.clone()),
        }
        self.shared.history.lock().unwrap().push((rv, event.clone()));
        // Sent under the lock too: every watch gets the changes and BOOKMARKs in version order.
        let _ = self.shared.events.send(event);
        drop(items);
    }
}

fn reply(status: u16, body: Body) -> hyper::Response<Body> {
    hyper::Response::builder().status(status).header("content-type", "application/json").body(body).unwrap()
}

fn json_body(v: &Value) -> Body {
    Full::new(Bytes::from(v.to_string())).boxed()
}

async fn answer(
    shared: Arc<Shared>,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Body>, Infallible> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    // Subscribed before the request is recorded: a test that saw a watch request arrive may
    // change an object at once and count on the event.
    let subscription = shared.events.subscribe();
    // Reads as `path?query`; anything else as `METHOD path?query` (a write the tests refuse).
    let method =
        if req.method() == hyper::Method::GET { String::new() } else { format!("{} ", req.method()) };
    shared.requests.lock().unwrap().push(format!("{method}{path}?{query}"));
    if req
        .headers()
        .get(hyper::header::CONNECTION)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"))
    {
        shared.closing.fetch_add(1, Ordering::SeqCst);
    }
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .map(str::to_string)
    };
    let status = |code: u16, reason: &str, message: String| json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": message, "code": code});
    let c = match collection(&path) {
        Ok(c) => c,
        Err(e) => return Ok(reply(404, json_body(&status(404, "NotFound", e)))),
    };
    let watch = matches!(param("watch").as_deref(), Some("true" | "1"));
    if watch && param("sendInitialEvents").as_deref() == Some("true") {
        if !shared.streams_lists.load(Ordering::SeqCst) {
            let message =
                "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled";
            return Ok(reply(422, json_body(&status(422, "Invalid", message.to_string()))));
        }
        // Its set is read at the request's arrival, its answer may come later.
        let body = streamed_list(&shared, &path, &query, subscription);
        let delay = *shared.list_delay.lock().unwrap();
        tokio::time::sleep(delay).await;
        return Ok(reply(200, body));
    }
    if watch {
        let from: u64 = param("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
        let expired_below = shared.expired_below.load(Ordering::SeqCst);
        if from < expired_below {
            let message = format!("too old resource version: {from} ({})", expired_below - 1);
            let line = event_line(&json!({"type": "ERROR", "object": status(410, "Expired", message)}));
            let once = futures::stream::iter([Ok::<_, Infallible>(Frame::data(Bytes::from(line)))]);
            return Ok(reply(200, http_body_util::BodyExt::boxed(StreamBody::new(once))));
        }
        {
            let mut refused = shared.refused.lock().unwrap();
            if refused.1 > 0 && path.contains(refused.0.as_str()) {
                refused.1 -= 1;
                let message = "etcdserver: leader changed".to_string();
                return Ok(reply(500, json_body(&status(500, "InternalError", message))));
            }
        }
        // What the watch missed since `from` first (as the watch cache replays it), then what
        // comes; each change once.
        let replay: Vec<Value> = shared
            .history
            .lock()
            .unwrap()
            .iter()
            .filter(|(rv, _)| *rv > from)
            .map(|(_, ev)| ev.clone())
            .collect();
        let replayed_to = replay.last().map_or(from, rv_of);
        // As the watch cache: nothing at or below the watch's start, no BOOKMARK below what
        // the watch was sent.
        let live = tokio_stream_of(subscription).filter(move |ev| {
            let keep = rv_of(ev) > replayed_to;
            async move { keep }
        });
        let watch_path = path.clone();
        let held_by = shared.clone();
        // Once held, a stream stays silent (a stream that dropped events must not go on).
        let mut silenced = false;
        let events = futures::stream::iter(replay).chain(live).filter_map(move |ev| {
            silenced |= held_by.held.lock().unwrap().iter().any(|h| watch_path.contains(h.as_str()));
            let keep = !silenced && (ev["type"] == "BOOKMARK" || c.holds(&ev["object"]));
            async move { keep.then(|| Ok(Frame::data(Bytes::from(event_line(&ev))))) }
        });
        // The API server ends a watch after its timeoutSeconds.
        let timeout = param("timeoutSeconds").and_then(|t| t.parse::<u64>().ok());
        let events = events.take_until(async move {
            match timeout {
                Some(t) => tokio::time::sleep(std::time::Duration::from_secs(t)).await,
                None => std::future::pending().await,
            }
        });
        return Ok(reply(200, http_body_util::BodyExt::boxed(StreamBody::new(events))));
    }
    if shared.lists_fail.load(Ordering::SeqCst) {
        let message = "etcdserver: request timed out".to_string();
        return Ok(reply(500, json_body(&status(500, "InternalError", message))));
    }
    let cut =
        !query.split('&').any(|kv| kv.starts_with("limit=")) && shared.plain_lists_cut.load(Ordering::SeqCst);
    // The watcher's LIST asks for `resourceVersion=0` (any version); answer at the current one.
    let plain: Vec<&str> = query.split('&').filter(|kv| !kv.starts_with("resourceVersion")).collect();
    let (items, rv) = {
        let items = shared.items.lock().unwrap();
        (items.clone(), shared.rv.load(Ordering::SeqCst))
    };
    let delay = *shared.list_delay.lock().unwrap();
    tokio::time::sleep(delay).await;
    Ok(match list(&items, &path, &plain.join("&")) {
        Ok(mut body) => {
            body["metadata"]["resourceVersion"] = json!(rv.to_string());
            let mut text = body.to_string();
            if cut {
                text.truncate(text.len() / 2);
            }
            reply(200, Full::new(Bytes::from(text)).boxed())
        }
        Err(e) => reply(400, json_body(&status(400, "BadRequest", e))),
    })
}

/// A streaming list's body: an ADDED event for each object the selectors pick, the BOOKMARK
/// that ends them at the current resource version, then the changes after it.
fn streamed_list(shared: &Shared, path: &str, query: &str, subscription: broadcast::Receiver<Value>) -> Body {
    let selectors: Vec<&str> = query
        .split('&')
        .filter(|kv| kv.starts_with("labelSelector") || kv.starts_with("fieldSelector"))
        .collect();
    let (items, rv) = (shared.items.lock().unwrap().clone(), shared.rv.load(Ordering::SeqCst));
    let listed = list(&items, path, &selectors.join("&")).unwrap();
    let mut lines: Vec<Value> =
        listed["items"].as_array().unwrap().iter().map(|o| json!({"type": "ADDED", "object": o})).collect();
    let end =
        json!({"resourceVersion": rv.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}});
    lines.push(json!({"type": "BOOKMARK", "object": {"kind": listed["kind"], "apiVersion": listed["apiVersion"], "metadata": end}}));
    let c = collection(path).unwrap();
    let live = tokio_stream_of(subscription).filter(move |ev| {
        let keep = rv_of(ev) > rv && (ev["type"] == "BOOKMARK" || c.holds(&ev["object"]));
        async move { keep }
    });
    let frames =
        futures::stream::iter(lines).chain(live).map(|ev| Ok(Frame::data(Bytes::from(event_line(&ev)))));
    http_body_util::BodyExt::boxed(StreamBody::new(frames))
}

/// The values of a broadcast receiver as a stream (lagged values are skipped).
fn tokio_stream_of(rx: broadcast::Receiver<Value>) -> impl futures::Stream<Item = Value> + Send {
    futures::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(v) => return Some((v, rx)),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}

/// One watch event line as the API server writes it: `type` before `object` (the field order
/// of Go's `metav1.WatchEvent`; `serde_json`'s map would sort `object` first).
fn event_line(ev: &Value) -> String {
    if ev["objectFirst"] == true {
        return format!("{{\"object\":{},\"type\":{}}}\n", ev["object"], ev["type"]);
    }
    format!("{{\"type\":{},\"object\":{}}}\n", ev["type"], ev["object"])
}

/// The resource version of a change event's object.
fn rv_of(ev: &Value) -> u64 {
    ev["object"]["metadata"]["resourceVersion"].as_str().and_then(|v| v.parse().ok()).unwrap_or(0)
}
