//! How a failed watch is retried, and which failures are `410 Gone`.

use std::time::Duration;

use kube::runtime::utils::Backoff;
use kube::runtime::watcher;

use super::{RETRY_MAX, RETRY_MIN};
use crate::cluster::sync::stats::WatchFault;

/// The watcher's backoff (reset by every event): after each consecutive failure, [`RETRY_MIN`]
/// doubled each time, at most [`RETRY_MAX`].
#[derive(Default)]
pub(super) struct Retry {
    failures: u32,
}

impl Iterator for Retry {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let doublings = self.failures.min(16);
        self.failures = self.failures.saturating_add(1);
        Some(RETRY_MIN.saturating_mul(1 << doublings).min(RETRY_MAX))
    }
}

impl Backoff for Retry {
    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// `gone` for `410 Gone` (in the watch stream or as the answer to the request), else `error`.
pub fn fault_of(e: &watcher::Error) -> WatchFault {
    let code = match e {
        watcher::Error::WatchError(status) => Some(status.code),
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    };
    if code == Some(410) {
        WatchFault::Gone
    } else {
        WatchFault::Error
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn retries_start_fast_and_stay_within_a_few_seconds() {
        let mut retry = Retry::default();
        let first: Vec<Duration> = retry.by_ref().take(4).collect();
        assert_eq!(first, [RETRY_MIN, RETRY_MIN * 2, RETRY_MAX, RETRY_MAX]);
        retry.reset();
        assert_eq!(retry.next(), Some(RETRY_MIN));
        assert_eq!(Retry { failures: u32::MAX }.next(), Some(RETRY_MAX));
    }

    #[test]
    fn a_410_is_gone_and_anything_else_an_error() {
        let status = |code: u16| -> Box<kube::core::Status> {
            Box::new(
                serde_json::from_value(
                    json!({"code": code, "reason": "Expired", "message": "too old resource version: 7 (9)"}),
                )
                .unwrap(),
            )
        };
        assert_eq!(fault_of(&watcher::Error::WatchError(status(410))), WatchFault::Gone);
        assert_eq!(
            fault_of(&watcher::Error::WatchStartFailed(kube::Error::Api(status(410)))),
            WatchFault::Gone
        );
        assert_eq!(fault_of(&watcher::Error::WatchError(status(500))), WatchFault::Error);
        assert_eq!(
            fault_of(&watcher::Error::InitialListFailed(kube::Error::Api(status(403)))),
            WatchFault::Error
        );
        assert_eq!(fault_of(&watcher::Error::NoResourceVersion), WatchFault::Error);
    }
}
