//! Waiting for the process to be asked to stop.

/// Resolves at SIGTERM or SIGINT (only SIGINT when SIGTERM cannot be listened for).
pub async fn termination() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops the process");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
