//! Per-connection timeouts hyper does not separate (its header timer also runs while a
//! kept-alive connection is idle): the headers of a request once its first byte arrived, and
//! the idle time between requests (docs/server.md).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::io::InspectReader;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Connected (TLS handshake included), no byte of a request yet.
    Fresh,
    /// Between requests on a kept-alive connection.
    Idle,
    /// Reading a request head.
    Head,
    /// The service is deciding the request.
    Busy,
}

/// Why the watchdog closed a connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Expired {
    /// Headers did not arrive in time after the request's first byte.
    Head,
    /// No request arrived on a kept-alive connection.
    Idle,
    /// A new connection sent nothing.
    Silent,
}

/// Where one connection is in its request cycle.
#[derive(Debug)]
pub struct Phase {
    /// The state and when it was entered.
    state: Mutex<(State, Instant)>,
    evict: CancellationToken,
}

impl Phase {
    pub fn new() -> Arc<Self> {
        Arc::new(Self { state: Mutex::new((State::Fresh, Instant::now())), evict: CancellationToken::new() })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, (State, Instant)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current state and how long the connection has been in it.
    fn load(&self) -> (State, Duration) {
        let (state, since) = *self.state();
        (state, since.elapsed())
    }

    /// Bytes arrived: a fresh or idle connection starts reading a request head.
    fn bytes_arrived(&self) {
        let mut st = self.state();
        if matches!(st.0, State::Fresh | State::Idle) {
            *st = (State::Head, Instant::now());
        }
    }

    /// The request's headers are parsed and the service runs.
    pub fn request_started(&self) {
        *self.state() = (State::Busy, Instant::now());
    }

    /// The response is ready; the connection waits for the next request.
    pub fn request_finished(&self) {
        *self.state() = (State::Idle, Instant::now());
    }

    /// How long the connection has waited with no request under way: `Some((fresh, for))`
    /// when fresh or idle (and not yet evicted), `None` while a request is under way.
    pub fn waiting(&self) -> Option<(bool, Duration)> {
        if self.evict.is_cancelled() {
            return None;
        }
        match self.load() {
            (State::Fresh, d) => Some((true, d)),
            (State::Idle, d) => Some((false, d)),
            _ => None,
        }
    }

    /// Asks the connection's task to close the connection (see [`Phase::evicted`]).
    pub fn evict(&self) {
        self.evict.cancel();
    }

    /// Resolves once [`Phase::evict`] was called.
    pub async fn evicted(&self) {
        self.evict.cancelled().await;
    }

    /// True while no byte of a request has arrived since the connection was made.
    pub fn is_fresh(&self) -> bool {
        self.load().0 == State::Fresh
    }

    /// Resolves when the head of a request takes longer than `head`, a new connection sends
    /// nothing for `head`, or a kept-alive connection is idle longer than `idle`. Never
    /// resolves while a request is being served (that is bounded by the request deadline).
    pub async fn watchdog(&self, head: Duration, idle: Duration) -> Expired {
        let tick = (head.min(idle) / 4).clamp(Duration::from_millis(10), Duration::from_millis(500));
        loop {
            tokio::time::sleep(tick).await;
            match self.load() {
                (State::Head, elapsed) if elapsed > head => return Expired::Head,
                (State::Fresh, elapsed) if elapsed > head => return Expired::Silent,
                (State::Idle, elapsed) if elapsed > idle => return Expired::Idle,
                _ => {}
            }
        }
    }
}

/// Connection IO that reports arriving bytes to `phase`.
pub fn watched<T: tokio::io::AsyncRead>(io: T, phase: Arc<Phase>) -> InspectReader<T, impl FnMut(&[u8])> {
    InspectReader::new(io, move |bytes: &[u8]| {
        if !bytes.is_empty() {
            phase.bytes_arrived();
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_and_head_limits_are_separate() {
        let p = Phase::new();
        p.request_started();
        p.request_finished();
        let head = Duration::from_secs(5);
        let idle = Duration::from_secs(120);
        // Idle for a minute: fine. Then a first byte and no headers for 5 s: expired.
        let p2 = p.clone();
        let waiter = tokio::spawn(async move { p2.watchdog(head, idle).await });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!waiter.is_finished());
        p.bytes_arrived();
        p.request_started();
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!waiter.is_finished(), "a request being served is not timed here");
        p.request_finished();
        p.bytes_arrived();
        assert_eq!(waiter.await.unwrap(), Expired::Head);

        // A new connection that never sends a request is closed (gracefully) after the head limit.
        let p = Phase::new();
        assert!(p.is_fresh());
        assert_eq!(p.watchdog(head, idle).await, Expired::Silent);
        assert!(p.is_fresh(), "nothing arrived");
        let p = Phase::new();
        p.request_started();
        p.request_finished();
        assert_eq!(p.watchdog(head, idle).await, Expired::Idle);
    }
}
