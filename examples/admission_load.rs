//! Sends instance-manager eviction AdmissionReviews to a webhook over HTTPS and reports the
//! latency and the answers: the load client of the scale harness (`e2e/scale.sh`).
//!
//! ```text
//! cargo run --example admission_load -- --url https://127.0.0.1:18443/validate --ca certs/ca.crt \
//!     --pod instance-manager-... [--pod ...] [--requests 200] [--rounds 1] [--pause 0s] [--concurrency 4]
//!     [--stagger 0s]
//! ```
//!
//! Each body is the captured eviction (`../shared/fixtures/admission/eviction-create.json`)
//! with the pod name replaced (round-robin over `--pod`) and a unique uid. `--concurrency`
//! kept-alive connections share the requests of a round; before each round the client waits
//! `--pause` (so with a pause longer than the policy's `drain.maxViewAge` and a quiet cluster,
//! every eviction is confirmed). With `--stagger D`, connection `i` starts sending `i × D` into
//! each round (overlapping, not simultaneous, arrivals). Prints one JSON line on stdout: `requests`, `allowed`,
//! `denied`, `could_not_confirm` (denials saying "could not confirm"), `errors` (no
//! AdmissionReview answer), `p50_ms`, `p99_ms`, `max_ms`. Exit status: 0 all answered,
//! 1 some requests got no answer, 2 bad arguments or no connection.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};

const FIXTURE: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/admission/eviction-create.json");

#[derive(Parser, Clone)]
#[command(about = "Send eviction AdmissionReviews over HTTPS; report latency percentiles and answers")]
struct Args {
    /// Webhook URL, e.g. https://127.0.0.1:18443/validate.
    #[arg(long)]
    url: hyper::Uri,
    /// CA certificate (PEM) the server's certificate chains to.
    #[arg(long, value_name = "FILE")]
    ca: PathBuf,
    /// Pod name to evict (namespace longhorn-system); repeat for round-robin.
    #[arg(long = "pod", required = true)]
    pods: Vec<String>,
    /// Eviction AdmissionReview to send, with the pod name replaced.
    #[arg(long, value_name = "FILE", default_value = FIXTURE)]
    fixture: PathBuf,
    /// Requests per round.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    requests: u32,
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    rounds: u32,
    /// Wait before each round.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    pause: Duration,
    /// Kept-alive connections, each with one request in flight.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
    concurrency: u16,
    /// Connection `i` starts sending `i` times this long into each round.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    stagger: Duration,
    /// Give up on one request after this long (counted as an error).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

/// What one request got back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Allowed,
    Denied,
    /// A denial because the webhook could not confirm its view.
    CouldNotConfirm,
    /// No AdmissionReview answer (HTTP error, bad body, connection failure, timeout).
    Error,
}

/// Classifies an HTTP answer by its AdmissionReview `response.allowed` and status message.
fn classify(status: u16, body: &[u8]) -> Outcome {
    if status != 200 {
        return Outcome::Error;
    }
    let Ok(review) = serde_json::from_slice::<Value>(body) else { return Outcome::Error };
    let response = &review["response"];
    match response["allowed"].as_bool() {
        Some(true) => Outcome::Allowed,
        Some(false) => {
            let message = response["status"]["message"].as_str().unwrap_or_default();
            if message.contains("could not confirm") {
                Outcome::CouldNotConfirm
            } else {
                Outcome::Denied
            }
        }
        None => Outcome::Error,
    }
}

/// The value at percentile `p` (0..=100) of ascending `sorted` by the nearest-rank method;
/// `None` when empty.
fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p.clamp(0.0, 100.0) / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// The fixture with pod `pod` and request uid `uid`.
fn eviction_body(template: &Value, pod: &str, uid: &str) -> Vec<u8> {
    let mut review = template.clone();
    review["request"]["uid"] = json!(uid);
    review["request"]["name"] = json!(pod);
    review["request"]["object"]["metadata"]["name"] = json!(pod);
    serde_json::to_vec(&review).unwrap_or_default()
}

#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    allowed: u64,
    denied: u64,
    could_not_confirm: u64,
    errors: u64,
    first_error: Option<String>,
}

impl Tally {
    fn record(&mut self, outcome: Outcome, latency: Duration) {
        match outcome {
            Outcome::Allowed => self.allowed += 1,
            Outcome::Denied => self.denied += 1,
            Outcome::CouldNotConfirm => self.could_not_confirm += 1,
            Outcome::Error => self.errors += 1,
        }
        if outcome != Outcome::Error {
            self.latencies.push(latency);
        }
    }

