//! The HTTPS admission server: axum routes ([`routes`]) served by hyper's HTTP/1.1 connection
//! driver over a tokio-rustls accept loop ([`listener`]), at most `--max-connections`
//! connections ([`cap`]), shut down in stages ([`Stage`]; docs/server.md).

mod args;
pub mod body;
pub mod cap;
pub mod conn;
mod listener;
pub mod metrics;
pub mod readiness;
pub mod routes;
mod view_gauges;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::admit::Admitter;
use crate::check::cluster::metrics::{self as check_metrics, SharedChecks};
use crate::cluster::{client, probe, snapshot, ClusterView, SharedView, Source};
use crate::policy::drain::{confirm, derivations};
use crate::policy::Policy;
use crate::tls::{ReloadingCert, TlsError, TlsFiles};
pub use args::{Limits, ServeArgs};
use metrics::Metrics;

/// Everything [`Server::bind`] needs.
#[derive(Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub tls: TlsFiles,
    pub admitter: Admitter,
    pub limits: Limits,
    /// The last `check cluster` run, exported on `/metrics` when set (`serve --check-interval`).
    pub checks: Option<SharedChecks>,
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
    #[error(
        "--client-ca: {0} (a PEM file of the CA certificates that sign the API server's client certificate)"
    )]
    ClientCa(TlsError),
}

/// Shared by every request handler.
pub(crate) struct AppState {
    pub(crate) admitter: Admitter,
    pub(crate) checks: Option<SharedChecks>,
    pub(crate) metrics: Metrics,
    pub(crate) limits: Limits,
    /// Where the server is in its life: `/readyz` answers 503 once it is not `Serving`.
    pub(crate) stage: watch::Receiver<Stage>,
    /// The memory every request body in flight shares ([`body`]).
    pub(crate) bodies: body::BodyBudget,
    /// What `/readyz` answers for the cluster view ([`readiness`]).
    pub(crate) readiness: readiness::Readiness,
}

/// A running server.
pub struct Server;

/// Where the server is in its life, in order. (Gap: hyper-util's `GracefulShutdown` closes
/// every idle connection at once, racing the request a client may be writing on it, and adds
/// no `Connection: close`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    Serving,
    /// Shutdown requested: still accepting, every response says `Connection: close`.
    Draining,
    /// No longer accepting; each connection closes after its next answer, or when its client
    /// closes it.
    Closing,
    /// `--shutdown-idle-wait` is over: connections with no request under way are closed; the
    /// others have `--shutdown-grace` to finish.
    Ending,
}

/// Controls a running server: start its shutdown and wait for it to finish.
pub struct ServerHandle {
    addr: SocketAddr,
    stage: watch::Sender<Stage>,
    task: JoinHandle<bool>,
}

impl ServerHandle {
    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts a graceful shutdown (delay, idle wait, grace), exactly as SIGTERM does in `serve`.
    pub fn shutdown(&self) {
        self.stage.send_if_modified(|s| {
            *s == Stage::Serving && {
                *s = Stage::Draining;
                true
            }
        });
    }

    /// False once the listener is closing (after the shutdown delay): from then on new
    /// connections are refused.
    pub fn is_accepting(&self) -> bool {
        *self.stage.borrow() < Stage::Closing
    }

    /// Waits until the server stopped. True when every connection closed before the grace
    /// period (after the idle wait) ran out, false when some were cut off.
    pub async fn stopped(mut self) -> bool {
        (&mut self.task).await.unwrap_or(false)
    }
}

