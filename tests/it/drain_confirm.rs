//! The freshness protocol end to end: a stale watch view, and the confirmer reading the
//! node's state from a stand-in Kubernetes API server on 127.0.0.1 that serves the fixture
//! snapshot (optionally edited) for LIST requests with label and field selectors.

use crate::support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::extract::{Request, State};
use axum::response::IntoResponse;
use axum::Json;
use longhorn_guard::admit::{Admitter, WebhookKind};
use longhorn_guard::cluster::{SharedView, Source};
use longhorn_guard::policy::drain::analyze_node;
use longhorn_guard::policy::drain::confirm;
use longhorn_guard::policy::Policy;
use serde_json::{json, Value};
use support::apiserver::respond;
use support::generated::{fixture_items as snapshot_items, stale_watch_view};

const EVICTION: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/admission/eviction-create.json");
const IM_NODE_3: &str = "instance-manager-e3a5c7b9d1f2406a8c0e2b4d6f8a1c3e";

#[derive(Clone)]
struct Fake {
    items: Arc<Vec<Value>>,
    /// Every request's path and query, to check how the confirmer reads.
    seen: Arc<Mutex<Vec<String>>>,
}

async fn list(State(fake): State<Fake>, req: Request) -> axum::response::Response {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    fake.seen.lock().unwrap().push(format!("{path}?{query}"));
    let accept = req.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok());
    match respond(&fake.items, &path, &query, accept) {
        Ok(body) => Json(body).into_response(),
        Err(message) => (
            axum::http::StatusCode::BAD_REQUEST,
            Json(json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": 400})),
        )
            .into_response(),
    }
}

async fn serve(items: Vec<Value>) -> (SocketAddr, Fake) {
    let fake = Fake { items: Arc::new(items), seen: Arc::default() };
    let app = axum::Router::new().fallback(list).with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, fake)
}

fn client(addr: SocketAddr) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

fn stale_view() -> SharedView {
    SharedView::new(stale_watch_view(&snapshot_items()))
}

fn eviction_node_3() -> Vec<u8> {
    let mut body: Value = serde_json::from_str(&std::fs::read_to_string(EVICTION).unwrap()).unwrap();
    body["request"]["name"] = json!(IM_NODE_3);
    body.to_string().into_bytes()
}

#[tokio::test]
async fn confirmation_reads_are_consistent_lists_and_build_the_same_picture() {
    let (addr, fake) = serve(snapshot_items()).await;
    let view = confirm::read_node_state(&client(addr), "node-3").await.unwrap();
    assert_eq!(view.freshness().source, Source::Direct);
    let a = analyze_node(&view, "node-3", &Policy::default(), SystemTime::now());
    assert!(!a.would_block());
    assert_eq!(a.volumes.len(), 1);
    assert_eq!(a.volumes[0].protecting, vec!["vol-healthy-r-1a2b3c4d", "vol-healthy-r-5e6f7a8b"]);

    let seen = fake.seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|q| !q.contains("resourceVersion")),
        "quorum reads carry no resourceVersion: {seen:?}"
    );
    assert!(seen.iter().any(|q| q.contains("labelSelector=longhornnode%3Dnode-3")), "{seen:?}");
    assert!(seen.iter().any(|q| q.contains("labelSelector=longhornvolume+in+(vol-healthy)")), "{seen:?}");
}

#[tokio::test]
async fn stale_allow_is_confirmed_by_a_fresh_read() {
    let (addr, _) = serve(snapshot_items()).await;
    let view = stale_view();
    let admitter = Admitter::new(
        view.clone(),
        Arc::new(Policy::default()),
        Some(confirm::confirmer(client(addr), view)),
    );
    let out =
        admitter.admit(WebhookKind::Validate, &eviction_node_3(), Duration::from_secs(5)).await.unwrap();
    assert!(out.decision.allowed, "{:?}", out.decision.status);
    assert!(out.decision.confirm_node.is_none());
}

#[tokio::test]
async fn stale_allow_turns_into_a_denial_when_fresh_state_is_unsafe() {
    // Since the view was last updated, both other replicas of vol-healthy failed.
    let mut items = snapshot_items();
    for o in items.iter_mut() {
        let name = o["metadata"]["name"].as_str().unwrap().to_string();
        if name == "vol-healthy-r-1a2b3c4d" || name == "vol-healthy-r-5e6f7a8b" {
            o["spec"]["failedAt"] = json!("2026-11-30T11:50:00Z");
        }
    }
    let (addr, _) = serve(items).await;
    let view = stale_view();
    let admitter = Admitter::new(
        view.clone(),
        Arc::new(Policy::default()),
        Some(confirm::confirmer(client(addr), view)),
    );
    let out =
        admitter.admit(WebhookKind::Validate, &eviction_node_3(), Duration::from_secs(5)).await.unwrap();
    assert!(!out.decision.allowed);
    let st = out.decision.status.as_ref().unwrap();
    assert_eq!(st.code, 429);
    assert!(
        st.message.starts_with(
            "longhorn-guard: draining node-3 would strand 1 volume:\n- vol-healthy: last healthy"
        ),
        "{}",
        st.message
    );
}

/// Runs `check drain ARGS` with KUBECONFIG pointing at the stand-in API server.
async fn check_live(addr: SocketAddr, args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{addr}\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\ncurrent-context: fake\n\
             users:\n- name: fake\n  user: {{}}\n"
        ),
    )
    .unwrap();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
            .args(["check", "drain"])
            .args(&args)
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("LONGHORN_GUARD_LOG", "warn")
            .output()
            .unwrap();
        drop(dir);
        (
            out.status.code().unwrap(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn check_drain_reads_the_live_cluster() {
    let (addr, _) = serve(snapshot_items()).await;
    let (code, out, err) = check_live(addr, &["node-3"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("\nnode-3: a drain would proceed (1 volume checked, none blocking)\n"), "{out}");

    let (code, out, _) = check_live(addr, &["node-1", "--output", "json"]).await;
    assert_eq!(code, 1);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["drain"], "block");

    let (code, _, err) = check_live(addr, &["node-9"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("node node-9 is not in the cluster (known nodes: node-1, node-2, node-3)"), "{err}");
}
