//! At most N confirmations read at once; requests for one node that arrive while its
//! confirmation still waits for a slot share it.
//!
//! A confirmation at 10,000 volumes holds about 20 MiB while it reads, and makes the API server
//! serialise about 12 MB. Parallel drains (an upgrade controller draining several nodes, each
//! eviction retried every 5 s by `kubectl drain`) would multiply both without bound; queued,
//! they cost the guard and the API server what N confirmations cost. Waiting for a slot counts
//! against the request's budget: past it the eviction gets the usual 429 "could not confirm"
//! and is retried.
//!
//! Sharing keeps the fresh-data rule: a confirmation is joined only before it takes its slot,
//! so every read it makes starts after each request it answers arrived. A request that arrives
//! once the reads have started waits for the next confirmation of that node. The reads get the
//! time left until the latest deadline among the requests that share them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt, Shared, WeakShared};
use tokio::sync::Semaphore;

use crate::admit::{ConfirmOutcome, Confirmer};

type Run = BoxFuture<'static, ConfirmOutcome>;

/// A confirmation not yet reading, which later requests for its node may join.
struct Pending {
    id: u64,
    run: WeakShared<Run>,
    state: Arc<RunState>,
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
    /// By node: the confirmation waiting for a slot. Weak: when every request waiting on it
    /// gives up, it is dropped (leaving the semaphore's queue) and the entry is dead.
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
        let (run, state) = queue.join_or_start(&node, Instant::now() + budget);
        let at_once = queue.at_once;
        Box::pin(async move {
            match tokio::time::timeout(budget, run).await {
                Ok(outcome) => outcome,
                Err(_) => Err(match state.reading_since.get() {
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

impl Queue {
    /// The pending confirmation of `node` (its reads may now run until `deadline`), or a new
    /// one whose reads get the time left until the latest deadline of its requests.
    fn join_or_start(self: &Arc<Self>, node: &str, deadline: Instant) -> (Shared<Run>, Arc<RunState>) {
        let mut pending = lock(&self.pending);
        if let Some(p) = pending.get(node) {
            if let Some(run) = p.run.upgrade() {
                tracing::debug!(node, "joining the confirmation waiting for a slot");
                p.state.extend(deadline);
                return (run, p.state.clone());
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(RunState { deadline: Mutex::new(deadline), reading_since: OnceLock::new() });
        let (queue, owned_node, shared) = (self.clone(), node.to_string(), state.clone());
        let run: Run = async move {
            let queued = crate::cluster::stats::global().queued();
            let slot = queue.slots.clone().acquire_owned().await;
            drop(queued);
            // Under the pending lock: no request joins once the reads may have started.
            queue.started(&owned_node, id);
            let now = Instant::now();
            let _ = shared.reading_since.set(now);
            let Ok(_slot) = slot else { return Err("the confirmation queue is closed".to_string()) };
            let left = lock(&shared.deadline).saturating_duration_since(now);
            (queue.inner)(owned_node, left).await
        }
        .boxed();
        let run = run.shared();
        // A future that has not been polled cannot be complete: downgrade gives a handle.
        if let Some(weak) = run.downgrade() {
            pending.insert(node.to_string(), Pending { id, run: weak, state: state.clone() });
        }
        (run, state)
    }

    /// Confirmation `id` of `node` has its slot: from now on it is not joined.
    fn started(&self, node: &str, id: u64) {
        let mut pending = lock(&self.pending);
        if pending.get(node).is_some_and(|p| p.id == id) {
            pending.remove(node);
        }
        // Entries whose every request gave up: nothing can join them.
        pending.retain(|_, p| p.run.upgrade().is_some());
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
