//! Handing freed heap back to the operating system after the few operations that allocate a
//! lot for a moment (glibc's `malloc_trim`; docs/scale.md).
#![allow(unsafe_code)]

/// Returns freed heap pages to the operating system (glibc on Linux; elsewhere a no-op).
pub fn release() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        let started = std::time::Instant::now();
        // SAFETY: malloc_trim takes no pointer; it works on the allocator's own state under the
        // allocator's locks, and it is safe to call from any thread at any time.
        let released = unsafe { malloc_trim(0) } == 1;
        tracing::trace!(released, took_us = started.elapsed().as_micros() as u64, "heap trimmed");
    }
}

/// How long [`release_soon`] waits before it trims: a burst's memory is freed in several places
/// a little after the burst ends (docs/scale.md).
const SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// A trim is scheduled and has not run yet: later calls join it.
static SCHEDULED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// [`release`] a moment later on tokio's blocking pool when a runtime runs (one trim for the
/// calls of that moment, and no request waits for it); at once otherwise.
pub fn release_soon() {
    use std::sync::atomic::Ordering;
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return release();
    };
    if SCHEDULED.swap(true, Ordering::AcqRel) {
        return;
    }
    // Cleared however the wait ends: a task dropped with its runtime (polled or not) must not
    // leave every later call believing a trim is on its way.
    let scheduled = Unschedule;
    runtime.spawn(async move {
        tokio::time::sleep(SETTLE).await;
        drop(scheduled);
        let _ = tokio::task::spawn_blocking(release).await;
    });
}

/// Clears [`SCHEDULED`] when dropped.
struct Unschedule;

impl Drop for Unschedule {
    fn drop(&mut self) {
        SCHEDULED.store(false, std::sync::atomic::Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_trim_dropped_with_its_runtime_does_not_block_later_ones() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async { release_soon() });
        assert!(SCHEDULED.load(Ordering::Acquire), "a trim is scheduled");
        // The runtime goes away before the trim's second has passed.
        drop(rt);
        assert!(!SCHEDULED.load(Ordering::Acquire), "the next burst can schedule its own trim");
    }
}
