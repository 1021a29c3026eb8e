//! The connection cap: at most `max` connections at once. At the cap (or out of file
//! descriptors), a connection with no request under way is closed to make room: one that never
//! served a request first, a kept-alive idle one only when none is left ([`Cap::evict_one`]);
//! when every connection is busy, new ones wait in the listen backlog (back-pressure, never an
//! error). (Gap: tower's `ConcurrencyLimit` bounds requests, not connections, and closes nothing.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::conn::Phase;
use super::metrics::ServerCounters;

/// How often a connection waiting at the cap looks again for one to close.
const RETRY: Duration = Duration::from_millis(25);

/// A kept-alive connection idle for less than this is never closed to make room: its client
/// is likely between two requests, and closing it could race the next one.
pub const MIN_IDLE_TO_EVICT: Duration = Duration::from_secs(1);

/// A new connection younger than this is not closed to make room either: its client is
/// likely about to send its first request (this also paces an attacker who keeps dialling).
pub const MIN_FRESH_TO_EVICT: Duration = Duration::from_millis(100);

/// Live connections, bounded.
#[derive(Debug)]
pub struct Cap {
    permits: Arc<Semaphore>,
    live: Mutex<HashMap<u64, Arc<Phase>>>,
    next_id: AtomicU64,
    counters: Arc<ServerCounters>,
}

/// One admitted connection; leaving the cap when dropped.
#[derive(Debug)]
pub struct Slot {
    cap: Arc<Cap>,
    id: u64,
    _permit: OwnedSemaphorePermit,
    pub phase: Arc<Phase>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.cap.live).remove(&self.id);
        self.cap.counters.connections_open.dec();
    }
}

impl Cap {
    /// A cap of `max` connections (at least 1), counted in `counters`.
    pub fn new(max: usize, counters: Arc<ServerCounters>) -> Arc<Self> {
        Arc::new(Self {
            permits: Arc::new(Semaphore::new(max.max(1))),
            live: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            counters,
        })
    }

    /// A slot for a new connection: at once below the cap; at the cap once a waiting
    /// connection was closed to make room, or a busy one ended.
    pub async fn admit(self: &Arc<Self>) -> Slot {
        loop {
            if let Ok(permit) = self.permits.clone().try_acquire_owned() {
                return self.slot(permit);
            }
            self.evict_one();
            let acquire = self.permits.clone().acquire_owned();
            if let Ok(Ok(permit)) = tokio::time::timeout(RETRY, acquire).await {
                return self.slot(permit);
            }
        }
    }

    fn slot(self: &Arc<Self>, permit: OwnedSemaphorePermit) -> Slot {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let phase = Phase::new();
        lock(&self.live).insert(id, phase.clone());
        self.counters.connections_open.inc();
        Slot { cap: self.clone(), id, _permit: permit, phase }
    }

    /// How many kept-alive connections wait for their next request (and were not asked to
    /// close).
    pub fn idle(&self) -> usize {
        lock(&self.live).values().filter(|p| matches!(p.waiting(), Some((false, _)))).count()
    }

    /// Asks a connection with no request under way to close. Connections that have never
    /// served a request go first: the one silent longest, once silent for
    /// [`MIN_FRESH_TO_EVICT`]. Only when there is none left, the kept-alive connection idle
    /// longest, once idle for [`MIN_IDLE_TO_EVICT`] (a client's spare connection is worth more
    /// than a dial that has not said a word). False when none was asked.
    pub fn evict_one(&self) -> bool {
        let live = lock(&self.live);
        let (mut any_fresh, mut fresh, mut idle) = (false, None, None);
        for p in live.values() {
            let Some((is_fresh, waited)) = p.waiting() else { continue };
            any_fresh |= is_fresh;
            let (best, floor) =
                if is_fresh { (&mut fresh, MIN_FRESH_TO_EVICT) } else { (&mut idle, MIN_IDLE_TO_EVICT) };
            if waited >= floor && best.as_ref().is_none_or(|(w, _)| waited > *w) {
                *best = Some((waited, p));
            }
        }
        match fresh.or(if any_fresh { None } else { idle }) {
            Some((waited, phase)) => {
                tracing::debug!(
                    waited_ms = waited.as_millis() as u64,
                    "connection cap reached: closing the longest-waiting idle connection"
                );
                phase.evict();
                self.counters.connections_evicted.inc();
                true
            }
            None => false,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_the_longest_waiting_idle_connection_makes_room() {
        let counters = Arc::new(ServerCounters::default());
        let cap = Cap::new(2, counters.clone());
        let a = cap.admit().await;
        assert!(!cap.evict_one(), "a brand-new connection is not closed");
        tokio::time::sleep(Duration::from_secs(1)).await;
        let b = cap.admit().await;
        b.phase.request_started(); // busy: never evicted
        assert_eq!(counters.connections_open.get(), 2);

        let third = tokio::spawn({
            let cap = cap.clone();
            async move { cap.admit().await }
        });
        // `a` is asked to close; its task drops the slot.
        a.phase.evicted().await;
        assert!(!third.is_finished());
        drop(a);
        let c = third.await.unwrap();
        assert_eq!(counters.connections_open.get(), 2);

        // A kept-alive connection that just answered is not closed; once idle a while, it is.
        c.phase.request_started();
        c.phase.request_finished();
        assert!(!cap.evict_one());
        tokio::time::sleep(MIN_IDLE_TO_EVICT).await;
        assert!(cap.evict_one());
        // Everything busy: nothing to evict, the newcomer waits for a slot to end.
        c.phase.request_started();
        assert!(!cap.evict_one());
        let fourth = tokio::spawn({
            let cap = cap.clone();
            async move { cap.admit().await }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!fourth.is_finished());
        drop(b);
        let _d = fourth.await.unwrap();
        assert_eq!(counters.connections_evicted.get(), 2);
        assert_eq!(counters.connections_open.get(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn connections_that_never_served_a_request_go_before_served_ones() {
        let cap = Cap::new(8, Arc::new(ServerCounters::default()));
        let served = cap.admit().await;
        served.phase.request_started();
        served.phase.request_finished();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let silent = cap.admit().await;
        // The served connection has waited longer, but a silent one exists: it goes first,
        // once silent for the floor.
        assert!(!cap.evict_one());
        tokio::time::sleep(MIN_FRESH_TO_EVICT).await;
        assert!(cap.evict_one());
        assert!(silent.phase.waiting().is_none(), "the silent connection was asked to close");
        assert!(served.phase.waiting().is_some(), "the served connection was not");
        drop(silent);
        assert!(cap.evict_one());
        assert!(served.phase.waiting().is_none());
    }
}
