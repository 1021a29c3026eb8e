//! Watch mode against a local HTTPS stand-in for the Kubernetes API server: LIST answers from
//! the three-node snapshot fixture, WATCH streams that stay open (one carries an event).
//! `/readyz` is 503 until every kind is listed, then 200; the view holds the listed objects.

use crate::support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures::StreamExt as _;
use http_body_util::{combinators::BoxBody, BodyExt as _, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use longhorn_guard::admit::Admitter;
use longhorn_guard::cluster::watch::targets;
use longhorn_guard::cluster::{ClusterView, SharedView, Source};
use longhorn_guard::policy::Policy;
use longhorn_guard::tls::{ReloadingCert, TlsFiles};
use serde_json::{json, Value};
use support::*;
use tokio::sync::Notify;

type Body = BoxBody<Bytes, Infallible>;

/// Path of a watched kind's collection, e.g. `/apis/longhorn.io/v1beta2/namespaces/longhorn-system/volumes`.
fn collection_paths() -> Vec<(String, String, String)> {
    targets()
        .into_iter()
        .map(|t| {
            let r = &t.resource;
            let mut p = if r.group.is_empty() {
                "/api/v1".to_string()
            } else {
                format!("/apis/{}/{}", r.group, r.version)
            };
            if let Some(ns) = t.namespace {
                p.push_str(&format!("/namespaces/{ns}"));
            }
            p.push('/');
            p.push_str(&r.plural);
            (p, r.api_version.clone(), r.kind.clone())
        })
        .collect()
}

struct StandIn {
    items: Vec<Value>,
    /// LIST answers wait for this, so the test sees the unsynced state first.
    release: Notify,
    released: std::sync::atomic::AtomicBool,
}

async fn handle(
    state: Arc<StandIn>,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Body>, Infallible> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let Some((_, api_version, kind)) = collection_paths().into_iter().find(|(p, _, _)| *p == path) else {
        let body = Full::new(Bytes::from(
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#,
        ));
        return Ok(hyper::Response::builder().status(404).body(body.boxed()).unwrap());
    };
    if query.split('&').any(|kv| kv == "sendInitialEvents=true") {
        // As an API server without streaming lists: a guard that falls back from plain lists
        // lists in pages.
        let body = Full::new(Bytes::from(
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422}"#,
        ));
        return Ok(hyper::Response::builder().status(422).body(body.boxed()).unwrap());
    }
    if query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1") {
        // An open stream; the core Node watch carries one event cordoning node-1.
        let mut events: Vec<Result<Frame<Bytes>, Infallible>> = Vec::new();
        if api_version == "v1" && kind == "Node" {
            let mut node = state
                .items
                .iter()
                .find(|i| i["apiVersion"] == "v1" && i["kind"] == "Node" && i["metadata"]["name"] == "node-1")
                .cloned()
                .unwrap();
            node["spec"]["unschedulable"] = json!(true);
            node["metadata"]["resourceVersion"] = json!("2");
            // "type" before "object", as the API server writes it (a Go struct's field order).
            let line = format!("{{\"type\":\"MODIFIED\",\"object\":{node}}}\n");
            events.push(Ok(Frame::data(Bytes::from(line))));
        }
        let stream = futures::stream::iter(events).chain(futures::stream::pending());
        let resp = hyper::Response::builder()
            .header("content-type", "application/json")
            .body(http_body_util::BodyExt::boxed(StreamBody::new(stream)))
            .unwrap();
        return Ok(resp);
    }
    if !state.released.load(std::sync::atomic::Ordering::SeqCst) {
        state.release.notified().await;
    }
    let items: Vec<Value> = state
        .items
        .iter()
        .filter(|i| i["apiVersion"] == api_version.as_str() && i["kind"] == kind.as_str())
        .cloned()
        .collect();
    let list = json!({
        "apiVersion": api_version,
        "kind": format!("{kind}List"),
        "metadata": {"resourceVersion": "1"},
        "items": items,
    });
    let body = Full::new(Bytes::from(list.to_string())).boxed();
    Ok(hyper::Response::builder().header("content-type", "application/json").body(body).unwrap())
}

async fn start_stand_in(certs: &std::path::Path, state: Arc<StandIn>) -> SocketAddr {
    let cert =
        Arc::new(ReloadingCert::load(TlsFiles::in_dir(certs), longhorn_guard::tls::provider()).unwrap());
    let acceptor =
        tokio_rustls::TlsAcceptor::from(Arc::new(longhorn_guard::tls::server_config(cert).unwrap()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let (acceptor, state) = (acceptor.clone(), state.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let svc = hyper::service::service_fn(move |req| handle(state.clone(), req));
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), svc).await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_turns_200_once_every_watch_has_listed() {
    let view = SharedView::new(ClusterView::new(Source::Watch));
    let admitter = Admitter::new(view.clone(), Arc::new(Policy::default()), None);
    // The stand-in API server serves the webhook's certificates too.
    let TestServer { addr, handle, certs, client: client_tls } = TestServer::with_admitter(admitter).await;
    let snapshot: Value = serde_json::from_slice(&std::fs::read(SNAPSHOT).unwrap()).unwrap();
    let items = snapshot["items"].as_array().unwrap().clone();
    let state = Arc::new(StandIn { items, release: Notify::new(), released: false.into() });
    let api = start_stand_in(certs.path(), state.clone()).await;

    let mut cfg = kube::Config::new(format!("https://{api}").parse().unwrap());
    cfg.root_cert = Some(vec![pem_cert(&certs.path().join("ca.crt")).to_vec()]);
    let client = kube::Client::try_from(cfg).unwrap();
    let watches = tokio::spawn(longhorn_guard::cluster::watch::run(client, view.clone()));

    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = request(addr, &client_tls, "GET", "/readyz", vec![]).await.unwrap();
    assert_eq!(r.status, 503, "ready before any list finished: {}", r.text());

    state.released.store(true, std::sync::atomic::Ordering::SeqCst);
    state.release.notify_waiters();
    let t0 = Instant::now();
    loop {
        let r = request(addr, &client_tls, "GET", "/readyz", vec![]).await.unwrap();
        if r.status == 200 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "never became ready: {}", r.text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let expected = longhorn_guard::cluster::snapshot::load(std::path::Path::new(SNAPSHOT)).unwrap().counts();
    assert_eq!(view.read().counts(), expected);
    // The WATCH event was applied.
    let t0 = Instant::now();
    while view.read().is_node_cordoned("node-1") != Some(true) {
        assert!(t0.elapsed() < Duration::from_secs(10), "the watch event never reached the view");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let m = request(addr, &client_tls, "GET", "/metrics", vec![]).await.unwrap().text();
    assert!(m.contains("longhorn_guard_cluster_view_synced 1"), "{m}");
    assert!(m.contains("longhorn_guard_cluster_view_age_seconds "), "{m}");
    // A decision against the watched view.
    let body = fixture("eviction-create.json");
    let r = request(addr, &client_tls, "POST", "/validate", body.clone()).await.unwrap();
    assert_eq!(r.status, 200);
    assert_review(&r.json(), &uid_of(&body), "watch-mode validate");

    watches.abort();
    handle.shutdown();
    assert!(handle.stopped().await);
}