impl Drop for ServerHandle {
    /// A server whose handle is gone shuts down.
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Server {
    /// Loads the certificate, binds `config.listen` and starts serving in the background.
    pub async fn bind(config: ServerConfig) -> Result<(SocketAddr, ServerHandle), ServeError> {
        let cert = Arc::new(ReloadingCert::load(config.tls.clone(), crate::tls::provider())?);
        let tls_config = Arc::new(
            crate::tls::server_config_with(cert.clone(), config.limits.client_ca.as_deref())
                // With the certificate loaded, what can still fail is reading the client CAs.
                .map_err(|e| match config.limits.client_ca {
                    Some(_) => ServeError::ClientCa(e),
                    None => ServeError::Tls(e),
                })?,
        );
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServeError::Bind { addr: config.listen, source })?;
        let addr =
            listener.local_addr().map_err(|source| ServeError::Bind { addr: config.listen, source })?;
        let readiness = readiness::Readiness::new(readiness_rule(&config));
        let gauges = metrics::ScrapeGauges {
            view: config.admitter.view.clone(),
            policy: config.admitter.policy.clone(),
            tls: cert.clone(),
        };
        let metrics = Metrics::new(gauges, &readiness);
        let stage = watch::Sender::new(Stage::Serving);
        let state = Arc::new(AppState {
            admitter: config.admitter,
            checks: config.checks,
            metrics,
            limits: config.limits.clone(),
            stage: stage.subscribe(),
            bodies: body::BodyBudget::new(config.limits.max_body_bytes),
            readiness,
        });
        tokio::spawn(cert.watch(config.limits.tls_reload_interval, draining(stage.subscribe())));
        let (ticked, shutdown) = (state.clone(), draining(stage.subscribe()));
        tokio::spawn(async move {
            tokio::pin!(shutdown);
            loop {
                tokio::select! {
                    () = &mut shutdown => return,
                    () = tokio::time::sleep(readiness::TICK) => { ticked.observe_readiness(); }
                }
            }
        });
        let task = tokio::spawn(listener::serve(listener, tls_config, state, stage.clone()));
        Ok((addr, ServerHandle { addr, stage, task }))
    }
}

/// The readiness rule of `config`: `--unready-after`, or 1.5 × the policy's `drain.maxViewAge`
/// (unready within 2 × of the last proof, with room for the ticks and the probe's polling).
fn readiness_rule(config: &ServerConfig) -> readiness::Rule {
    let max_view_age = config.admitter.policy.drain.max_view_age;
    readiness::Rule {
        unready_after: config.limits.unready_after.unwrap_or(max_view_age.saturating_mul(3) / 2),
        max_view_age,
        by_age: config.limits.unready_by_age,
    }
}

impl AppState {
    /// What `/readyz` answers for the view now ([`readiness::Readiness::observe`]).
    pub(crate) fn observe_readiness(&self) -> readiness::Verdict {
        let view = self.admitter.view.read();
        self.readiness.observe(&view, std::time::Instant::now(), std::time::SystemTime::now())
    }
}

/// Resolves once shutdown was requested.
async fn draining(mut stage: watch::Receiver<Stage>) {
    let _ = stage.wait_for(|s| *s != Stage::Serving).await;
}

/// The `serve` edge. Exit status: 0 after a signal-triggered shutdown, 1 when the server
/// cannot start (the reason on stderr).
pub async fn run(args: ServeArgs) -> ExitCode {
    // Listening before anything starts: a SIGTERM during start-up is a shutdown, not a kill.
    let mut signals = crate::signal::Termination::listen();
    match start(&args).await {
        Ok((addr, handle, watches)) => {
            tracing::info!(%addr, "serving admission webhooks over HTTPS");
            signals.recv().await;
            tracing::info!("termination signal received");
            handle.shutdown();
            // A second signal (a second Ctrl-C) ends the wait for the delay, the idle wait and
            // the grace.
            let clean = tokio::select! {
                clean = handle.stopped() => clean,
                () = signals.recv() => {
                    tracing::warn!("second termination signal: stopping now, without the rest of the shutdown delay and grace");
                    true // said just now: no second line about cut connections
                }
            };
            if let Some(w) = watches {
                w.abort();
            }
            if !clean {
                tracing::warn!("some connections were closed before their requests finished");
            }
            ExitCode::SUCCESS
        }
        Err(msg) => {
            crate::stderr_line!("longhorn-guard serve: {msg}");
            ExitCode::from(1)
        }
    }
}

