//! Helpers for the server tests: certificates in a tempdir, the real server on 127.0.0.1:0,
//! and a TLS client that trusts only the generated CA.
#![allow(dead_code)]

pub mod apiserver;
pub mod generated;
pub mod longhorn;
pub mod proxy;
pub mod read_paths;
pub mod run;
pub mod serve;
pub mod states;
pub mod watchapi;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use longhorn_guard::admit::Admitter;
use longhorn_guard::check::cluster::metrics::SharedChecks;
use longhorn_guard::cluster::{snapshot, SharedView};
use longhorn_guard::policy::Policy;
use longhorn_guard::server::{Limits, Server, ServerConfig, ServerHandle};
use longhorn_guard::tls::TlsFiles;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

pub const SNAPSHOT: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/cluster/snapshot-three-nodes.json");
pub const ADMISSION_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/admission");

/// Every admission fixture, sorted; `(path, is_mutating_body)`.
pub fn admission_fixtures() -> Vec<(PathBuf, bool)> {
    let mut v: Vec<(PathBuf, bool)> = std::fs::read_dir(ADMISSION_DIR)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let m = p.file_stem().unwrap().to_string_lossy().ends_with("-mutating");
            (p, m)
        })
        .collect();
    v.sort();
    assert!(v.len() >= 20, "expected the shared admission fixtures, found {}", v.len());
    v
}

/// The shared fixtures (/work/shared/fixtures), the one place tests read real JSON from.
pub const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures");

/// A file under [`FIXTURES`], by its path there; a missing one names its path.
pub fn shared_fixture(rel: &str) -> Vec<u8> {
    let path = format!("{FIXTURES}/{rel}");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// [`shared_fixture`] parsed as JSON.
pub fn shared_json(rel: &str) -> serde_json::Value {
    serde_json::from_slice(&shared_fixture(rel)).unwrap()
}

/// [`fixture`] parsed as JSON.
pub fn fixture_json(name: &str) -> serde_json::Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

/// An admission review fixture, by its file name.
pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(ADMISSION_DIR).join(name))
        .unwrap_or_else(|e| panic!("{ADMISSION_DIR}/{name}: {e}"))
}

pub fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A server started on 127.0.0.1:0 with fresh certificates.
pub struct TestServer {
    pub addr: SocketAddr,
    pub handle: ServerHandle,
    pub certs: tempfile::TempDir,
    pub client: Arc<rustls::ClientConfig>,
}

impl TestServer {
    /// Certificates from `certs::generate` in a tempdir, the three-node snapshot, default policy.
    pub async fn start(limits: Limits) -> Self {
        let certs = tempfile::tempdir().unwrap();
        longhorn_guard::certs::generate(&longhorn_guard::certs::CertsOptions::new(certs.path())).unwrap();
        let tls = TlsFiles::in_dir(certs.path());
        Self::start_with(certs, tls, limits).await
    }

    /// Serves `tls` (CA at `certs/ca.crt`) against the three-node snapshot.
    pub async fn start_with(certs: tempfile::TempDir, tls: TlsFiles, limits: Limits) -> Self {
        let view = snapshot::load(Path::new(SNAPSHOT))
            .unwrap()
            .derive(longhorn_guard::policy::drain::derivations(), std::time::SystemTime::now());
        let view = SharedView::new(view);
        let admitter = Admitter::new(view, Arc::new(Policy::default()), None);
        Self::serve(certs, tls, admitter, limits, None).await
    }

    /// Serves `admitter` with fresh certificates and [`test_limits`].
    pub async fn with_admitter(admitter: Admitter) -> Self {
        Self::serve_admitter(admitter, test_limits()).await
    }

    /// Serves `admitter` with fresh certificates and `limits`.
    pub async fn serve_admitter(admitter: Admitter, limits: Limits) -> Self {
        let certs = tempfile::tempdir().unwrap();
        longhorn_guard::certs::generate(&longhorn_guard::certs::CertsOptions::new(certs.path())).unwrap();
        let tls = TlsFiles::in_dir(certs.path());
        Self::serve(certs, tls, admitter, limits, None).await
    }

    /// [`Self::with_admitter`], exporting these `check cluster` results on `/metrics`.
    pub async fn with_checks(admitter: Admitter, checks: SharedChecks) -> Self {
        let certs = tempfile::tempdir().unwrap();
        longhorn_guard::certs::generate(&longhorn_guard::certs::CertsOptions::new(certs.path())).unwrap();
        let tls = TlsFiles::in_dir(certs.path());
        Self::serve(certs, tls, admitter, test_limits(), Some(checks)).await
    }

