//! Waiting for the process to be asked to stop.

use tokio::signal::unix::{signal, Signal, SignalKind};

/// Listeners for SIGTERM and SIGINT, registered when created: a signal that arrives any time
/// after [`Termination::listen`] is seen by [`Termination::recv`], even before the first `recv`.
pub struct Termination {
    term: Option<Signal>,
    int: Option<Signal>,
}

impl Termination {
    /// Registers the listeners now (inside a tokio runtime). One that cannot be registered is
    /// logged; that signal then keeps its default action.
    pub fn listen() -> Self {
        let open = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, signal = name, "cannot listen for the signal; it stops the process at once");
                None
            }
        };
        Self { term: open(SignalKind::terminate(), "SIGTERM"), int: open(SignalKind::interrupt(), "SIGINT") }
    }

    /// Resolves at the next SIGTERM or SIGINT since [`Termination::listen`] (each signal once).
    pub async fn recv(&mut self) {
        async fn next(s: &mut Option<Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = next(&mut self.term) => {}
            () = next(&mut self.int) => {}
        }
    }
}
