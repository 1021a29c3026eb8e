//! The HTTPS admission server.
//!
//! axum routes ([`routes`]) served by hyper's HTTP/1.1 connection driver over a hand-written
//! tokio-rustls accept loop: bind first, then `select!` between shutdown and accept, one task
//! per connection, TLS 1.2/1.3 only with ALPN `http/1.1`. There is no plaintext port.
//! Graceful shutdown stops accepting, lets in-flight requests finish, closes kept-alive
//! connections and waits at most the shutdown grace period.
//!
//! [`Server::bind`] is the library entry point (tests start the real server on port 0 with
//! it); [`run`] is the `longhorn-guard serve` edge: configuration, signals, exit status.

pub mod conn;
pub mod metrics;
pub mod routes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt as _;

use crate::admit::Admitter;
use crate::cluster::{snapshot, ClusterView, SharedView, Source};
use crate::policy::Policy;
use crate::tls::{ReloadingCert, TlsError, TlsFiles};
use metrics::Metrics;

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
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8443", env = "LONGHORN_GUARD_LISTEN")]
    pub listen: String,
    /// Cluster snapshot file; without it the view is filled from live watches.
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_STATE")]
    pub state: Option<PathBuf>,
    /// Policy file (YAML); defaults apply when absent.
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_POLICY")]
    pub policy: Option<PathBuf>,
    /// Largest request body accepted, in bytes; larger ones get 413. Default 7 MiB: the API
    /// server caps requests at 3 MiB, and an AdmissionReview holds an object and its old version.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_body_bytes, env = "LONGHORN_GUARD_MAX_BODY_BYTES")]
    pub max_body_bytes: u64,
    /// Time a client has to finish the TLS handshake, and to send a request's headers once it
    /// started sending them (or after connecting). Default 5s: the API server sends at once;
    /// this bounds slow clients holding connections.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = humantime::parse_duration, env = "LONGHORN_GUARD_HEADER_READ_TIMEOUT")]
    pub header_read_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request before it is closed.
    /// Default 120s: longer than the API server's 90s idle timeout, so the client closes idle
    /// connections first and no request races the server's close.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = humantime::parse_duration, env = "LONGHORN_GUARD_IDLE_TIMEOUT")]
    pub idle_timeout: Duration,
    /// Deadline for one request, body to response. Default 8s: under the API server's default
    /// 10s webhook timeout. A shorter `?timeout=` from the API server wins, minus a margin.
    #[arg(long, value_name = "DURATION", default_value = "8s", value_parser = humantime::parse_duration, env = "LONGHORN_GUARD_REQUEST_TIMEOUT")]
    pub request_timeout: Duration,
    /// How long shutdown waits for in-flight requests before closing connections. Default 25s:
    /// inside Kubernetes' default 30s terminationGracePeriodSeconds.
    #[arg(long, value_name = "DURATION", default_value = "25s", value_parser = humantime::parse_duration, env = "LONGHORN_GUARD_SHUTDOWN_GRACE")]
    pub shutdown_grace: Duration,
    /// How often the certificate files are re-read to pick up a rotation. Default 2s: cheap
    /// (two small reads) and well inside any certificate's overlap window.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = humantime::parse_duration, env = "LONGHORN_GUARD_TLS_RELOAD_INTERVAL")]
    pub tls_reload_interval: Duration,
}

/// Limits and timings of the server.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_body_bytes: u64,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub request_timeout: Duration,
    pub shutdown_grace: Duration,
    pub tls_reload_interval: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 7 * 1024 * 1024,
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(120),
            request_timeout: Duration::from_secs(8),
            shutdown_grace: Duration::from_secs(25),
            tls_reload_interval: Duration::from_secs(2),
        }
    }
}

/// Everything [`Server::bind`] needs.
#[derive(Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub tls: TlsFiles,
    pub admitter: Admitter,
    pub limits: Limits,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("serving certificate: {0} (create one with `longhorn-guard certs --out DIR`, or mount the webhook's TLS Secret)")]
    Tls(#[from] TlsError),
}

/// Shared by every request handler.
pub(crate) struct AppState {
    pub(crate) admitter: Admitter,
    pub(crate) metrics: Metrics,
    pub(crate) limits: Limits,
    /// Set when shutdown starts: `/readyz` answers 503 from then on.
    pub(crate) shutting_down: AtomicBool,
    pub(crate) tls: Arc<ReloadingCert>,
}

/// A running server.
pub struct Server;

/// Controls a running server: start its shutdown and wait for it to finish.
pub struct ServerHandle {
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<bool>,
}

impl ServerHandle {
    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts a graceful shutdown, exactly as SIGTERM does in `serve`.
    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Waits until the server stopped. True when every connection finished within the grace
    /// period, false when some were cut off.
    pub async fn stopped(self) -> bool {
        self.task.await.unwrap_or(false)
    }
}

impl Server {
    /// Loads the certificate, binds `config.listen` and starts serving in the background.
    pub async fn bind(config: ServerConfig) -> Result<(SocketAddr, ServerHandle), ServeError> {
        let cert = Arc::new(ReloadingCert::load(config.tls.clone(), crate::tls::provider())?);
        let tls_config = Arc::new(crate::tls::server_config(cert.clone())?);
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServeError::Bind { addr: config.listen, source })?;
        let addr =
            listener.local_addr().map_err(|source| ServeError::Bind { addr: config.listen, source })?;
        let state = Arc::new(AppState {
            admitter: config.admitter,
            metrics: Metrics::default(),
            limits: config.limits.clone(),
            shutting_down: AtomicBool::new(false),
            tls: cert.clone(),
        });
        let (tx, rx) = watch::channel(false);
        let mut reload_rx = rx.clone();
        tokio::spawn(
            cert.watch(config.limits.tls_reload_interval, async move { stopped(&mut reload_rx).await }),
        );
        let task = tokio::spawn(serve(listener, tls_config, state, rx));
        Ok((addr, ServerHandle { addr, shutdown: tx, task }))
    }
}

