//! The accept loop and one task per connection, through the shutdown stages ([`Stage`]):
//! `Draining` keeps accepting and answers `Connection: close`; `Closing` closes the listener and
//! leaves each connection open until its next answer or its client's close; `Ending` closes the
//! idle ones, and cuts what is still open after `--shutdown-grace`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderValue};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;
use tower::ServiceExt as _;

use super::cap::{Cap, Slot};
use super::conn::{self, Expired};
use super::{AppState, Stage};

/// Accepts until the `Closing` stage, then waits for the connections to close: up to the
/// `Ending` stage and the grace period after it. True when every connection closed in time.
pub(crate) async fn serve(
    listener: TcpListener,
    tls_config: Arc<rustls::ServerConfig>,
    state: Arc<AppState>,
    stage_tx: watch::Sender<Stage>,
) -> bool {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_config);
    let router = super::routes::router(state.clone());
    let limits = state.limits.clone();
    let cap = Cap::new(limits.max_connections as usize, state.metrics.server.clone());
    let mut stage = stage_tx.subscribe();
    let stages = tokio::spawn(run_stages(stage_tx, state.clone(), cap.clone()));
    let mut errors = AcceptErrors::default();
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = stage.wait_for(|s| *s >= Stage::Closing) => break,
            // Reap finished connection tasks.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                state.metrics.server.accept_errors.inc();
                errors.record(&e);
                if is_out_of_descriptors(&e) {
                    cap.evict_one();
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // At the cap: close the longest-waiting idle connection, or wait for one to end.
        let slot = tokio::select! {
            slot = cap.admit() => slot,
            _ = stage.wait_for(|s| *s >= Stage::Closing) => break,
        };
        let _ = tcp.set_nodelay(true);
        connections.spawn(connection(
            tcp,
            peer,
            slot,
            acceptor.clone(),
            router.clone(),
            state.clone(),
            stage.clone(),
        ));
    }
    drop(listener);
    tracing::info!(
        connections = connections.len(),
        idle = cap.idle(),
        idle_wait = ?limits.shutdown_idle_wait,
        grace = ?limits.shutdown_grace,
        "no longer accepting; each connection closes after its next answer or when its client closes it"
    );
    let ending = async {
        let _ = stage.wait_for(|s| *s == Stage::Ending).await;
        tokio::time::sleep(limits.shutdown_grace).await;
    };
    let all_closed = async { while connections.join_next().await.is_some() {} };
    tokio::select! {
        () = all_closed => {
            stages.abort();
            tracing::info!("all connections closed");
            return true;
        }
        () = ending => {}
    }
    tracing::warn!(
        grace = ?limits.shutdown_grace,
        connections = connections.len(),
        "shutdown grace period over; closing the remaining connections"
    );
    connections.abort_all();
    false
}

/// Waits for the shutdown request, then moves through `Draining` (for the delay) and `Closing`
/// (until `--shutdown-idle-wait` after the request) to `Ending`.
async fn run_stages(stage: watch::Sender<Stage>, state: Arc<AppState>, cap: Arc<Cap>) {
    super::draining(stage.subscribe()).await;
    let limits = &state.limits;
    tracing::info!(
        delay = ?limits.shutdown_delay,
        "shutdown started: /readyz answers 503; still accepting, each response says Connection: close"
    );
    tokio::time::sleep(limits.shutdown_delay).await;
    stage.send_replace(Stage::Closing);
    tokio::time::sleep(limits.shutdown_idle_wait.saturating_sub(limits.shutdown_delay)).await;
    let idle = cap.idle();
    if idle > 0 {
        tracing::warn!(
            idle,
            idle_wait = ?limits.shutdown_idle_wait,
            "shutdown idle wait over: closing the kept-alive connections their clients left idle (a request written on one now is lost)"
        );
    }
    stage.send_replace(Stage::Ending);
}

