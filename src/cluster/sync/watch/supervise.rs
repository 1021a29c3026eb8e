//! Keeps the cluster watches running: if they ever end or panic (a bug), every kind is marked
//! failing, so the view is stale until the restarted watches have listed it again; a guard
//! must never serve from a view that stopped moving.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt as _;

use crate::cluster::{model::ObjectKind, store::SharedView};

/// Runs `start()` again after `pause` each time the future it returns ends or panics, marking
/// every kind of `view` failing first. Never returns; cancel it by dropping it.
pub async fn supervised<F, Fut>(view: SharedView, mut start: F, pause: Duration)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        let why = match AssertUnwindSafe(start()).catch_unwind().await {
            Ok(()) => "ended".to_string(),
            Err(panic) => format!("panicked: {}", crate::clip::panic_text(panic.as_ref())),
        };
        view.update(|v| ObjectKind::ALL.into_iter().for_each(|k| v.note_watch_failed(k)));
        tracing::error!(
            reason = %crate::clip::clip_to(&why, crate::clip::MAX_TEXT),
            "the cluster watches stopped; every kind is stale until listed again; restarting them"
        );
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::cluster::store::{ClusterView, Source};

    #[tokio::test(start_paused = true)]
    async fn watches_that_panic_leave_the_view_stale_and_start_again() {
        let view = SharedView::new(ClusterView::new(Source::Watch));
        let starts = Arc::new(AtomicUsize::new(0));
        let counter = starts.clone();
        let supervisor = tokio::spawn(supervised(
            view.clone(),
            move || {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n == 0 {
                        panic!("a bug in the watches");
                    }
                    std::future::pending::<()>().await
                }
            },
            Duration::from_secs(1),
        ));
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 1, "restarted only after the pause");
        assert_eq!(view.read().freshness().failing.len(), ObjectKind::ALL.len());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 2);
        assert!(!supervisor.is_finished());
        supervisor.abort();
    }
}
