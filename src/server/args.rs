//! The arguments of `longhorn-guard serve`: each knob with its default and the reason for it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The largest `--max-body-bytes`: far past any AdmissionReview (docs/server.md).
pub const MAX_BODY_BYTES_LIMIT: u64 = 64 * 1024 * 1024;

/// Arguments of `longhorn-guard serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Directory holding tls.crt and tls.key (a Kubernetes TLS Secret volume works as is).
    #[arg(long, value_name = "DIR", env = "LONGHORN_GUARD_TLS_DIR", required_unless_present_all = ["tls_cert", "tls_key"], conflicts_with_all = ["tls_cert", "tls_key"])]
    pub tls_dir: Option<PathBuf>,
    /// Serving certificate (PEM, leaf first), instead of --tls-dir; needs --tls-key.
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key of --tls-cert (PEM), instead of --tls-dir; needs --tls-cert.
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Address to listen on (IP and port: `0.0.0.0:8443`, `[::]:8443`).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8443", value_parser = listen_addr, env = "LONGHORN_GUARD_LISTEN")]
    pub listen: SocketAddr,
    /// Cluster snapshot file; without it the view is filled from live watches.
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_STATE")]
    pub state: Option<PathBuf>,
    /// Policy file (YAML); defaults apply when absent.
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_POLICY")]
    pub policy: Option<PathBuf>,
    #[command(flatten)]
    pub limits: Limits,
    /// How often the `check cluster` findings on `/metrics` are refreshed from the cluster
    /// (paginated reads, no watch). 5m keeps 100,000 snapshots' worth of LISTs rare; 0s turns the
    /// checks off. With --state they are computed once from the snapshot.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = duration, env = "LONGHORN_GUARD_CHECK_INTERVAL")]
    pub check_interval: Duration,
    /// How often each watched kind is probed with a consistent read (selecting no object), so that a quiet
    /// view is proven current by its own watch's BOOKMARKs instead of re-read before an allow
    /// (docs/drain.md, "Probes"). 1s keeps the proven age under 4 s, inside the default
    /// drain.maxViewAge of 5 s, for one small read per kind per second; 0s turns probes off
    /// (every allow on a quiet view is then confirmed by reads). Watch mode only.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = probe_interval, env = "LONGHORN_GUARD_FRESHNESS_PROBE_INTERVAL")]
    pub freshness_probe_interval: Duration,
    /// How each watched kind is listed at the start and after a lost watch: `plain` (one LIST,
    /// read object by object as it arrives), `streaming` (a watch with sendInitialEvents) or
    /// `paged`. Default plain: it costs the API server the least CPU where it serves consistent
    /// reads from its watch cache (Kubernetes 1.31+ with etcd 3.5.13+ / 3.4.31+; elsewhere a
    /// plain LIST is one read from etcd: use streaming), docs/scale.md "How a start lists". A
    /// plain LIST cut off after it began answering (an API server's request time-out) or with
    /// no object within 30 s falls back to streaming, a refused streaming list to pages, for
    /// good. Watch mode only.
    #[arg(long, value_name = "WAY", default_value_t, value_enum, env = "LONGHORN_GUARD_LISTS")]
    pub lists: crate::cluster::watch::ListWay,
    /// Most confirmations (re-reads of a node's state before an allow on a stale view) reading
    /// from the API server at once; more wait their turn within their deadline, and requests
    /// for a node whose confirmation is still waiting share it. Default 2: one at 10,000
    /// volumes makes the API server serialise about 12 MB and holds 20-28 MiB here; run all at
    /// once, parallel drains slow each other down (6 at once: p50 1.4 s against 0.6 s queued)
    /// and push memory towards the limit.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..), env = "LONGHORN_GUARD_MAX_CONFIRMATIONS")]
    pub max_confirmations: u32,
    /// The longest one confirmation may take before the eviction gets its 429 "could not
    /// confirm" (inside --request-timeout in any case). Default 3s: a confirmation at 10,000
    /// volumes takes about 0.6 s, and an API server that cannot complete one (its etcd member
    /// cut off) then costs kubectl drain 3 s a retry, far from the API server's webhook timeout.
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = positive_duration, env = "LONGHORN_GUARD_CONFIRM_TIMEOUT")]
    pub confirm_timeout: Duration,
}

