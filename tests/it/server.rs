//! The real HTTPS server on 127.0.0.1:0 with certificates from `certs`, spoken to by a rustls
//! client that trusts only the generated CA.

use crate::support;

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use longhorn_guard::certs::{generate, CertsOptions};
use longhorn_guard::server::Limits;
use longhorn_guard::tls::TlsFiles;
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const BIN: &str = env!("CARGO_BIN_EXE_longhorn-guard");

#[tokio::test]
async fn probes_metrics_and_every_fixture_answer_over_tls() {
    let s = TestServer::start(test_limits()).await;
    let healthz = request(s.addr, &s.client, "GET", "/healthz", vec![]).await.unwrap();
    assert_eq!((healthz.status, healthz.text().trim()), (200, "ok"));
    let readyz = request(s.addr, &s.client, "GET", "/readyz", vec![]).await.unwrap();
    assert_eq!(readyz.status, 200, "{}", readyz.text());

    let mut validated = 0;
    let mut mutated = 0;
    for (path, mutating) in admission_fixtures() {
        let body = std::fs::read(&path).unwrap();
        let uid = uid_of(&body);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let r = request(s.addr, &s.client, "POST", "/validate", body.clone()).await.unwrap();
        assert_eq!(r.status, 200, "/validate {name}: {}", r.text());
        assert_eq!(r.content_type, "application/json", "/validate {name}");
        assert_review(&r.json(), &uid, &format!("/validate {name}"));
        validated += 1;
        if mutating {
            let r = request(s.addr, &s.client, "POST", "/mutate", body).await.unwrap();
            assert_eq!(r.status, 200, "/mutate {name}: {}", r.text());
            assert_review(&r.json(), &uid, &format!("/mutate {name}"));
            mutated += 1;
        }
    }
    assert!(mutated >= 8, "only {mutated} mutating fixtures");

    let m = request(s.addr, &s.client, "GET", "/metrics", vec![]).await.unwrap();
    assert_eq!(m.status, 200);
    assert!(m.content_type.starts_with("text/plain"), "{}", m.content_type);
    let text = m.text();
    let sum = |prefix: &str| -> u64 {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!(sum("longhorn_guard_admission_requests_total{webhook=\"validate\""), validated);
    assert_eq!(sum("longhorn_guard_admission_requests_total{webhook=\"mutate\""), mutated);
    assert!(text.contains("resource=\"pods/eviction\",operation=\"CREATE\""), "{text}");
    assert!(
        text.contains("longhorn_guard_admission_duration_seconds_bucket{webhook=\"validate\",le=\"0.0001\"}")
    );
    assert!(text.contains(&format!(
        "longhorn_guard_admission_duration_seconds_count{{webhook=\"validate\"}} {validated}"
    )));
    assert!(text.contains("longhorn_guard_cluster_view_synced 1"), "{text}");
    assert!(text.contains("longhorn_guard_cluster_view_age_seconds 0"), "{text}");
    assert!(text.contains("longhorn_guard_admission_in_flight 0"), "{text}");
    assert!(text.contains("longhorn_guard_tls_reloads_total{result=\"success\"} 0"), "{text}");
    // The snapshot's vol-degraded rebuild has sat at 0% in WO since 2026-11-30T11:19:51Z.
    assert!(text.contains("longhorn_guard_stalled_rebuilds 1"), "{text}");
    assert!(
        text.contains(
            "longhorn_guard_stalled_rebuild_since_timestamp_seconds{volume=\"vol-degraded\",\
             engine=\"vol-degraded-e-0\",replica=\"vol-degraded-r-7d8e9f0a\"} 1796037591"
        ),
        "{text}"
    );
    s.handle.shutdown();
    assert!(s.handle.stopped().await);
}

#[tokio::test]
async fn bad_input_gets_a_clear_4xx_and_the_next_request_succeeds() {
    let s = TestServer::start(test_limits()).await;
    let good = fixture("eviction-create.json");
    let good_uid = uid_of(&good);
    let wrong_types = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"operation":["CREATE"],"userInfo":"alice"}}"#;
    let truncated = &good[..good.len() / 2];
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("empty body", vec![], 400, "request body is empty"),
        ("truncated JSON", truncated.to_vec(), 400, "request body is not JSON"),
        ("a JSON array", b"[{\"kind\":\"AdmissionReview\"}]".to_vec(), 400, "found an array"),
        (
            "no request",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(),
            400,
            "AdmissionReview has no request",
        ),
        (
            "wrong apiVersion",
            String::from_utf8(good.clone())
                .unwrap()
                .replacen("admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1)
                .into_bytes(),
            400,
            "apiVersion \"admission.k8s.io/v1beta1\" is not supported",
        ),
        ("wrong field types", wrong_types.to_vec(), 400, "request is malformed"),
        ("a 20 MiB body", vec![b' '; 20 * 1024 * 1024], 413, "larger than 7340032 bytes"),
    ];
    for (what, body, code, reason) in cases {
        let r = request(s.addr, &s.client, "POST", "/validate", body)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(r.status, code, "{what}: {}", r.text());
        assert!(r.content_type.starts_with("text/plain"), "{what}: {}", r.content_type);
        let text = r.text();
        assert!(text.contains(reason), "{what}: {text:?} should say {reason:?}");
        assert_eq!(text.trim_end().lines().count(), 1, "{what}: reason is not one line: {text:?}");
        let ok = request(s.addr, &s.client, "POST", "/validate", good.clone()).await.unwrap();
        assert_eq!(ok.status, 200, "after {what}: {}", ok.text());
        assert_review(&ok.json(), &good_uid, &format!("after {what}"));
    }
    // The same errors on one kept-alive connection: it stays usable after a 400.
    let tls = connect(s.addr, &s.client).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    let r = send(&mut sender, "POST", "/mutate", b"{\"kind\":".to_vec()).await.unwrap();
    assert_eq!(r.status, 400);
    let r = send(&mut sender, "POST", "/mutate", fixture("pod-create-instance-manager-mutating.json"))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());

    let m = request(s.addr, &s.client, "GET", "/metrics", vec![]).await.unwrap().text();
    assert!(m.contains("longhorn_guard_http_errors_total{code=\"400\"} 7"), "{m}");
    assert!(m.contains("longhorn_guard_http_errors_total{code=\"413\"} 1"), "{m}");
}

