//! The gate's API path against a local HTTPS stand-in for the API server (real TLS on
//! 127.0.0.1, a CA and serving certificate from rcgen, a bearer token from a file), including
//! stand-ins that fail, to prove the fallback to the downward-API file.

use crate::support;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use longhorn_guard::gate::networks::{parse_networks, NETWORKS_ANNOTATION};
use longhorn_guard::gate::source::ApiSource;
use longhorn_guard::gate::status::NETWORK_STATUS_ANNOTATION;
use longhorn_guard::gate::{wait, GateOptions, Outcome};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::Value;
use tokio::net::TcpListener;

const NS: &str = "longhorn-system";
const TOKEN: &str = "stand-in-token";

/// The instance-manager pod of the fixtures, without the network status yet.
fn im_pod() -> Value {
    let mut pod = support::shared_json("longhorn/instance-manager-pod-storage-network.json");
    pod.as_object_mut().unwrap().remove("_comment");
    pod
}

fn pod_name(pod: &Value) -> String {
    pod["metadata"]["name"].as_str().unwrap().to_string()
}

fn good_status() -> String {
    support::shared_json("longhorn/multus-network-status-good.json")["rawAnnotationString"]
        .as_str()
        .unwrap()
        .to_string()
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Serve the pod (401 without the token, 404 for other paths).
    Serve,
    /// Answer every request with a 500 Status.
    Fail,
    /// Accept TCP connections and close them at once.
    Close,
}

struct StandIn {
    url: String,
    ca: CertificateDer<'static>,
    hits: Arc<AtomicUsize>,
    pod: Arc<Mutex<Value>>,
}

async fn stand_in(mode: Mode, pod: Value) -> StandIn {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "stand-in apiserver CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf =
        CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().signed_by(&leaf_key, &issuer).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let tls = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let pod = Arc::new(Mutex::new(pod));
    let (hits2, pod2) = (hits.clone(), pod.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            if mode == Mode::Close {
                hits2.fetch_add(1, Ordering::SeqCst);
                drop(tcp);
                continue;
            }
            let (acceptor, hits, pod) = (acceptor.clone(), hits2.clone(), pod2.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else { return };
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    hits.fetch_add(1, Ordering::SeqCst);
                    let resp = respond(mode, &req, &pod.lock().unwrap());
                    async move { Ok::<_, std::convert::Infallible>(resp) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    StandIn { url, ca: ca_cert.der().clone(), hits, pod }
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16()
    });
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    *resp.status_mut() = code;
    resp.headers_mut().insert("content-type", "application/json".parse().unwrap());
    resp
}

fn respond(mode: Mode, req: &Request<Incoming>, pod: &Value) -> Response<Full<Bytes>> {
    if mode == Mode::Fail {
        return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", "etcdserver: request timed out");
    }
    let auth = req.headers().get("authorization").and_then(|v| v.to_str().ok());
    if auth != Some(&format!("Bearer {TOKEN}")) {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
    }
    let want = format!("/api/v1/namespaces/{NS}/pods/{}", pod_name(pod));
    if req.method() != hyper::Method::GET || req.uri().path() != want {
        return status(StatusCode::NOT_FOUND, "NotFound", &format!("{} not found", req.uri().path()));
    }
    let mut resp = Response::new(Full::new(Bytes::from(pod.to_string())));
    resp.headers_mut().insert("content-type", "application/json".parse().unwrap());
    resp
}

/// The client the gate would build in-cluster, but from an explicit config.
fn api_for(stand_in: &StandIn, dir: &Path, name: &str) -> ApiSource {
    api_with_token(stand_in, dir, name, TOKEN)
}

fn api_with_token(stand_in: &StandIn, dir: &Path, name: &str, token_text: &str) -> ApiSource {
    let token = dir.join("token");
    std::fs::write(&token, token_text).unwrap();
    let mut config = kube::Config::new(stand_in.url.parse().unwrap());
    config.root_cert = Some(vec![stand_in.ca.to_vec()]);
    config.auth_info.token_file = Some(token.to_str().unwrap().to_string());
    ApiSource::from_config(config, NS, name).unwrap()
}

fn options(dir: &Path, pod: &Value, timeout: Duration) -> GateOptions {
    let net = dir.join("net");
    std::fs::create_dir_all(net.join("lhnet1")).unwrap();
    let request = pod["metadata"]["annotations"][NETWORKS_ANNOTATION].as_str().unwrap();
    GateOptions {
        networks: parse_networks(request, Some(NS)).unwrap(),
        timeout,
        poll_interval: Duration::from_millis(100),
        annotations_file: dir.join("annotations"),
        sys_class_net: net,
    }
}

/// The kubelet's downward-API file with the good status.
fn write_file_with_status(path: &PathBuf) {
    let quoted = good_status().replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
    std::fs::write(path, format!("{NETWORK_STATUS_ANNOTATION}=\"{quoted}\"")).unwrap();
}

#[tokio::test]
async fn status_read_from_the_api_server_as_it_appears() {
    let pod = im_pod();
    let name = pod_name(&pod);
    let server = stand_in(Mode::Serve, pod.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), &pod, Duration::from_secs(20));
    let api = api_for(&server, dir.path(), &name);
    // Multus writes the status a little later (pods/status update).
    let shared = server.pod.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        shared.lock().unwrap()["metadata"]["annotations"][NETWORK_STATUS_ANNOTATION] =
            Value::String(good_status());
    });
    let outcome = wait(&opts, Some(&api)).await;
    assert_eq!(
        outcome,
        Outcome::Ready(
            "storage network ready: harvester-system/storagenetwork-svrwv on lhnet1 with IP 192.168.100.12 \
             (from k8s.v1.cni.cncf.io/network-status, read from the API server)"
                .into()
        )
    );
    // It polled while the status was absent (no annotations file exists at all).
    assert!(server.hits.load(Ordering::SeqCst) >= 2);
    assert!(!opts.annotations_file.exists());
}

