//! Per-connection timeouts that hyper does not separate (the gap: hyper's header timer also runs
//! while a kept-alive connection is idle): the time to send a request's headers once the first
//! byte arrived (short, against slow clients) and the time a kept-alive connection may sit idle
//! between requests (long, longer than the API server's own idle timeout, so that it is the
//! client that closes idle connections and never races a request against the server's close).
//!
//! [`Watched`] wraps the connection's IO and notes the first byte of each request;
//! [`Phase`] is moved to busy when hyper hands the request to the service and back to idle
//! when the response is ready; [`Phase::watchdog`] resolves when a limit is exceeded. The
//! state and the time it was entered are one atomic word, so the watchdog never pairs a new
//! state with an old time. [`Phase::evict`] asks the connection's task to close it (used at
//! the connection cap, only for connections with no request under way).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Connected (TLS handshake included), no byte of a request yet.
const FRESH: u64 = 0;
/// Between requests on a kept-alive connection.
const IDLE: u64 = 1;
/// Reading a request head.
const HEAD: u64 = 2;
/// The service is deciding the request.
const BUSY: u64 = 3;
const STATE_SHIFT: u32 = 56;
const MS_MASK: u64 = (1 << STATE_SHIFT) - 1;

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
    epoch: Instant,
    /// State in the top byte, milliseconds since `epoch` when it was entered below.
    word: AtomicU64,
    evicted: AtomicBool,
    evict: Notify,
}

impl Phase {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            word: AtomicU64::new(FRESH << STATE_SHIFT),
            evicted: AtomicBool::new(false),
            evict: Notify::new(),
        })
    }

    fn now_ms(&self) -> u64 {
        (self.epoch.elapsed().as_millis() as u64) & MS_MASK
    }

    fn pack(&self, state: u64) -> u64 {
        (state << STATE_SHIFT) | self.now_ms()
    }

    /// The current state and how long the connection has been in it.
    fn load(&self) -> (u64, Duration) {
        let word = self.word.load(Ordering::Acquire);
        let since = word & MS_MASK;
        (word >> STATE_SHIFT, Duration::from_millis(self.now_ms().saturating_sub(since)))
    }

    /// Bytes arrived: a fresh or idle connection starts reading a request head.
    fn bytes_arrived(&self) {
        let word = self.word.load(Ordering::Acquire);
        if matches!(word >> STATE_SHIFT, FRESH | IDLE) {
            let _ = self.word.compare_exchange(word, self.pack(HEAD), Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// The request's headers are parsed and the service runs.
    pub fn request_started(&self) {
        self.word.store(self.pack(BUSY), Ordering::Release);
    }

    /// The response is ready; the connection waits for the next request.
    pub fn request_finished(&self) {
        self.word.store(self.pack(IDLE), Ordering::Release);
    }

    /// How long the connection has waited with no request under way: `Some((fresh, for))`
    /// when fresh or idle (and not yet evicted), `None` while a request is under way.
    pub fn waiting(&self) -> Option<(bool, Duration)> {
        if self.evicted.load(Ordering::Relaxed) {
            return None;
        }
        match self.load() {
            (FRESH, d) => Some((true, d)),
            (IDLE, d) => Some((false, d)),
            _ => None,
        }
    }

    /// Asks the connection's task to close the connection (see [`Phase::evicted`]).
    pub fn evict(&self) {
        self.evicted.store(true, Ordering::Relaxed);
        self.evict.notify_one();
    }

    /// Resolves once [`Phase::evict`] was called.
    pub async fn evicted(&self) {
        if !self.evicted.load(Ordering::Relaxed) {
            self.evict.notified().await;
        }
    }

    /// True while no byte of a request has arrived since the connection was made.
    pub fn is_fresh(&self) -> bool {
        self.load().0 == FRESH
    }

    /// Resolves when the head of a request takes longer than `head`, a new connection sends
    /// nothing for `head`, or a kept-alive connection is idle longer than `idle`. Never
    /// resolves while a request is being served (that is bounded by the request deadline).
    pub async fn watchdog(&self, head: Duration, idle: Duration) -> Expired {
        let tick = (head.min(idle) / 4).clamp(Duration::from_millis(10), Duration::from_millis(500));
        loop {
            tokio::time::sleep(tick).await;
            match self.load() {
                (HEAD, elapsed) if elapsed > head => return Expired::Head,
                (FRESH, elapsed) if elapsed > head => return Expired::Silent,
                (IDLE, elapsed) if elapsed > idle => return Expired::Idle,
                _ => {}
            }
        }
    }
}

/// Connection IO that reports arriving bytes to its [`Phase`].
pub struct Watched<T> {
    inner: T,
    phase: Arc<Phase>,
}

impl<T> Watched<T> {
    pub fn new(inner: T, phase: Arc<Phase>) -> Self {
        Self { inner, phase }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.phase.bytes_arrived();
        }
        res
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
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