async fn start(args: &ServeArgs) -> Result<(SocketAddr, ServerHandle, Option<JoinHandle<()>>), String> {
    let tls = match (&args.tls_dir, &args.tls_cert, &args.tls_key) {
        (_, Some(cert), Some(key)) => TlsFiles { cert: cert.clone(), key: key.clone() },
        (Some(dir), _, _) => TlsFiles::in_dir(dir),
        _ => {
            return Err(
                "no serving certificate: pass --tls-dir DIR, or --tls-cert FILE and --tls-key FILE".into()
            )
        }
    };
    let policy = Arc::new(Policy::load(args.policy.as_deref()).map_err(|e| format!("policy: {e}"))?);
    let (admitter, checks, watches) = match &args.state {
        Some(path) => {
            // The view is read by the rules of `review` and `check drain` (an item it cannot read,
            // or no Longhorn object, is refused); the checks' inventory comes from the same pass.
            let with_checks = !args.check_interval.is_zero();
            let (view, inv) =
                snapshot::load_observing(path, crate::check::cluster::Inventory::default, |inv, item| {
                    if with_checks {
                        inv.note(item);
                    }
                })
                .map_err(|e| format!("state: {e}"))?;
            let view = view.derive(derivations(), std::time::SystemTime::now());
            let checks = with_checks.then(|| {
                let checks = SharedChecks::default();
                check_metrics::run_once(&checks, &inv, &view, &policy);
                checks
            });
            tracing::info!(path = %path.display(), counts = ?view.counts(), "serving decisions from a cluster snapshot");
            (Admitter::new(SharedView::new(view), policy.clone(), None), checks, None)
        }
        None => {
            let no_access = |e: kube::Error| {
                format!(
                    "no --state given and no Kubernetes API access (in-cluster config or KUBECONFIG): {e}"
                )
            };
            let config = client::infer().await.map_err(no_access)?;
            let fresh = ClusterView::new(Source::Watch);
            let view = SharedView::new(fresh.derive(derivations(), std::time::SystemTime::now()));
            let probing = !args.freshness_probe_interval.is_zero();
            // While the view is unproven, every API request opens a new connection.
            let renew = client::renew_while_unproven(view.clone(), policy.drain.max_view_age, probing);
            let api = client::build_renewing(config, renew).map_err(no_access)?;
            let tuning =
                crate::cluster::watch::Tuning { lists: args.lists, ..crate::cluster::watch::tuning(probing) };
            let watched = crate::cluster::watch::run_supervised(api.clone(), view.clone(), tuning);
            let probes = probing
                .then(|| probe::run_supervised(api.clone(), view.clone(), args.freshness_probe_interval));
            // One task, so that stopping the watches stops the probes too (each half restarts
            // itself after a panic, so neither takes the other down).
            let watches = tokio::spawn(async move {
                match probes {
                    Some(probes) => drop(tokio::join!(watched, probes)),
                    None => watched.await,
                }
            });
            let confirmer = if policy.drain.reuse_current_kinds {
                confirm::confirmer_reusing(api.clone(), view.clone(), policy.drain.max_view_age)
            } else {
                confirm::confirmer(api.clone(), view.clone())
            };
            let confirmer = Some(confirm::queue::queued(confirmer, args.max_confirmations as usize));
            let admitter = Admitter::new(view.clone(), policy.clone(), confirmer)
                .with_confirm_timeout(args.confirm_timeout);
            let checks = (!args.check_interval.is_zero()).then(|| {
                let checks = SharedChecks::default();
                tokio::spawn(check_metrics::refresh_loop(
                    api,
                    view.clone(),
                    policy,
                    args.check_interval,
                    checks.clone(),
                ));
                checks
            });
            (admitter, checks, Some(watches))
        }
    };
    let limits = Limits { unready_by_age: !args.freshness_probe_interval.is_zero(), ..args.limits.clone() };
    match Server::bind(ServerConfig { listen: args.listen, tls, admitter, limits, checks }).await {
        Ok((addr, handle)) => Ok((addr, handle, watches)),
        Err(e) => {
            // Stop the watches at once: their failing requests would only bury the reason.
            if let Some(w) = watches {
                w.abort();
            }
            Err(e.to_string())
        }
    }
}