#[tokio::test]
async fn the_api_server_answer_wins_over_the_file() {
    let pod = im_pod();
    let server = stand_in(Mode::Serve, pod.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), &pod, Duration::from_secs(1));
    write_file_with_status(&opts.annotations_file);
    let api = api_for(&server, dir.path(), &pod_name(&pod));
    let Outcome::TimedOut(msg) = wait(&opts, Some(&api)).await else { panic!("expected a timeout") };
    assert!(msg.contains("annotation k8s.v1.cni.cncf.io/network-status is absent"), "{msg}");
}

#[tokio::test]
async fn a_failing_api_server_falls_back_to_the_file() {
    for mode in [Mode::Fail, Mode::Close] {
        let pod = im_pod();
        let server = stand_in(mode, pod.clone()).await;
        let dir = tempfile::tempdir().unwrap();
        let opts = options(dir.path(), &pod, Duration::from_secs(20));
        write_file_with_status(&opts.annotations_file);
        let api = api_for(&server, dir.path(), &pod_name(&pod));
        let outcome = wait(&opts, Some(&api)).await;
        assert_eq!(
            outcome,
            Outcome::Ready(format!(
                "storage network ready: harvester-system/storagenetwork-svrwv on lhnet1 with IP 192.168.100.12 \
                 (from k8s.v1.cni.cncf.io/network-status, read from {})",
                opts.annotations_file.display()
            ))
        );
        assert!(server.hits.load(Ordering::SeqCst) >= 1, "the API server was asked first");
    }
}

#[tokio::test]
async fn failing_api_and_no_file_times_out_naming_both() {
    let pod = im_pod();
    let name = pod_name(&pod);
    let server = stand_in(Mode::Fail, pod.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), &pod, Duration::from_secs(1));
    let api = api_for(&server, dir.path(), &name);
    let Outcome::TimedOut(msg) = wait(&opts, Some(&api)).await else { panic!("expected a timeout") };
    assert!(
        msg.contains(&format!("the pod's annotations could not be read (GET pod {NS}/{name} failed: ")),
        "{msg}"
    );
    assert!(msg.contains("etcdserver: request timed out"), "{msg}");
    assert!(msg.contains(&format!("cannot read {}", opts.annotations_file.display())), "{msg}");
}

#[tokio::test]
async fn a_wrong_token_is_refused_and_the_file_is_used() {
    let pod = im_pod();
    let server = stand_in(Mode::Serve, pod.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), &pod, Duration::from_secs(1));
    let api = api_with_token(&server, dir.path(), &pod_name(&pod), "not-the-token");
    let Outcome::TimedOut(msg) = wait(&opts, Some(&api)).await else { panic!("expected a timeout") };
    assert!(msg.contains("failed: ") && msg.contains("Unauthorized"), "{msg}");
}
