//! Manual measurement (ignored in CI): the `serve` binary with thousands of idle TLS
//! connections held open. Prints resident memory and a normal client's latency; asserts
//! nothing about time. Run with
//! `cargo test --release --test server_load -- --ignored --nocapture` (docs/server.md).
//! `LOAD_IDLE` (default 2000) idle connections, `LOAD_ATTEMPTS` (default 10000).

use crate::support;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_longhorn-guard");

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn serve(certs: &std::path::Path, max_connections: usize) -> (Child, std::net::SocketAddr) {
    let mut child = Command::new(BIN)
        .args(["--log-format", "json", "serve", "--listen", "127.0.0.1:0", "--state", SNAPSHOT])
        .args(["--shutdown-delay", "0s", "--header-read-timeout", "120s"])
        .args(["--max-connections", &max_connections.to_string(), "--tls-dir"])
        .arg(certs)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("serve exited").unwrap();
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
            if v["message"] == "serving admission webhooks over HTTPS" {
                break v["addr"].as_str().unwrap().parse().unwrap();
            }
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe; count accept warnings.
    std::thread::spawn(move || {
        let mut accept_failed = 0;
        for line in lines.map_while(Result::ok) {
            if line.contains("accept failed") {
                accept_failed += 1;
                eprintln!("server: {line}");
            }
        }
        eprintln!("server log: {accept_failed} \"accept failed\" lines");
    });
    (child, addr)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

async fn normal_client(addr: std::net::SocketAddr, client: &std::sync::Arc<rustls::ClientConfig>) {
    let body = fixture("eviction-create.json");
    let mut fresh = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        let r = request(addr, client, "POST", "/validate", body.clone()).await.unwrap();
        assert_eq!(r.status, 200);
        fresh.push(t.elapsed());
    }
    let tls = connect(addr, client).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    let mut kept = Vec::new();
    for _ in 0..300 {
        let t = Instant::now();
        assert_eq!(send(&mut sender, "POST", "/validate", body.clone()).await.unwrap().status, 200);
        kept.push(t.elapsed());
    }
    for (what, mut v) in [("new connection", fresh), ("keep-alive", kept)] {
        v.sort();
        println!(
            "  normal client, {what}: p50 {:?} p99 {:?} max {:?} ({} requests)",
            percentile(&v, 0.5),
            percentile(&v, 0.99),
            v[v.len() - 1],
            v.len()
        );
    }
}

async fn hold(
    addr: std::net::SocketAddr,
    client: &std::sync::Arc<rustls::ClientConfig>,
    n: usize,
) -> Vec<impl Sized> {
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        // Handshake done, then silence; a connection the server closed stays counted.
        if let Ok(c) = tokio::time::timeout(Duration::from_secs(10), connect(addr, client)).await {
            held.push(c);
        }
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "manual measurement; see docs/server.md"]
async fn idle_connections_memory_and_normal_client_latency() {
    install_provider();
    let idle = env_usize("LOAD_IDLE", 2000);
    let attempts = env_usize("LOAD_ATTEMPTS", 10_000);
    let certs = tempfile::tempdir().unwrap();
    longhorn_guard::certs::generate(&longhorn_guard::certs::CertsOptions::new(certs.path())).unwrap();
    let client = client_config(&certs.path().join("ca.crt"));
    let mut fresh = (*client).clone();
    fresh.resumption = rustls::client::Resumption::disabled();
    let fresh = std::sync::Arc::new(fresh);

    // 1. Memory per idle TLS connection: a cap above the count, so all stay open.
    let (mut child, addr) = serve(certs.path(), idle + 100);
    normal_client(addr, &client).await; // warm up
    let before = rss_kib(child.id());
    let held = hold(addr, &fresh, idle).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib(child.id());
    println!(
        "uncapped: {} idle TLS connections: RSS {before} KiB -> {after} KiB, {:.1} KiB per connection",
        held.len(),
        (after - before) as f64 / held.len() as f64
    );
    drop(held);
    child.kill().unwrap();
    let _ = child.wait();

    // 2. The default cap with `idle` connections held, then `attempts` more.
    let cap = longhorn_guard::server::Limits::default().max_connections as usize;
    let (mut child, addr) = serve(certs.path(), cap);
    let held = hold(addr, &fresh, idle).await;
    println!("cap {cap}: {} idle connections opened; RSS {} KiB", held.len(), rss_kib(child.id()));
    normal_client(addr, &client).await;
    let more = hold(addr, &fresh, attempts).await;
    println!(
        "cap {cap}: after {attempts} more connection attempts ({} handshakes completed): RSS {} KiB",
        more.len(),
        rss_kib(child.id())
    );
    normal_client(addr, &client).await;
    drop((held, more));
    child.kill().unwrap();
    let _ = child.wait();
}