    fn summary(mut self) -> Value {
        self.latencies.sort();
        let ms = |d: Option<Duration>| d.map(|d| (d.as_secs_f64() * 1e5).round() / 100.0);
        json!({
            "requests": self.allowed + self.denied + self.could_not_confirm + self.errors,
            "allowed": self.allowed, "denied": self.denied,
            "could_not_confirm": self.could_not_confirm, "errors": self.errors,
            "p50_ms": ms(percentile(&self.latencies, 50.0)),
            "p99_ms": ms(percentile(&self.latencies, 99.0)),
            "max_ms": ms(self.latencies.last().copied()),
            "first_error": self.first_error,
        })
    }
}

struct Target {
    tls: tokio_rustls::TlsConnector,
    addr: String,
    name: ServerName<'static>,
    path: String,
}

impl Target {
    fn new(args: &Args) -> Result<Self, String> {
        let host = args.url.host().ok_or("the URL has no host")?.trim_matches(['[', ']']).to_string();
        let port = args.url.port_u16().unwrap_or(443);
        let pem = std::fs::read(&args.ca).map_err(|e| format!("{}: {e}", args.ca.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| format!("{}: {e}", args.ca.display()))?;
            roots.add(cert).map_err(|e| format!("{}: {e}", args.ca.display()))?;
        }
        let config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots)
                .with_no_client_auth();
        let name = ServerName::try_from(host.clone()).map_err(|e| format!("{host}: {e}"))?;
        let path = args.url.path_and_query().map_or("/", |p| p.as_str()).to_string();
        let addr = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
        Ok(Self { tls: tokio_rustls::TlsConnector::from(Arc::new(config)), addr, name, path })
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, String> {
        let tcp = tokio::net::TcpStream::connect(&self.addr)
            .await
            .map_err(|e| format!("connect {}: {e}", self.addr))?;
        let _ = tcp.set_nodelay(true);
        let tls = self.tls.connect(self.name.clone(), tcp).await.map_err(|e| format!("TLS: {e}"))?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| format!("HTTP: {e}"))?;
        tokio::spawn(conn);
        Ok(sender)
    }

    async fn post(
        &self,
        sender: &mut SendRequest<Full<Bytes>>,
        body: Vec<u8>,
    ) -> Result<(u16, Bytes), String> {
        let req = hyper::Request::post(self.path.as_str())
            .header(hyper::header::HOST, "localhost")
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        sender.ready().await.map_err(|e| format!("connection: {e}"))?;
        let resp = sender.send_request(req).await.map_err(|e| format!("send: {e}"))?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.map_err(|e| format!("body: {e}"))?.to_bytes();
        Ok((status, body))
    }
}

/// One connection's share of a round: takes request numbers from `next` until `total`.
async fn worker(
    target: Arc<Target>,
    template: Arc<Value>,
    args: Arc<Args>,
    round: u32,
    next: Arc<AtomicUsize>,
    tally: Arc<Mutex<Tally>>,
    mut sender: Option<SendRequest<Full<Bytes>>>,
) -> Option<SendRequest<Full<Bytes>>> {
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= args.requests as usize {
            return sender;
        }
        let pod = &args.pods[i % args.pods.len()];
        let body = eviction_body(&template, pod, &format!("scale-{round}-{i}"));
        let started = Instant::now();
        let result = async {
            let s = match sender.as_mut() {
                Some(s) => s,
                None => sender.insert(target.connect().await?),
            };
            target.post(s, body).await
        };
        let (outcome, error) = match tokio::time::timeout(args.timeout, result).await {
            Ok(Ok((status, body))) => {
                let o = classify(status, &body);
                (
                    o,
                    (o == Outcome::Error)
                        .then(|| format!("HTTP {status}: {}", String::from_utf8_lossy(&body))),
                )
            }
            Ok(Err(e)) => (Outcome::Error, Some(e)),
            Err(_) => (Outcome::Error, Some(format!("no answer within {:?}", args.timeout))),
        };
        if outcome == Outcome::Error {
            sender = None; // reconnect for the next request
        }
        if let Ok(mut t) = tally.lock() {
            t.record(outcome, started.elapsed());
            if t.first_error.is_none() {
                t.first_error = error;
            }
        }
    }
}