    async fn serve(
        certs: tempfile::TempDir,
        tls: TlsFiles,
        admitter: Admitter,
        limits: Limits,
        checks: Option<SharedChecks>,
    ) -> Self {
        install_provider();
        let config = ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), tls, admitter, limits, checks };
        let (addr, handle) = Server::bind(config).await.unwrap();
        let client = client_config(&certs.path().join("ca.crt"));
        Self { addr, handle, certs, client }
    }
}

/// For a stand-in API server: fresh certificates in a tempdir (CA at `ca.crt`), a TLS acceptor
/// serving them, and a listener on 127.0.0.1:0.
pub async fn tls_listener() -> (tempfile::TempDir, tokio_rustls::TlsAcceptor, tokio::net::TcpListener) {
    install_provider();
    let certs = tempfile::tempdir().unwrap();
    longhorn_guard::certs::generate(&longhorn_guard::certs::CertsOptions::new(certs.path())).unwrap();
    tls_listener_in(certs).await
}

/// [`tls_listener`] serving the certificates already in `certs` (`tls.crt`, `tls.key`).
pub async fn tls_listener_in(
    certs: tempfile::TempDir,
) -> (tempfile::TempDir, tokio_rustls::TlsAcceptor, tokio::net::TcpListener) {
    install_provider();
    let cert = Arc::new(
        longhorn_guard::tls::ReloadingCert::load(
            TlsFiles::in_dir(certs.path()),
            longhorn_guard::tls::provider(),
        )
        .unwrap(),
    );
    let acceptor =
        tokio_rustls::TlsAcceptor::from(Arc::new(longhorn_guard::tls::server_config(cert).unwrap()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    (certs, acceptor, listener)
}

/// A rustls client configuration trusting only the CA in `ca_pem`.
pub fn client_config(ca_pem: &Path) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(ca_pem).unwrap();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut cfg =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// A TLS connection to `addr`, verifying the name `localhost`.
pub async fn connect(
    addr: SocketAddr,
    cfg: &Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    TlsConnector::from(cfg.clone()).connect(ServerName::try_from("localhost").unwrap(), tcp).await
}

/// The leaf certificate the server presents on a new connection.
/// (A full handshake: session resumption is off, since a resumed session shows the
/// certificate of the session it resumes.)
pub async fn served_cert(addr: SocketAddr, cfg: &Arc<rustls::ClientConfig>) -> CertificateDer<'static> {
    let mut fresh = (**cfg).clone();
    fresh.resumption = rustls::client::Resumption::disabled();
    let tls = connect(addr, &Arc::new(fresh)).await.unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].clone().into_owned()
}

/// The DER of the first certificate in a PEM file.
pub fn pem_cert(path: &Path) -> CertificateDer<'static> {
    let pem = std::fs::read(path).unwrap();
    CertificateDer::from_pem_slice(&pem).unwrap()
}

