//! Reading a webhook request's body within `--max-body-bytes`, and the two memory budgets
//! (received, being decided) every body in flight shares (docs/server.md, `--max-body-bytes`).
//! (Gap: tower-http's `RequestBodyLimit` answers 413 with its own text, does not drain the
//! rest so the client sees it, and shares no memory budget.)

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap};
use http_body_util::BodyExt as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The most a body past the limit is read (and discarded) so the client still sees the 413
/// before the connection closes; a client sending more is cut off.
const MAX_DRAIN_BYTES: u64 = 64 * 1024 * 1024;
/// How long draining a body past the limit waits for its next piece before the 413 is sent.
const DRAIN_PAUSE: Duration = Duration::from_secs(1);
/// The longest a body past the limit is drained in all: a client that trickles it gets the 413
/// then, not at the request deadline.
const DRAIN_FOR: Duration = Duration::from_secs(2);
/// A body reserves its declared length from the receiving budget once it grows past this.
const MAX_RESERVE: u64 = 64 * 1024;

/// The KiB of request bodies in flight at once: being decided (`kib`), and large ones being
/// received (`receiving`).
#[derive(Debug, Clone)]
pub struct BodyBudget {
    kib: Arc<Semaphore>,
    receiving: Arc<Semaphore>,
    total: u32,
}

impl BodyBudget {
    /// A budget of `max_body_bytes` (at least 1 KiB) for each: one body at the limit at a time.
    pub fn new(max_body_bytes: u64) -> Self {
        let total = u32::try_from(max_body_bytes.div_ceil(1024).max(1))
            .unwrap_or(u32::MAX)
            .min(u32::try_from(Semaphore::MAX_PERMITS).unwrap_or(u32::MAX));
        Self {
            kib: Arc::new(Semaphore::new(total as usize)),
            receiving: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// The KiB of `bytes` (at most the whole budget) from `budget`, one of `self`'s two.
    async fn take(&self, budget: &Arc<Semaphore>, bytes: u64) -> Option<OwnedSemaphorePermit> {
        let kib = u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX).min(self.total);
        // The semaphore is never closed.
        budget.clone().acquire_many_owned(kib).await.ok()
    }

    /// KiB not held by any body being decided now.
    #[cfg(test)]
    fn available_kib(&self) -> usize {
        self.kib.available_permits()
    }

    /// KiB not reserved by any large body being received now.
    #[cfg(test)]
    fn receiving_kib(&self) -> usize {
        self.receiving.available_permits()
    }
}

/// A body's share of the budget; given back when dropped.
#[derive(Debug)]
pub struct BodyShare {
    /// Held only to be given back on drop.
    _permit: Option<OwnedSemaphorePermit>,
    /// A large body's reservation of its bytes, held as long as they are.
    _received: Option<OwnedSemaphorePermit>,
}

pub enum BodyError {
    TooLarge,
    Read(String),
}

/// Reads the body up to `max` bytes, then takes its share of `budget`, all at once.
/// Past the limit the rest is read and dropped (up to [`MAX_DRAIN_BYTES`]) so the 413 reaches
/// the client instead of a connection reset.
pub async fn read_body(
    headers: &HeaderMap,
    mut body: Body,
    max: u64,
    budget: &BodyBudget,
) -> Result<(Bytes, BodyShare), BodyError> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let mut buf: Vec<u8> = Vec::new();
    let mut total: u64 = 0;
    let mut too_large = declared.is_some_and(|n| n > max);
    // A client that waits for `100 Continue` before sending gets the 413 instead: polling the
    // body would invite an upload that is only thrown away.
    let expects_continue = headers
        .get(header::EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
    if too_large && expects_continue {
        return Err(BodyError::TooLarge);
    }
    let mut drain_until = too_large.then(|| tokio::time::Instant::now() + DRAIN_FOR);
    let mut received = None;
    loop {
        // Once the answer is a 413, the rest is drained only while it keeps coming.
        let next = match drain_until {
            Some(until) => {
                let pause = (tokio::time::Instant::now() + DRAIN_PAUSE).min(until);
                let Ok(next) = tokio::time::timeout_at(pause, body.frame()).await else { break };
                next
            }
            None => body.frame().await,
        };
        let Some(frame) = next else { break };
        let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
        let Ok(data) = frame.into_data() else { continue };
        total += data.len() as u64;
        if total > max && !too_large {
            too_large = true;
            drain_until = Some(tokio::time::Instant::now() + DRAIN_FOR);
            buf = Vec::new();
            received = None;
        }
        if too_large {
            if total > MAX_DRAIN_BYTES {
                break;
            }
            continue;
        }
        // Past [`MAX_RESERVE`] a body reserves its declared length (the limit without one).
        if received.is_none() && total > MAX_RESERVE {
            received = budget.take(&budget.receiving, declared.unwrap_or(max)).await;
        }
        buf.extend_from_slice(&data);
    }
    if too_large {
        return Err(BodyError::TooLarge);
    }
    let share = BodyShare { _permit: budget.take(&budget.kib, total).await, _received: received };
    Ok((Bytes::from(buf), share))
}

#[cfg(test)]
mod tests;