async fn run(args: Args) -> Result<Value, String> {
    let target = Arc::new(Target::new(&args)?);
    let text = std::fs::read(&args.fixture).map_err(|e| format!("{}: {e}", args.fixture.display()))?;
    let template: Value =
        serde_json::from_slice(&text).map_err(|e| format!("{}: not JSON: {e}", args.fixture.display()))?;
    if !template["request"].is_object() {
        return Err(format!("{}: not an AdmissionReview request", args.fixture.display()));
    }
    let mut senders: Vec<Option<SendRequest<Full<Bytes>>>> = (0..args.concurrency).map(|_| None).collect();
    let (template, args) = (Arc::new(template), Arc::new(args));
    let tally = Arc::new(Mutex::new(Tally::default()));
    for round in 0..args.rounds {
        if !args.pause.is_zero() {
            tokio::time::sleep(args.pause).await;
        }
        // Connect outside the timed requests, after the pause: a server closes a connection
        // that sends nothing for a while after connecting (longhorn-guard: --header-read-timeout).
        for sender in senders.iter_mut() {
            if sender.as_ref().is_none_or(|s| s.is_closed()) {
                *sender = Some(target.connect().await?);
            }
        }
        let next = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = senders
            .drain(..)
            .enumerate()
            .map(|(i, s)| {
                let (target, template, args, next, tally) =
                    (target.clone(), template.clone(), args.clone(), next.clone(), tally.clone());
                let start_after = args.stagger.saturating_mul(i as u32);
                tokio::spawn(async move {
                    tokio::time::sleep(start_after).await;
                    worker(target, template, args, round, next, tally, s).await
                })
            })
            .collect();
        for task in tasks {
            senders.push(task.await.unwrap_or(None));
        }
    }
    let tally = std::mem::take(&mut *tally.lock().map_err(|_| "a worker panicked".to_string())?);
    Ok(tally.summary())
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(summary) => {
            println!("{summary}");
            if summary["errors"].as_u64() == Some(0) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("admission_load: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let d = ms(&(1..=100).collect::<Vec<_>>());
        assert_eq!(percentile(&d, 50.0), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&d, 99.0), Some(Duration::from_millis(99)));
        assert_eq!(percentile(&d, 100.0), Some(Duration::from_millis(100)));
        assert_eq!(percentile(&d, 0.0), Some(Duration::from_millis(1)));
        let few = ms(&[3, 7, 20]);
        assert_eq!(percentile(&few, 50.0), Some(Duration::from_millis(7)));
        assert_eq!(percentile(&few, 99.0), Some(Duration::from_millis(20)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn answers_are_classified_by_allowed_and_message() {
        let allow = br#"{"response":{"uid":"u","allowed":true}}"#;
        let deny = br#"{"response":{"allowed":false,"status":{"code":429,"message":"draining n would strand 2 volumes"}}}"#;
        let unconfirmed = br#"{"response":{"allowed":false,"status":{"code":429,"message":"longhorn-guard: could not confirm that draining s00 is safe"}}}"#;
        assert_eq!(classify(200, allow), Outcome::Allowed);
        assert_eq!(classify(200, deny), Outcome::Denied);
        assert_eq!(classify(200, unconfirmed), Outcome::CouldNotConfirm);
        assert_eq!(classify(500, allow), Outcome::Error);
        assert_eq!(classify(200, b"not json"), Outcome::Error);
        assert_eq!(classify(200, br#"{"response":{}}"#), Outcome::Error);
    }

    #[test]
    fn the_body_is_the_fixture_with_pod_and_uid_replaced() {
        let template: Value = serde_json::from_slice(&std::fs::read(FIXTURE).unwrap()).unwrap();
        let body: Value =
            serde_json::from_slice(&eviction_body(&template, "instance-manager-x", "u-1")).unwrap();
        assert_eq!(body["request"]["name"], "instance-manager-x");
        assert_eq!(body["request"]["object"]["metadata"]["name"], "instance-manager-x");
        assert_eq!(body["request"]["uid"], "u-1");
        assert_eq!(body["request"]["namespace"], template["request"]["namespace"]);
        assert_eq!(body["request"]["subResource"], "eviction");
    }

    #[test]
    fn the_summary_counts_every_outcome_and_times_only_answers() {
        let mut t = Tally::default();
        t.record(Outcome::Allowed, Duration::from_millis(2));
        t.record(Outcome::CouldNotConfirm, Duration::from_millis(7000));
        t.record(Outcome::Error, Duration::from_millis(30_000));
        let s = t.summary();
        assert_eq!(s["requests"], 3);
        assert_eq!(s["could_not_confirm"], 1);
        assert_eq!(s["errors"], 1);
        assert_eq!(s["max_ms"], 7000.0);
        assert_eq!(s["p50_ms"], 2.0);
    }
}