#[tokio::test]
async fn plaintext_http_to_the_tls_port_gets_no_admission_answer() {
    let s = TestServer::start(test_limits()).await;
    let body = fixture("eviction-create.json");
    let mut tcp = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let head = format!(
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let _ = tcp.write_all(&body).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the server kept a plaintext connection open");
    let text = String::from_utf8_lossy(&answer);
    assert!(!text.contains("AdmissionReview"), "plaintext got an admission answer: {text}");
    assert!(!text.starts_with("HTTP/1.1 200"), "{text}");
    // And TLS still works afterwards.
    let ok = request(s.addr, &s.client, "POST", "/validate", body).await.unwrap();
    assert_eq!(ok.status, 200);
}

/// Keeps sending admission requests over new connections until stopped; counts outcomes.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failures: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Load {
    fn start(s: &TestServer) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        // Full handshakes only: every request meets whichever certificate is current.
        let mut fresh = (*s.client).clone();
        fresh.resumption = rustls::client::Resumption::disabled();
        let (addr, client) = (s.addr, Arc::new(fresh));
        let body = fixture("node-update-cordon.json");
        let uid = uid_of(&body);
        let task = tokio::spawn({
            let (stop, ok, failures) = (stop.clone(), ok.clone(), failures.clone());
            async move {
                while !stop.load(Ordering::Relaxed) {
                    match request(addr, &client, "POST", "/validate", body.clone()).await {
                        Ok(r) if r.status == 200 && r.json()["response"]["uid"] == uid.as_str() => {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(r) => failures.lock().unwrap().push(format!("HTTP {}: {}", r.status, r.text())),
                        Err(e) => failures.lock().unwrap().push(e),
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        });
        Self { stop, ok, failures, task }
    }

    async fn finish(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        let failures = self.failures.lock().unwrap();
        assert!(failures.is_empty(), "requests failed during rotation: {failures:?}");
        self.ok.load(Ordering::Relaxed)
    }
}

/// A new serving certificate signed by the CA in `ca_dir`, written into `out`.
fn issue_with_ca(ca_dir: &Path, out: &Path, ip: &str) {
    std::fs::create_dir_all(out).unwrap();
    for f in ["ca.crt", "ca.key"] {
        std::fs::copy(ca_dir.join(f), out.join(f)).unwrap();
    }
    let mut opts = CertsOptions::new(out);
    opts.ips = vec![ip.parse().unwrap()];
    let g = generate(&opts).unwrap();
    assert!(g.ca_reused);
}

async fn wait_until_served(s: &TestServer, want: &rustls::pki_types::CertificateDer<'static>) {
    let t0 = Instant::now();
    while served_cert(s.addr, &s.client).await != *want {
        assert!(t0.elapsed() < Duration::from_secs(20), "the new certificate was never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn has_ip_san(der: &[u8], ip: [u8; 4]) -> bool {
    let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
    let san = cert.subject_alternative_name().unwrap().unwrap();
    san.value
        .general_names
        .iter()
        .any(|n| matches!(n, x509_parser::extensions::GeneralName::IPAddress(b) if *b == ip))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_in_place_serves_the_new_certificate_without_failing_requests() {
    let s = TestServer::start(test_limits()).await;
    let dir = s.certs.path().to_path_buf();
    let old = served_cert(s.addr, &s.client).await;
    let load = Load::start(&s);
    // Over a second later than the first: the new leaf's notAfter differs (second precision),
    // so the expiry gauge below shows the reload.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let staging = tempfile::tempdir().unwrap();
    issue_with_ca(&dir, staging.path(), "127.0.0.9");
    // Rewrite the files in place (truncate + write), certificate first so the server sees a
    // mismatched pair for a moment.
    std::fs::write(dir.join("tls.crt"), std::fs::read(staging.path().join("tls.crt")).unwrap()).unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    std::fs::write(dir.join("tls.key"), std::fs::read(staging.path().join("tls.key")).unwrap()).unwrap();
    let new = pem_cert(&staging.path().join("tls.crt"));
    assert_ne!(old, new);
    wait_until_served(&s, &new).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ok = load.finish().await;
    assert!(ok > 5, "only {ok} requests went through");
    assert!(has_ip_san(&served_cert(s.addr, &s.client).await, [127, 0, 0, 9]));
    let m = request(s.addr, &s.client, "GET", "/metrics", vec![]).await.unwrap().text();
    assert!(m.contains("longhorn_guard_tls_reloads_total{result=\"success\"} 1"), "{m}");
    // The expiry gauge follows the certificate now served.
    let not_after =
        |der: &[u8]| x509_parser::parse_x509_certificate(der).unwrap().1.validity().not_after.timestamp();
    assert_ne!(not_after(&old), not_after(&new));
    let want = format!("longhorn_guard_tls_cert_expiry_timestamp_seconds {}\n", not_after(&new));
    assert!(m.contains(&want), "{want} in {m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_by_secret_volume_symlink_swap() {
    install_provider();
    // The layout kubelet gives a Secret volume:
    //   ..2026_11_30_12_00_00.1/tls.{crt,key}, ..data -> ..2026_11_30_12_00_00.1, tls.crt -> ..data/tls.crt
    let root = tempfile::tempdir().unwrap();
    let ca = tempfile::tempdir().unwrap();
    generate(&CertsOptions::new(ca.path())).unwrap();
    let v1 = root.path().join("..2026_11_30_12_00_00.1");
    issue_with_ca(ca.path(), &v1, "127.0.0.11");
    for f in ["ca.crt", "ca.key"] {
        std::fs::remove_file(v1.join(f)).unwrap();
    }
    std::os::unix::fs::symlink("..2026_11_30_12_00_00.1", root.path().join("..data")).unwrap();
    for f in ["tls.crt", "tls.key"] {
        std::os::unix::fs::symlink(format!("..data/{f}"), root.path().join(f)).unwrap();
    }
    let ca_dir = tempfile::tempdir().unwrap();
    std::fs::copy(ca.path().join("ca.crt"), ca_dir.path().join("ca.crt")).unwrap();
    let s = TestServer::start_with(ca_dir, TlsFiles::in_dir(root.path()), test_limits()).await;
    assert_eq!(served_cert(s.addr, &s.client).await, pem_cert(&v1.join("tls.crt")));

    let load = Load::start(&s);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // kubelet's update: write a new timestamped dir, point a temporary symlink at it, rename
    // that over ..data (atomic), then remove the old dir. tls.crt itself is never written.
    let v2 = root.path().join("..2026_11_30_12_05_00.2");
    issue_with_ca(ca.path(), &v2, "127.0.0.12");
    std::os::unix::fs::symlink("..2026_11_30_12_05_00.2", root.path().join("..data_tmp")).unwrap();
    std::fs::rename(root.path().join("..data_tmp"), root.path().join("..data")).unwrap();
    std::fs::remove_dir_all(&v1).unwrap();
    let new = pem_cert(&v2.join("tls.crt"));
    wait_until_served(&s, &new).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ok = load.finish().await;
    assert!(ok > 5, "only {ok} requests went through");
    assert!(has_ip_san(&served_cert(s.addr, &s.client).await, [127, 0, 0, 12]));
}

/// Sends the headers and the first half of a body now; [`SlowRequest::finish`] sends the rest
/// and reads the whole answer.
struct SlowRequest {
    tls: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    rest: Vec<u8>,
}

impl SlowRequest {
    async fn start(s_addr: std::net::SocketAddr, client: &Arc<rustls::ClientConfig>, body: &[u8]) -> Self {
        let mut tls = connect(s_addr, client).await.unwrap();
        let head = format!(
            "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let half = body.len() / 2;
        tls.write_all(head.as_bytes()).await.unwrap();
        tls.write_all(&body[..half]).await.unwrap();
        tls.flush().await.unwrap();
        Self { tls, rest: body[half..].to_vec() }
    }

    /// Status line and body of the answer.
    async fn finish(mut self) -> (String, String) {
        self.tls.write_all(&self.rest).await.unwrap();
        self.tls.flush().await.unwrap();
        let mut raw = Vec::new();
        // The server closes the connection after answering during shutdown (Connection: close).
        let _ = tokio::time::timeout(Duration::from_secs(20), self.tls.read_to_end(&mut raw)).await;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        (head.lines().next().unwrap_or("").to_string(), body.to_string())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_in_flight_requests_and_closes_idle_connections_after_the_idle_wait() {
    let limits = Limits { shutdown_idle_wait: Duration::from_secs(1), ..test_limits() };
    let s = TestServer::start(limits).await;
    let body = fixture("eviction-create.json");
    let uid = uid_of(&body);

    // An idle kept-alive connection.
    let tls = connect(s.addr, &s.client).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    let idle = tokio::spawn(conn);
    assert_eq!(send(&mut sender, "GET", "/healthz", vec![]).await.unwrap().status, 200);

    // A burst of requests in flight: headers and half a body each.
    let mut slow = Vec::new();
    for _ in 0..12 {
        slow.push(SlowRequest::start(s.addr, &s.client, &body).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    let TestServer { addr, handle, client, certs: _certs } = s;
    handle.shutdown(); // the path SIGTERM takes in `serve`
    tokio::time::sleep(Duration::from_millis(200)).await;
    // No new connections once shutdown started.
    assert!(request(addr, &client, "GET", "/healthz", vec![]).await.is_err());

    let answers = futures::future::join_all(slow.into_iter().map(|r| r.finish())).await;
    for (status, body) in &answers {
        assert_eq!(status, "HTTP/1.1 200 OK", "in-flight request lost: {body}");
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_review(&v, &uid, "in-flight request");
    }
    // The idle kept-alive connection was closed by the server once the idle wait was over.
    tokio::time::timeout(Duration::from_secs(10), idle)
        .await
        .expect("idle connection left open")
        .unwrap()
        .unwrap();
    assert!(handle.stopped().await, "connections were cut off at the grace period");
}

#[test]
fn sigterm_to_the_binary_finishes_a_burst_and_exits_0() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    install_provider();
    let certs = tempfile::tempdir().unwrap();
    generate(&CertsOptions::new(certs.path())).unwrap();
    let mut child = Command::new(BIN)
        .args(["--log-format", "json", "serve", "--listen", "127.0.0.1:0", "--state", SNAPSHOT])
        .args(["--shutdown-delay", "300ms", "--tls-dir"])
        .arg(certs.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let wait_for = |msg: &str| -> serde_json::Value {
        loop {
            let v =
                rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("no log line {msg:?}"));
            if v["message"] == msg {
                return v;
            }
        }
    };
    let started = wait_for("serving admission webhooks over HTTPS");
    let addr: std::net::SocketAddr = started["addr"].as_str().unwrap().parse().unwrap();
    let client = client_config(&certs.path().join("ca.crt"));
    let body = fixture("node-delete.json");
    let uid = uid_of(&body);

    let slow = rt.block_on(async {
        let ok = request(addr, &client, "POST", "/validate", body.clone()).await.unwrap();
        assert_eq!(ok.status, 200);
        let mut slow = Vec::new();
        for _ in 0..8 {
            slow.push(SlowRequest::start(addr, &client, &body).await);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        slow
    });
    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    wait_for("termination signal received");
    let answers = rt.block_on(futures::future::join_all(slow.into_iter().map(|r| r.finish())));
    for (status, body) in &answers {
        assert_eq!(status, "HTTP/1.1 200 OK", "in-flight request lost: {body}");
        assert_review(&serde_json::from_str(body).unwrap(), &uid, "in-flight request");
    }
    let t0 = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "serve did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code.code(), Some(0), "serve exit status after SIGTERM");
}

#[test]
fn a_second_signal_stops_serve_at_once() {
    // Ctrl-C twice under `make run`: the second one does not wait out a 60 s shutdown delay.
    let certs = tempfile::tempdir().unwrap();
    generate(&CertsOptions::new(certs.path())).unwrap();
    let mut child = Command::new(BIN)
        .args(["--log-format", "json", "serve", "--listen", "127.0.0.1:0", "--state", SNAPSHOT])
        .args(["--shutdown-delay", "60s", "--tls-dir"])
        .arg(certs.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut wait_for = |msg: &str| loop {
        let line = lines.next().unwrap_or_else(|| panic!("no log line {msg:?} in {seen:#?}")).unwrap();
        let found = serde_json::from_str::<serde_json::Value>(&line).is_ok_and(|v| v["message"] == msg);
        seen.push(line);
        if found {
            break;
        }
    };
    wait_for("serving admission webhooks over HTTPS");
    let int =
        || assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    int();
    wait_for("termination signal received");
    let t0 = Instant::now();
    int();
    wait_for("second termination signal: stopping now, without the rest of the shutdown delay and grace");
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "serve still waits out its shutdown delay");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code.code(), Some(0));
}

#[tokio::test]
async fn review_command_gives_the_same_response_as_the_server() {
    let s = TestServer::start(test_limits()).await;
    let names = [
        ("eviction-create.json", "validate"),
        ("node-update-cordon.json", "validate"),
        ("node-delete.json", "validate"),
        ("volume-update-replicas.json", "validate"),
        ("setting-update-plain.json", "validate"),
        ("storageclass-create-longhorn-1-replica.json", "validate"),
        ("pod-create-instance-manager-storage-network-mutating.json", "mutate"),
        ("pod-create-instance-manager-mutating.json", "mutate"),
    ];
    for (name, webhook) in names {
        let body = fixture(name);
        let served = request(s.addr, &s.client, "POST", &format!("/{webhook}"), body.clone()).await.unwrap();
        assert_eq!(served.status, 200, "{name}");
        let out = tokio::task::spawn_blocking(move || {
            run::with_stdin(
                Command::new(BIN).args(["review", "--state", SNAPSHOT, "--webhook", webhook]),
                &body,
            )
        })
        .await
        .unwrap();
        let offline: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{name}: review printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr))
        });
        assert_eq!(offline, served.json(), "{name}: review and server differ");
        let allowed = offline["response"]["allowed"].as_bool().unwrap();
        assert_eq!(out.status.code(), Some(if allowed { 0 } else { 1 }), "{name}: review exit status");
    }
}

#[tokio::test]
async fn readyz_is_503_while_the_view_is_not_synced() {
    let view = longhorn_guard::cluster::SharedView::new(longhorn_guard::cluster::ClusterView::new(
        longhorn_guard::cluster::Source::Watch,
    ));
    let admitter = longhorn_guard::admit::Admitter::new(
        view.clone(),
        Arc::new(longhorn_guard::policy::Policy::default()),
        None,
    );
    let TestServer { addr, handle, client, certs: _certs } =
        TestServer::serve_admitter(admitter, Limits::default()).await;
    let r = request(addr, &client, "GET", "/readyz", vec![]).await.unwrap();
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("not synced"));
    assert_eq!(request(addr, &client, "GET", "/healthz", vec![]).await.unwrap().status, 200);
    let m = request(addr, &client, "GET", "/metrics", vec![]).await.unwrap().text();
    assert!(m.contains("longhorn_guard_cluster_view_synced 0"), "{m}");
    view.update(|v| {
        v.touch(std::time::SystemTime::now());
        v.mark_synced()
    });
    assert_eq!(request(addr, &client, "GET", "/readyz", vec![]).await.unwrap().status, 200);
    handle.shutdown();
    assert!(handle.stopped().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_outlives_the_header_timeout_but_slow_headers_do_not() {
    let limits = Limits {
        header_read_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_secs(60),
        ..test_limits()
    };
    let s = TestServer::start(limits).await;
    let body = fixture("eviction-create.json");

    // A kept-alive connection idle for several header timeouts still serves the next request.
    let tls = connect(s.addr, &s.client).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    assert_eq!(send(&mut sender, "POST", "/validate", body.clone()).await.unwrap().status, 200);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let again = send(&mut sender, "POST", "/validate", body.clone()).await.unwrap();
    assert_eq!(again.status, 200, "{}", again.text());

    // Half a request head, then silence: the server closes the connection without answering.
    let mut slow = connect(s.addr, &s.client).await.unwrap();
    slow.write_all(b"POST /validate HTTP/1.1\r\nHost: local").await.unwrap();
    slow.flush().await.unwrap();
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(20), slow.read_to_end(&mut got)).await;
    assert!(closed.is_ok(), "a connection with a stalled request head was kept open");
    assert!(!String::from_utf8_lossy(&got).contains("AdmissionReview"));

    // A connection that never sends anything is closed too.
    let mut silent = connect(s.addr, &s.client).await.unwrap();
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(20), silent.read_to_end(&mut got)).await;
    assert!(closed.is_ok(), "a silent connection was kept open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cuts_requests_still_running_after_the_grace_period() {
    let limits = Limits {
        shutdown_grace: Duration::from_millis(500),
        shutdown_idle_wait: Duration::ZERO,
        ..test_limits()
    };
    let s = TestServer::start(limits).await;
    // Half a body and never the rest: the request cannot finish.
    let mut stuck = SlowRequest::start(s.addr, &s.client, &fixture("eviction-create.json")).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.handle.shutdown();
    assert!(!s.handle.stopped().await, "a request that cannot finish was reported as finished");
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), stuck.tls.read_to_end(&mut got)).await;
    assert!(closed.is_ok(), "the cut connection was left open");
}

#[tokio::test]
async fn unknown_routes_and_methods_get_one_line_naming_the_routes() {
    let s = TestServer::start(test_limits()).await;
    for (method, path, code, want) in [
        ("GET", "/nope", 404, "no such route: GET /nope; longhorn-guard serves POST /validate"),
        ("GET", "/validate", 405, "method not allowed: GET /validate;"),
        ("DELETE", "/metrics", 405, "method not allowed: DELETE /metrics;"),
    ] {
        let r = request(s.addr, &s.client, method, path, vec![]).await.unwrap();
        assert_eq!(r.status, code, "{method} {path}");
        assert!(r.content_type.starts_with("text/plain"), "{method} {path}: {}", r.content_type);
        let text = r.text();
        assert!(text.starts_with(want), "{method} {path}: {text:?}");
        assert_eq!(text.trim_end().lines().count(), 1, "{text:?}");
    }
}

#[tokio::test]
async fn a_body_declared_past_the_limit_gets_413_without_waiting_for_it() {
    // The client declares 100 GB and sends one byte: the answer is the 413, at once, not a
    // 503 at the request deadline.
    let s = TestServer::start(test_limits()).await;
    let mut tls = connect(s.addr, &s.client).await.unwrap();
    let head = "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 99999999999\r\n\r\n{";
    tls.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "closed without an answer");
        got.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&got);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(started.elapsed() < Duration::from_secs(4), "took {:?}", started.elapsed());
}
