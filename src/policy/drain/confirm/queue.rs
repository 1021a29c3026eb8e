//! At most N confirmations read at once; requests for one node that arrive while its
//! confirmation still waits for a slot share it.
//!
//! Parallel drains would otherwise multiply a confirmation's memory and API load without bound.
//! Waiting for a slot counts against the request's budget: past it the eviction gets the usual
//! 429 "could not confirm" and is retried.
//!
//! Sharing keeps the fresh-data rule: a confirmation is joined only before it takes its slot, so
//! every read it makes starts after each request it answers arrived; its reads get the time left
//! until the latest deadline among those requests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Semaphore};

use super::{ConfirmOutcome, Confirmer};

/// One confirmation: its task, and its answer once there is one. The task runs on its own (a
/// request that stops waiting does not stall the others) and is stopped when the last request
/// waiting on it is gone: each holds the `Run`, the queue only a weak reference.
struct Run {
    _task: AbortOnDrop,
    answer: watch::Receiver<Option<ConfirmOutcome>>,
    state: Arc<RunState>,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A confirmation not yet reading, which later requests for its node may join.
struct Pending {
    id: u64,
    run: Weak<Run>,
}

/// What the requests sharing a confirmation know of it.
#[derive(Debug)]
struct RunState {
    /// The latest deadline among the requests that joined: the reads may take until then.
    deadline: Mutex<Instant>,
    /// When the reads started (set once the confirmation has its slot).
    reading_since: OnceLock<Instant>,
}

impl RunState {
    fn extend(&self, deadline: Instant) {
        let mut d = lock(&self.deadline);
        *d = (*d).max(deadline);
    }
}

struct Queue {
    inner: Confirmer,
    slots: Arc<Semaphore>,
    at_once: usize,
    /// By node: the confirmation waiting for a slot.
    pending: Mutex<HashMap<String, Pending>>,
    next_id: AtomicU64,
}

/// `inner`, with at most `at_once` (at least 1) confirmations reading at once and requests
/// for a node sharing a confirmation that has not started reading.
pub fn queued(inner: Confirmer, at_once: usize) -> Confirmer {
    let at_once = at_once.max(1);
    let queue = Arc::new(Queue {
        inner,
        slots: Arc::new(Semaphore::new(at_once)),
        at_once,
        pending: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(0),
    });
    Arc::new(move |node: String, budget: Duration| {
        let run = queue.join_or_start(&node, Instant::now() + budget);
        let at_once = queue.at_once;
        Box::pin(async move {
            let mut answer = run.answer.clone();
            let waited = tokio::time::timeout(budget, answer.wait_for(Option::is_some))
                .await
                .map(|got| got.map(|outcome| outcome.clone()));
            match waited {
                Ok(Ok(outcome)) => outcome.unwrap_or_else(|| Err(ended())),
                // The task ended without an answer (it panicked).
                Ok(Err(_)) => Err(ended()),
                Err(_) => Err(match run.state.reading_since.get() {
                    None => format!(
                        "the {at_once} confirmation{} allowed at once (--max-confirmations) stayed busy for all of {}ms",
                        if at_once == 1 { "" } else { "s" },
                        budget.as_millis()
                    ),
                    Some(since) => {
                        format!("the API server did not answer within {}ms", since.elapsed().as_millis())
                    }
                }),
            }
        })
    })
}

fn ended() -> String {
    "the confirmation ended without an answer (it panicked; see standard error)".to_string()
}

impl Queue {
    /// The pending confirmation of `node` (its reads may now run until `deadline`), or a new
    /// one whose reads get the time left until the latest deadline of its requests.
    fn join_or_start(self: &Arc<Self>, node: &str, deadline: Instant) -> Arc<Run> {
        let mut pending = lock(&self.pending);
        if let Some(run) = pending.get(node).and_then(|p| p.run.upgrade()) {
            tracing::debug!(node, "joining the confirmation waiting for a slot");
            run.state.extend(deadline);
            return run;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(RunState { deadline: Mutex::new(deadline), reading_since: OnceLock::new() });
        let (tx, answer) = watch::channel(None);
        let (queue, owned_node, shared) = (self.clone(), node.to_string(), state.clone());
        let task = tokio::spawn(async move {
            let queued = crate::cluster::stats::global().queued();
            let slot = queue.slots.clone().acquire_owned().await;
            drop(queued);
            // Under the pending lock: no request joins once the reads may have started.
            queue.started(&owned_node, id);
            let now = Instant::now();
            let _ = shared.reading_since.set(now);
            let outcome = match slot {
                Ok(_slot) => {
                    let left = lock(&shared.deadline).saturating_duration_since(now);
                    (queue.inner)(owned_node, left).await
                }
                Err(_) => Err("the confirmation queue is closed".to_string()),
            };
            let _ = tx.send(Some(outcome));
        });
        let run = Arc::new(Run { _task: AbortOnDrop(task), answer, state });
        pending.insert(node.to_string(), Pending { id, run: Arc::downgrade(&run) });
        run
    }

    /// Confirmation `id` of `node` has its slot: from now on it is not joined.
    fn started(&self, node: &str, id: u64) {
        let mut pending = lock(&self.pending);
        if pending.get(node).is_some_and(|p| p.id == id) {
            pending.remove(node);
        }
        // Entries whose every request gave up: nothing can join them.
        pending.retain(|_, p| p.run.strong_count() > 0);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