/// Limits and timings of the server, and who may connect: the flags of `serve` that
/// [`super::Server::bind`] takes.
#[derive(Clone, Debug, clap::Args)]
pub struct Limits {
    /// Largest request body accepted, in bytes; larger ones get 413. Default 7 MiB: the API
    /// server caps requests at 3 MiB, and an AdmissionReview holds an object and its old version.
    /// At most 64 MiB.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_body_bytes, value_parser = clap::value_parser!(u64).range(1..=MAX_BODY_BYTES_LIMIT), env = "LONGHORN_GUARD_MAX_BODY_BYTES")]
    pub max_body_bytes: u64,
    /// Time a client has to finish the TLS handshake, and to send a request's headers once it
    /// started sending them (or after connecting), and the longest a response write may make
    /// no progress. Default 5s: the API server sends and reads at once; this bounds slow
    /// clients holding connections.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = positive_duration, env = "LONGHORN_GUARD_HEADER_READ_TIMEOUT")]
    pub header_read_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request before it is closed.
    /// Default 120s: longer than the API server's 90s idle timeout, so the client closes idle
    /// connections first and no request races the server's close.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = positive_duration, env = "LONGHORN_GUARD_IDLE_TIMEOUT")]
    pub idle_timeout: Duration,
    /// Deadline for one request, body to response. Default 8s: under the API server's default
    /// 10s webhook timeout. A shorter `?timeout=` from the API server wins, minus a margin.
    #[arg(long, value_name = "DURATION", default_value = "8s", value_parser = positive_duration, env = "LONGHORN_GUARD_REQUEST_TIMEOUT")]
    pub request_timeout: Duration,
    /// After SIGTERM, how long the server keeps accepting and answering (with `Connection:
    /// close`) while `/readyz` is 503. Default 15s: time for the kubelet's readiness probe to
    /// fail (up to 10s with the shipped probe) and the endpoint removal to reach every API
    /// server (docs/server.md, "Shutdown").
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = duration, env = "LONGHORN_GUARD_SHUTDOWN_DELAY")]
    pub shutdown_delay: Duration,
    /// Once the shutdown delay and --shutdown-idle-wait are over, how long requests under way
    /// have to finish before the remaining connections are cut. Default 10s: above the 8s
    /// request deadline.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration, env = "LONGHORN_GUARD_SHUTDOWN_GRACE")]
    pub shutdown_grace: Duration,
    /// How long after SIGTERM a kept-alive connection with no request under way is left open
    /// for its client to close (a request on it meanwhile is answered with `Connection: close`,
    /// and the connection closed after the answer); then the server closes the ones left, and
    /// --shutdown-grace runs. Default 95s: the API server closes connections idle for 90s, and
    /// each such connection has been idle since before the signal, so the server never closes
    /// one under a review the API server is writing on it (kubernetes#127335). Shorter risks
    /// that lost review; 0s closes them as soon as --shutdown-delay ends.
    #[arg(long, value_name = "DURATION", default_value = "95s", value_parser = duration, env = "LONGHORN_GUARD_SHUTDOWN_IDLE_WAIT")]
    pub shutdown_idle_wait: Duration,
    /// Most connections open at once. At the cap the longest-waiting idle connection is closed
    /// to make room; when all are busy, new connections wait. Default 512 (about 9 MiB of
    /// idle TLS connections, and inside a 1024 descriptor limit).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_connections, value_parser = clap::value_parser!(u32).range(1..), env = "LONGHORN_GUARD_MAX_CONNECTIONS")]
    pub max_connections: u32,
    /// CA certificates (PEM). When set, only clients presenting a certificate signed by one of
    /// them are served (the API server presents one through its admission kubeconfig).
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
    /// How often the certificate files are re-read to pick up a rotation. Default 2s: cheap
    /// (two small reads) and well inside any certificate's overlap window.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = positive_duration, env = "LONGHORN_GUARD_TLS_RELOAD_INTERVAL")]
    pub tls_reload_interval: Duration,
    /// How long the cluster view may stay unproven (a watch failing, or data past
    /// drain.maxViewAge that no probe proves) with no consistent read answered within it, before
    /// `/readyz` turns 503 with the reason, so that a Service sends reviews to a replica that
    /// can answer; 200 again once proven (docs/drain.md, "Readiness"). An old view counts from
    /// its last proof. Default: 1.5 × drain.maxViewAge, so that a replica cut off is unready
    /// within 2 × drain.maxViewAge. 0s: readiness does not follow the view. Watch mode only.
    #[arg(long, value_name = "DURATION", value_parser = duration, env = "LONGHORN_GUARD_UNREADY_AFTER")]
    pub unready_after: Option<Duration>,
    /// The view's age counts for readiness (probes run); else only failing watches and
    /// unreadable objects do.
    #[arg(skip = true)]
    pub unready_by_age: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 7 * 1024 * 1024,
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(120),
            request_timeout: Duration::from_secs(8),
            shutdown_delay: Duration::from_secs(15),
            shutdown_grace: Duration::from_secs(10),
            shutdown_idle_wait: Duration::from_secs(95),
            max_connections: 512,
            client_ca: None,
            tls_reload_interval: Duration::from_secs(2),
            unready_after: None,
            unready_by_age: true,
        }
    }
}

/// An `IP:port` to listen on: a host name or a missing port is a usage error (exit 2).
fn listen_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|e| format!("not an IP address and port like 0.0.0.0:8443 or [::]:8443 ({e})"))
}

/// The longest any duration flag may be (a day): past it a deadline is no deadline, and a time
/// that far ahead overflows the clock's arithmetic.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// A duration of at most [`MAX_DURATION`].
fn duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if d > MAX_DURATION {
        return Err("must be at most 24h".into());
    }
    Ok(d)
}

/// A duration longer than zero: a zero timeout or reload interval would make the server
/// useless (every connection timed out) or stop a background task.
fn positive_duration(text: &str) -> Result<Duration, String> {
    let d = duration(text)?;
    if d.is_zero() {
        return Err("must be longer than 0s".into());
    }
    Ok(d)
}

/// `0s` (off) or at least 100 ms: each probe round is one read per watched kind, and shorter
/// rounds would only load the API server (the proven age is bounded by the 3 s watches).
fn probe_interval(text: &str) -> Result<Duration, String> {
    let d = duration(text)?;
    if !d.is_zero() && d < Duration::from_millis(100) {
        return Err("must be 0s (off) or at least 100ms".into());
    }
    Ok(d)
}