async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    slot: Slot,
    acceptor: tokio_rustls::TlsAcceptor,
    router: axum::Router,
    state: Arc<AppState>,
    mut stage: watch::Receiver<Stage>,
) {
    let limits = &state.limits;
    let phase = slot.phase.clone();
    // A client that reads nothing of what is sent to it for the header timeout (handshake or
    // response) is cut off: it must not hold its connection, and a place under the cap, forever
    // (a graceful close waits for the response to be written). Below TLS, so every byte the
    // kernel takes counts as progress; hyper has no write timeout of its own.
    let mut tcp = tokio_io_timeout::TimeoutStream::new(tcp);
    tcp.set_write_timeout(Some(limits.header_read_timeout));
    let tcp = Box::pin(tcp);
    let handshake = tokio::time::timeout(limits.header_read_timeout, acceptor.accept(tcp));
    let tls = tokio::select! {
        r = handshake => match r {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                state.metrics.server.tls_handshake_errors.inc();
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                state.metrics.server.tls_handshake_errors.inc();
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        },
        _ = phase.evicted() => {
            tracing::debug!(%peer, "closing a connection still in its TLS handshake: connection cap reached");
            return;
        }
    };
    // hyper's own header timer also runs while a kept-alive connection is idle, so both
    // limits are kept by `conn::Phase` instead (see there).
    let service = {
        let (phase, stage) = (phase.clone(), stage.clone());
        hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            phase.request_started();
            let (router, phase, stage) = (router.clone(), phase.clone(), stage.clone());
            async move {
                let Ok(mut resp) = router.oneshot(req.map(axum::body::Body::new)).await;
                if *stage.borrow() != Stage::Serving {
                    resp.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                phase.request_finished();
                Ok::<_, std::convert::Infallible>(resp)
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(None).keep_alive(true);
    let io = TokioIo::new(conn::watched(tls, phase.clone()));
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let (head, idle) = (limits.header_read_timeout, limits.idle_timeout);
    let mut watchdog = Box::pin(phase.watchdog(head, idle));
    let mut ending = false;
    let mut evicted = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            why = &mut watchdog => match why {
                Expired::Head | Expired::Silent => {
                    tracing::debug!(%peer, reason = ?why, "closing connection");
                    return;
                }
                Expired::Idle => {
                    // hyper closes an idle connection at once, and finishes a request it
                    // already started reading: no request is dropped unanswered.
                    tracing::debug!(%peer, reason = ?why, "closing idle connection");
                    connection.as_mut().graceful_shutdown();
                    watchdog = Box::pin(phase.watchdog(head, idle));
                }
            },
            _ = phase.evicted(), if !evicted => {
                evicted = true;
                tracing::debug!(%peer, fresh = phase.is_fresh(), "closing an idle connection: connection cap reached");
                if phase.is_fresh() {
                    return;
                }
                connection.as_mut().graceful_shutdown();
            }
            // Until then a connection closes after its next answer (`Connection: close`) or
            // when its client closes it: hyper's graceful shutdown closes an idle connection at
            // once, racing a request its client may be writing on it (kubernetes#127335).
            _ = stage.wait_for(|s| *s == Stage::Ending), if !ending => {
                ending = true;
                match phase.waiting() {
                    // A new connection has not said a word: nothing to finish.
                    Some((true, _)) => return,
                    Some((false, _)) => connection.as_mut().graceful_shutdown(),
                    // A request under way: its answer says `Connection: close`.
                    None => {}
                }
            }
        }
    }
}

/// True for the accept errors that mean the process or system is out of file descriptors.
fn is_out_of_descriptors(e: &std::io::Error) -> bool {
    // EMFILE (24) and ENFILE (23) on Linux and the BSDs.
    matches!(e.raw_os_error(), Some(23 | 24))
}

/// Accept errors, logged at most once a second with the count since the last line. (Gap:
/// tracing has no rate limit, and an accept loop out of descriptors fails 20 times a second.)
#[derive(Debug, Default)]
pub(crate) struct AcceptErrors {
    last_logged: Option<Instant>,
    unlogged: u64,
}

impl AcceptErrors {
    /// Counts `e`; logs when the last line is a second old. True when it logged.
    pub(crate) fn record(&mut self, e: &std::io::Error) -> bool {
        self.unlogged += 1;
        let now = Instant::now();
        if self.last_logged.is_some_and(|t| now.duration_since(t) < Duration::from_secs(1)) {
            return false;
        }
        tracing::warn!(
            error = %e,
            count = self.unlogged,
            out_of_descriptors = is_out_of_descriptors(e),
            "accept failed (count: failures since the last such line)"
        );
        self.last_logged = Some(now);
        self.unlogged = 0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn accept_errors_log_at_most_once_a_second() {
        let mut errors = AcceptErrors::default();
        let emfile = std::io::Error::from_raw_os_error(24);
        assert!(is_out_of_descriptors(&emfile));
        let mut logged = 0;
        for _ in 0..100 {
            if errors.record(&emfile) {
                logged += 1;
            }
            tokio::time::sleep(Duration::from_millis(20)).await; // 100 errors over 2 s
        }
        assert!((2..=3).contains(&logged), "{logged} lines for 100 errors in 2 s");
        assert!(!is_out_of_descriptors(&std::io::Error::from_raw_os_error(104)));
    }
}
