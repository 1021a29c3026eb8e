//! Per-connection timeouts that hyper does not separate: the time to send a request's headers
//! once the first byte arrived (short, against slow clients) and the time a kept-alive
//! connection may sit idle between requests (long, longer than the API server's own idle
//! timeout, so that it is the client that closes idle connections and never races a request
//! against the server's close).
//!
//! [`Watched`] wraps the connection's IO and notes the first byte of each request;
//! [`Phase`] is moved to busy when hyper hands the request to the service and back to idle
//! when the response is ready; [`Phase::watchdog`] resolves when a limit is exceeded.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const IDLE: u8 = 0;
const HEAD: u8 = 1;
const BUSY: u8 = 2;

/// Why the watchdog closed a connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Expired {
    /// Headers did not arrive in time after the request's first byte.
    Head,
    /// No request arrived on a kept-alive connection.
    Idle,
}

/// Where one connection is in its request cycle.
#[derive(Debug)]
pub struct Phase {
    epoch: Instant,
    state: AtomicU8,
    /// Milliseconds since `epoch` when `state` was last entered.
    since_ms: AtomicU64,
}

impl Phase {
    pub fn new() -> Arc<Self> {
        // A new connection owes its first request's headers right away.
        Arc::new(Self { epoch: Instant::now(), state: AtomicU8::new(HEAD), since_ms: AtomicU64::new(0) })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn enter(&self, state: u8) {
        self.since_ms.store(self.now_ms(), Ordering::Relaxed);
        self.state.store(state, Ordering::Relaxed);
    }

    /// Bytes arrived: an idle connection starts reading a request head.
    fn bytes_arrived(&self) {
        if self.state.compare_exchange(IDLE, HEAD, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            self.since_ms.store(self.now_ms(), Ordering::Relaxed);
        }
    }

    /// The request's headers are parsed and the service runs.
    pub fn request_started(&self) {
        self.enter(BUSY);
    }

    /// The response is ready; the connection waits for the next request.
    pub fn request_finished(&self) {
        self.enter(IDLE);
    }

    /// Resolves when the head of a request takes longer than `head`, or the connection is
    /// idle longer than `idle`. Never resolves while a request is being served (that is
    /// bounded by the request deadline).
    pub async fn watchdog(&self, head: Duration, idle: Duration) -> Expired {
        let tick = (head.min(idle) / 4).clamp(Duration::from_millis(10), Duration::from_millis(500));
        loop {
            tokio::time::sleep(tick).await;
            let elapsed =
                Duration::from_millis(self.now_ms().saturating_sub(self.since_ms.load(Ordering::Relaxed)));
            match self.state.load(Ordering::Relaxed) {
                HEAD if elapsed > head => return Expired::Head,
                IDLE if elapsed > idle => return Expired::Idle,
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

        // A new connection that never sends a request is closed after the head limit.
        let p = Phase::new();
        assert_eq!(p.watchdog(head, idle).await, Expired::Head);
        let p = Phase::new();
        p.request_started();
        p.request_finished();
        assert_eq!(p.watchdog(head, idle).await, Expired::Idle);
    }
}
