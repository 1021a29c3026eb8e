//! The server under rollouts and abuse, over real TLS on 127.0.0.1: a shutdown under
//! keep-alive load loses no request, the connection cap keeps a normal client served while
//! idle connections pile up, out of file descriptors silent connections are shed before
//! served ones, `--client-ca` admits only that CA's clients, and a huge request
//! field cannot make a huge log line.

use crate::support;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use longhorn_guard::server::Limits;
use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_longhorn-guard");

/// Outcomes seen by the keep-alive clients of [`keep_alive_client`].
#[derive(Default)]
struct Tally {
    answered: AtomicUsize,
    /// Answered after the test asked the server to shut down.
    answered_after_shutdown: AtomicUsize,
    /// Connections made after the test asked the server to shut down.
    dialled_after_shutdown: AtomicUsize,
    /// Requests written on an open connection that got no answer.
    lost: Mutex<Vec<String>>,
    /// Connections refused (or reset before the handshake) while the server still accepted.
    refused_while_accepting: Mutex<Vec<String>>,
}

/// Sends reviews back to back over one kept-alive connection, re-dialling whenever the
/// server answers `Connection: close`; returns once the server refuses new connections.
async fn keep_alive_client(
    s: Arc<(std::net::SocketAddr, Arc<rustls::ClientConfig>)>,
    handle_accepting: impl Fn() -> bool,
    shutdown_sent: Arc<AtomicBool>,
    tally: Arc<Tally>,
) {
    let body = fixture("eviction-create.json");
    let uid = uid_of(&body);
    loop {
        let dialled_late = shutdown_sent.load(Ordering::SeqCst);
        let tls = match connect(s.0, &s.1).await {
            Ok(tls) => tls,
            Err(e) => {
                if handle_accepting() {
                    tally.refused_while_accepting.lock().unwrap().push(e.to_string());
                    continue;
                }
                return;
            }
        };
        if dialled_late {
            tally.dialled_after_shutdown.fetch_add(1, Ordering::Relaxed);
        }
        let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await else {
            continue;
        };
        tokio::spawn(conn);
        let mut n = 0;
        loop {
            n += 1;
            // Nothing is written until the connection is ready; a connection the server closed
            // before this point lost nothing.
            if sender.ready().await.is_err() {
                break;
            }
            let after_shutdown = shutdown_sent.load(Ordering::SeqCst);
            let req = hyper::Request::post("/validate")
                .header("host", "localhost")
                .header("content-type", "application/json")
                .body(Full::new(axum::body::Bytes::from(body.clone())))
                .unwrap();
            let resp = match sender.send_request(req).await {
                Ok(r) => r,
                Err(e) => {
                    let when = if !after_shutdown {
                        "before shutdown"
                    } else if handle_accepting() {
                        "during the delay"
                    } else {
                        "after the delay"
                    };
                    tally.lost.lock().unwrap().push(format!("{e} ({when}, request {n} on its connection)"));
                    break;
                }
            };
            let close = resp.headers().get("connection").is_some_and(|v| v == "close");
            let status = resp.status();
            let got = resp.into_body().collect().await.map(|b| b.to_bytes());
            match got {
                Ok(b) if status == 200 && String::from_utf8_lossy(&b).contains(&uid) => {
                    tally.answered.fetch_add(1, Ordering::Relaxed);
                    if after_shutdown {
                        tally.answered_after_shutdown.fetch_add(1, Ordering::Relaxed);
                    }
                }
                other => tally.lost.lock().unwrap().push(format!("HTTP {status}: {other:?}")),
            }
            if close {
                break;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_under_keep_alive_load_answers_every_request_and_refuses_none_during_the_delay() {
    let limits = Limits {
        shutdown_delay: Duration::from_millis(1500),
        shutdown_grace: Duration::from_secs(10),
        ..test_limits()
    };
    let s = TestServer::start(limits).await;
    let TestServer { addr, handle, client, certs: _certs } = s;
    let handle = Arc::new(handle);
    let tally = Arc::new(Tally::default());
    let shutdown_sent = Arc::new(AtomicBool::new(false));
    let target = Arc::new((addr, client.clone()));
    let mut clients = Vec::new();
    for _ in 0..16 {
        let h = handle.clone();
        clients.push(tokio::spawn(keep_alive_client(
            target.clone(),
            move || h.is_accepting(),
            shutdown_sent.clone(),
            tally.clone(),
        )));
    }
    while tally.answered.load(Ordering::Relaxed) < 300 {
        assert!(tally.lost.lock().unwrap().is_empty(), "{:?}", tally.lost.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    shutdown_sent.store(true, Ordering::SeqCst);
    handle.shutdown(); // the path SIGTERM takes in `serve`
                       // /readyz is 503 from the first request after the signal, while requests are still served.
    let ready = request(addr, &client, "GET", "/readyz", vec![]).await.unwrap();
    assert_eq!(ready.status, 503, "{}", ready.text());
    for c in clients {
        tokio::time::timeout(Duration::from_secs(60), c)
            .await
            .expect("a client never saw the server stop")
            .unwrap();
    }
    let handle = Arc::into_inner(handle).unwrap();
    assert!(handle.stopped().await, "connections were cut at the grace period");

    let lost = tally.lost.lock().unwrap();
    assert!(lost.is_empty(), "{} requests written and not answered: {lost:?}", lost.len());
    let refused = tally.refused_while_accepting.lock().unwrap();
    assert!(
        refused.is_empty(),
        "{} connections refused during the shutdown delay: {refused:?}",
        refused.len()
    );
    // The delay really kept serving, over new connections too (each client re-dialled after
    // its Connection: close).
    let late = tally.answered_after_shutdown.load(Ordering::Relaxed);
    let redialled = tally.dialled_after_shutdown.load(Ordering::Relaxed);
    assert!(late >= 16 && redialled >= 16, "{late} answered and {redialled} new connections after shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_cap_idle_connections_make_room_for_a_working_client() {
    let limits = Limits { max_connections: 32, ..test_limits() };
    let s = TestServer::start(limits).await;
    let body = fixture("node-delete.json");

    // 200 idle TLS connections: handshake, then silence.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(connect(s.addr, &s.client).await.unwrap());
    }
    // A normal client: new connections, and one kept-alive connection.
    for i in 0..20 {
        let r = request(s.addr, &s.client, "POST", "/validate", body.clone()).await;
        assert_eq!(r.as_ref().map(|r| r.status), Ok(200), "new-connection request {i}: {r:?}");
    }
    let tls = connect(s.addr, &s.client).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    for i in 0..20 {
        let r = send(&mut sender, "POST", "/validate", body.clone()).await;
        assert_eq!(r.as_ref().map(|r| r.status), Ok(200), "keep-alive request {i}: {r:?}");
    }

    let m = request(s.addr, &s.client, "GET", "/metrics", vec![]).await.unwrap().text();
    let value = |name: &str| -> f64 {
        m.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
            .unwrap_or_else(|| panic!("{name} missing: {m}"))
    };
    assert!(value("longhorn_guard_connections_open ") <= 32.0, "{m}");
    assert!(value("longhorn_guard_connections_evicted_total ") >= 168.0, "{m}");
    assert_eq!(value("longhorn_guard_accept_errors_total "), 0.0, "{m}");
    drop(idle);
}

/// A client certificate (clientAuth) signed by the CA in `ca_dir`, and its key.
fn client_cert(ca_dir: &std::path::Path) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let ca_pem = std::fs::read_to_string(ca_dir.join("ca.crt")).unwrap();
    let ca_key = KeyPair::from_pem(&std::fs::read_to_string(ca_dir.join("ca.key")).unwrap()).unwrap();
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, &ca_key).unwrap();
    let mut params = CertificateParams::new(vec!["kube-apiserver".to_string()]).unwrap();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
    (vec![cert.der().clone()], key)
}

fn with_client_cert(
    ca_pem: &std::path::Path,
    cert: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca_pem).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let builder =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
    let mut cfg = match cert {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).unwrap(),
        None => builder.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_ca_serves_that_cas_clients_and_refuses_others() {
    install_provider();
    let apiserver_ca = tempfile::tempdir().unwrap();
    longhorn_guard::certs::generate(&longhorn_guard::certs::CertsOptions::new(apiserver_ca.path())).unwrap();
    let other_ca = tempfile::tempdir().unwrap();
    longhorn_guard::certs::generate(&longhorn_guard::certs::CertsOptions::new(other_ca.path())).unwrap();
    let limits = Limits { client_ca: Some(apiserver_ca.path().join("ca.crt")), ..test_limits() };
    let s = TestServer::start(limits).await;
    let serving_ca = s.certs.path().join("ca.crt");
    let body = fixture("eviction-create.json");

    let trusted = with_client_cert(&serving_ca, Some(client_cert(apiserver_ca.path())));
    let r = request(s.addr, &trusted, "POST", "/validate", body.clone()).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_review(&r.json(), &uid_of(&body), "client with the CA's certificate");

    for (what, cfg) in [
        ("no client certificate", with_client_cert(&serving_ca, None)),
        ("a certificate from another CA", with_client_cert(&serving_ca, Some(client_cert(other_ca.path())))),
    ] {
        let r = request(s.addr, &cfg, "POST", "/validate", body.clone()).await;
        assert!(r.is_err(), "{what} was served: {r:?}");
    }
    // The server counts a refused handshake once its accept fails, which can be after the
    // client has read the refusal (TLS 1.3 refuses a client certificate after the client's
    // Finished): the count is read until it arrives.
    let t0 = std::time::Instant::now();
    loop {
        let m = request(s.addr, &trusted, "GET", "/metrics", vec![]).await.unwrap().text();
        if m.contains("longhorn_guard_tls_handshake_errors_total 2") {
            break;
        }
        assert!(t0.elapsed() < WAIT, "{m}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn a_one_mebibyte_request_field_makes_no_log_line_over_2_kb() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    install_provider();
    let certs = tempfile::tempdir().unwrap();
    longhorn_guard::certs::generate(&longhorn_guard::certs::CertsOptions::new(certs.path())).unwrap();
    let mut child = Command::new(BIN)
        .args(["--log-format", "json", "--log-level", "debug", "serve", "--listen", "127.0.0.1:0"])
        .args(["--state", SNAPSHOT, "--shutdown-delay", "0s", "--tls-dir"])
        .arg(certs.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let next = |lines: &mut Vec<String>| {
        let l = rx.recv_timeout(Duration::from_secs(60)).expect("serve stopped logging");
        lines.push(l.clone());
        l
    };
    let addr: std::net::SocketAddr = loop {
        let l = next(&mut lines);
        if l.contains("serving admission webhooks over HTTPS") {
            let v: serde_json::Value = serde_json::from_str(&l).unwrap();
            break v["addr"].as_str().unwrap().parse().unwrap();
        }
    };
    let client = client_config(&certs.path().join("ca.crt"));
    let huge = "u".repeat(1 << 20);
    // A 1 MiB uid, name and user on a request that is decided (and logged), and a 1 MiB
    // apiVersion on one that is rejected (and logged with its reason).
    let mut decided: serde_json::Value = serde_json::from_slice(&fixture("eviction-create.json")).unwrap();
    decided["request"]["uid"] = huge.clone().into();
    decided["request"]["name"] = huge.clone().into();
    decided["request"]["userInfo"]["username"] = huge.clone().into();
    decided["request"]["resource"]["resource"] = huge.clone().into();
    let mut rejected = decided.clone();
    rejected["apiVersion"] = huge.clone().into();
    rt.block_on(async {
        let r =
            request(addr, &client, "POST", "/validate", serde_json::to_vec(&decided).unwrap()).await.unwrap();
        assert_eq!(r.status, 200);
        let r = request(addr, &client, "POST", "/validate", serde_json::to_vec(&rejected).unwrap())
            .await
            .unwrap();
        assert_eq!(r.status, 400);
        let m = request(addr, &client, "GET", "/metrics", vec![]).await.unwrap().text();
        assert!(!m.contains("uuuuuuuu"), "a request string became a label value");
        assert!(m.contains("resource=\"other\""), "{m}");
    });
    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(5)) {
        lines.push(l);
    }
    let logged: Vec<&String> = lines.iter().filter(|l| l.contains("uuuuuuuu")).collect();
    assert!(logged.len() >= 2, "the requests were not logged: {lines:?}");
    for l in &logged {
        assert!(l.len() < 2048, "a {}-byte log line: {}…", l.len(), &l[..300]);
        assert!(l.contains("…[+"), "cut without a marker: {}", &l[..300]);
    }
}

#[test]
fn an_unusable_client_ca_is_named_as_such() {
    let certs = tempfile::tempdir().unwrap();
    longhorn_guard::certs::generate(&longhorn_guard::certs::CertsOptions::new(certs.path())).unwrap();
    let garbage = certs.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").unwrap();
    for ca in [garbage.clone(), certs.path().join("missing.pem")] {
        let out = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--state", SNAPSHOT, "--tls-dir"])
            .arg(certs.path())
            .arg("--client-ca")
            .arg(&ca)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--client-ca: "), "{err}");
        assert!(err.contains(&ca.display().to_string()), "{err}");
        assert!(!err.contains("serving certificate"), "{err}");
    }
}

/// Out of file descriptors (`RLIMIT_NOFILE` 128), with 168 TCP connections that never send a
/// TLS hello: the server frees descriptors for new connections by closing those silent ones,
/// never a connection that has served a request. One client sends a review every 20 ms; a
/// second connection, like the spare one in an API server's pool, served a review and has been
/// idle for 1.5 s (longer than any silent one has waited) when the flood starts.
#[test]
fn out_of_descriptors_the_server_sheds_silent_connections_not_served_ones() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    install_provider();
    let certs = tempfile::tempdir().unwrap();
    longhorn_guard::certs::generate(&longhorn_guard::certs::CertsOptions::new(certs.path())).unwrap();
    let mut child = Command::new("prlimit")
        .args(["--nofile=128:128", "--", BIN, "--log-format", "json", "--log-level", "debug", "serve"])
        .args(["--listen", "127.0.0.1:0", "--state", SNAPSHOT, "--shutdown-delay", "0s"])
        .args(["--header-read-timeout", "60s", "--tls-dir"])
        .arg(certs.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("prlimit (util-linux) runs the server with RLIMIT_NOFILE 128");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr: std::net::SocketAddr = loop {
        let l = lines.next().expect("serve exited").unwrap();
        if l.contains("serving admission webhooks over HTTPS") {
            let v: serde_json::Value = serde_json::from_str(&l).unwrap();
            break v["addr"].as_str().unwrap().parse().unwrap();
        }
    };
    // Keep the pipe drained (the server must never block on it); keep what it closed and why.
    let log = std::thread::spawn(move || {
        lines.map_while(Result::ok).filter(|l| l.contains("closing")).take(400).collect::<Vec<_>>()
    });
    let cfg = client_config(&certs.path().join("ca.crt"));
    let body = fixture("eviction-create.json");
    let failures = rt.block_on(async {
        let open = |cfg: Arc<rustls::ClientConfig>| async move {
            let tls = connect(addr, &cfg).await.unwrap();
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
            tokio::spawn(conn);
            sender
        };
        let (mut busy, mut spare) = (open(cfg.clone()).await, open(cfg.clone()).await);
        assert_eq!(send(&mut spare, "POST", "/validate", body.clone()).await.unwrap().status, 200);
        let mut failures = Vec::new();
        // Reviews every 20 ms: 1.5 s before the flood, 2.5 s during it.
        let mut flood = None;
        for i in 0..200 {
            if i == 75 {
                flood = Some(tokio::spawn(async move {
                    let mut silent = Vec::new();
                    for _ in 0..168 {
                        silent.push(tokio::net::TcpStream::connect(addr).await.unwrap());
                    }
                    silent // held open until the test ends
                }));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            match send(&mut busy, "POST", "/validate", body.clone()).await {
                Ok(r) if r.status == 200 => {}
                Ok(r) => failures.push(format!("review {i}: {} {}", r.status, r.text())),
                Err(e) => {
                    failures.push(format!("review {i}: {e}"));
                    break;
                }
            }
        }
        match send(&mut spare, "POST", "/validate", body.clone()).await {
            Ok(r) if r.status == 200 => {}
            Ok(r) => failures.push(format!("spare connection: {} {}", r.status, r.text())),
            Err(e) => failures.push(format!("spare connection: {e}")),
        }
        drop(flood.unwrap().await.unwrap());
        failures
    });
    let _ = child.kill();
    let _ = child.wait();
    let log = log.join().unwrap();
    let shed = log.iter().filter(|l| l.contains("connection cap reached: closing")).count();
    assert!(shed > 0, "the server never ran out of descriptors: {log:#?}");
    assert!(failures.is_empty(), "a served connection was closed: {failures:?}\nserver: {log:#?}");
}