/// Resolves once shutdown was requested (or the handle is gone).
async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await.map(|_| ());
}

async fn serve(
    listener: TcpListener,
    tls_config: Arc<rustls::ServerConfig>,
    state: Arc<AppState>,
    mut shutdown: watch::Receiver<bool>,
) -> bool {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_config);
    let router = routes::router(state.clone());
    let graceful = GracefulShutdown::new();
    let limits = state.limits.clone();
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stopped(&mut shutdown) => break,
            // Reap finished connection tasks.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off briefly, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let router = router.clone();
        let watcher = graceful.watcher();
        let state = state.clone();
        let limits = limits.clone();
        connections.spawn(async move {
            let tls = match tokio::time::timeout(limits.header_read_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    state.metrics.tls_handshake_error();
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    state.metrics.tls_handshake_error();
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            // hyper's own header timer also runs while a kept-alive connection is idle, so
            // both limits are kept by `conn::Phase` instead (see there).
            let phase = conn::Phase::new();
            let service = {
                let phase = phase.clone();
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    phase.request_started();
                    let (router, phase) = (router.clone(), phase.clone());
                    async move {
                        let resp = router.oneshot(req.map(axum::body::Body::new)).await;
                        phase.request_finished();
                        resp
                    }
                })
            };
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(None).keep_alive(true);
            let io = TokioIo::new(conn::Watched::new(tls, phase.clone()));
            let connection = watcher.watch(builder.serve_connection(io, service));
            tokio::select! {
                result = connection => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                }
                why = phase.watchdog(limits.header_read_timeout, limits.idle_timeout) => {
                    tracing::debug!(%peer, reason = ?why, "closing connection");
                }
            }
        });
    }
    drop(listener);
    state.shutting_down.store(true, Ordering::Relaxed);
    let open = graceful.count();
    tracing::info!(connections = open, grace = ?limits.shutdown_grace, "shutting down: no new connections; finishing in-flight requests");
    match tokio::time::timeout(limits.shutdown_grace, graceful.shutdown()).await {
        Ok(()) => {
            tracing::info!("all connections closed");
            true
        }
        Err(_) => {
            tracing::warn!(
                grace = ?limits.shutdown_grace,
                connections = connections.len(),
                "shutdown grace period over; closing the remaining connections"
            );
            connections.abort_all();
            false
        }
    }
}

/// The `serve` edge. Exit status: 0 after a signal-triggered shutdown, 1 when the server
/// cannot start (the reason on stderr).
pub async fn run(args: ServeArgs) -> ExitCode {
    match start(&args).await {
        Ok((addr, handle, watches)) => {
            tracing::info!(%addr, "serving admission webhooks over HTTPS");
            wait_for_signal().await;
            tracing::info!("termination signal received");
            handle.shutdown();
            let clean = handle.stopped().await;
            if let Some(w) = watches {
                w.abort();
            }
            if !clean {
                tracing::warn!("some connections were closed before their requests finished");
            }
            ExitCode::SUCCESS
        }
        Err(msg) => {
            eprintln!("longhorn-guard serve: {msg}");
            ExitCode::from(1)
        }
    }
}

type Started = (SocketAddr, ServerHandle, Option<tokio::task::JoinHandle<()>>);

async fn start(args: &ServeArgs) -> Result<Started, String> {
    let tls = match (&args.tls_dir, &args.tls_cert, &args.tls_key) {
        (_, Some(cert), Some(key)) => TlsFiles { cert: cert.clone(), key: key.clone() },
        (Some(dir), _, _) => TlsFiles::in_dir(dir),
        _ => {
            return Err(
                "no serving certificate: pass --tls-dir DIR, or --tls-cert FILE and --tls-key FILE".into()
            )
        }
    };
    let listen: SocketAddr = args
        .listen
        .parse()
        .map_err(|e| format!("--listen {:?} is not an address like 0.0.0.0:8443: {e}", args.listen))?;
    let policy = Arc::new(Policy::load(args.policy.as_deref()).map_err(|e| format!("policy: {e}"))?);
    let (admitter, watches) = match &args.state {
        Some(path) => {
            let view = snapshot::load(path).map_err(|e| format!("state: {e}"))?;
            tracing::info!(path = %path.display(), counts = ?view.counts(), "serving decisions from a cluster snapshot");
            (Admitter::new(SharedView::new(view), policy, None), None)
        }
        None => {
            let client = crate::cluster::client::try_default().await.map_err(|e| {
                format!(
                    "no --state given and no Kubernetes API access (in-cluster config or KUBECONFIG): {e}"
                )
            })?;
            let view = SharedView::new(ClusterView::new(Source::Watch));
            let watches = tokio::spawn(crate::cluster::watch::run(client.clone(), view.clone()));
            let confirmer = Some(crate::cluster::confirm::confirmer(client));
            (Admitter::new(view, policy, confirmer), Some(watches))
        }
    };
    let limits = Limits {
        max_body_bytes: args.max_body_bytes,
        header_read_timeout: args.header_read_timeout,
        idle_timeout: args.idle_timeout,
        request_timeout: args.request_timeout,
        shutdown_grace: args.shutdown_grace,
        tls_reload_interval: args.tls_reload_interval,
    };
    let (addr, handle) =
        Server::bind(ServerConfig { listen, tls, admitter, limits }).await.map_err(|e| e.to_string())?;
    Ok((addr, handle, watches))
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops the server");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