/// An HTTP response: status, content type, body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// One request over a new TLS connection.
pub async fn request(
    addr: SocketAddr,
    cfg: &Arc<rustls::ClientConfig>,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> Result<Reply, String> {
    let tls = connect(addr, cfg).await.map_err(|e| format!("connect: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send(&mut sender, method, path, body).await
}

/// One request over an open HTTP/1.1 connection.
pub async fn send(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> Result<Reply, String> {
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    // A kept-alive connection takes a moment to be ready for the next request after a
    // response; sending before that fails with "operation was canceled".
    sender.ready().await.map_err(|e| format!("connection closed: {e}"))?;
    let resp = tokio::time::timeout(Duration::from_secs(30), sender.send_request(req))
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| format!("send: {e}"))?;
    let status = resp.status().as_u16();
    let content_type =
        resp.headers().get("content-type").map(|v| v.to_str().unwrap_or("").to_string()).unwrap_or_default();
    let body = resp.into_body().collect().await.map_err(|e| format!("body: {e}"))?.to_bytes().to_vec();
    Ok(Reply { status, content_type, body })
}

/// Asserts the protocol shape of a response AdmissionReview for a request with `uid`.
pub fn assert_review(resp: &serde_json::Value, uid: &str, what: &str) {
    assert_eq!(resp["apiVersion"], "admission.k8s.io/v1", "{what}: {resp}");
    assert_eq!(resp["kind"], "AdmissionReview", "{what}: {resp}");
    let r = &resp["response"];
    assert_eq!(r["uid"], uid, "{what}: uid not echoed: {resp}");
    assert!(r["allowed"].is_boolean(), "{what}: allowed is not a bool: {resp}");
    if let Some(patch) = r.get("patch") {
        use base64::Engine as _;
        let s = patch.as_str().unwrap_or_else(|| panic!("{what}: patch is not a string: {resp}"));
        let bytes = base64::engine::general_purpose::STANDARD.decode(s).unwrap();
        let ops: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert!(ops.is_array(), "{what}: patch is not a JSON array");
        assert_eq!(r["patchType"], "JSONPatch", "{what}: {resp}");
    }
}

/// The request uid of an AdmissionReview body.
pub fn uid_of(body: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap();
    v["request"]["uid"].as_str().unwrap().to_string()
}

/// Limits with a fast certificate poll and no shutdown delay, for tests.
pub fn test_limits() -> Limits {
    Limits {
        tls_reload_interval: Duration::from_millis(100),
        shutdown_delay: Duration::ZERO,
        ..Limits::default()
    }
}

/// The captured eviction AdmissionReview (`eviction-create.json`) for pod `name` in
/// longhorn-system, with a uid of its own.
pub fn eviction_of(name: &str) -> Vec<u8> {
    let mut review: serde_json::Value = serde_json::from_slice(&fixture("eviction-create.json")).unwrap();
    review["request"]["name"] = serde_json::Value::from(name);
    review["request"]["object"]["metadata"]["name"] = serde_json::Value::from(name);
    review["request"]["uid"] = serde_json::Value::from(format!("eviction-{name}"));
    serde_json::to_vec(&review).unwrap()
}

/// A DELETE of `old` (whose kind has the API group, version and plural given) by `user`: no
/// pod, budget or InstanceManager DELETE was captured, so this is the captured `kubectl delete
/// node` review (`admission/node-delete.json`: operation DELETE, `object` null, `options` a
/// DeleteOptions) with the resource, kind, name and namespace of `old`, `old` as its
/// `oldObject`, and a uid of its own.
pub fn delete_of(
    group: &str,
    version: &str,
    plural: &str,
    old: &serde_json::Value,
    user: &str,
) -> serde_json::Value {
    use serde_json::json;
    let mut review = shared_json("admission/node-delete.json");
    let r = &mut review["request"];
    let kind = json!({"group": group, "version": version, "kind": old["kind"]});
    let resource = json!({"group": group, "version": version, "resource": plural});
    r["kind"] = kind.clone();
    r["requestKind"] = kind;
    r["resource"] = resource.clone();
    r["requestResource"] = resource;
    r["name"] = old["metadata"]["name"].clone();
    r["namespace"] = old["metadata"]["namespace"].clone();
    r["oldObject"] = old.clone();
    r["userInfo"]["username"] = json!(user);
    r["uid"] = json!(format!("delete-{plural}-{}-{user}", old["metadata"]["name"].as_str().unwrap_or("")));
    review
}

/// POSTs the eviction of pod `name` ([`eviction_of`]) to `server`'s `/validate`, checks the
/// AdmissionReview that comes back, and returns its `response`.
pub async fn evict_pod(server: &TestServer, name: &str) -> serde_json::Value {
    let body = eviction_of(name);
    let r = request(server.addr, &server.client, "POST", "/validate", body.clone()).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let review = r.json();
    assert_review(&review, &uid_of(&body), "eviction");
    review["response"].clone()
}

/// How long [`until`] waits: generous, the waits end as soon as their condition holds.
pub const WAIT: Duration = Duration::from_secs(40);

/// Polls `done` every 10 ms until it holds; fails the test naming `what` after [`WAIT`].
pub async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    while !done() {
        assert!(t0.elapsed() < WAIT, "gave up waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Writes a kubeconfig in `dir` for the stand-in API server at `addr` trusting `ca` (no
/// credentials), for running the binary against it; returns its path.
pub fn kubeconfig(dir: &Path, addr: SocketAddr, ca: &Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: stand-in\n  cluster:\n    server: https://127.0.0.1:{}\n    \
         certificate-authority: {}\ncontexts:\n- name: stand-in\n  context:\n    cluster: stand-in\n    user: none\n\
         current-context: stand-in\nusers:\n- name: none\n  user: {{}}\n",
        addr.port(),
        ca.display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `longhorn-guard check drain ARGS` (warnings only on stderr): exit code, stdout, stderr.
pub fn check_drain(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
        .args(["check", "drain"])
        .args(args)
        .env("LONGHORN_GUARD_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}
