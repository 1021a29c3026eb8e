//! Handing freed heap back to the operating system after the few operations that allocate a
//! lot for a moment: the watch's first sync and its relists, confirmations, check refreshes.
//!
//! glibc keeps freed memory in its arenas for reuse. After such a burst (a confirmation at
//! 10,000 volumes parses 11 MB of JSON) that memory stays resident although nothing uses it:
//! 4-6 MiB at that size, over the Deployment's steady-state budget. `malloc_trim(0)` returns
//! the free pages inside the heap to the system and keeps everything in use. Other C
//! libraries (musl) and systems have nothing to do here.
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

/// [`release`] on tokio's blocking pool when a runtime runs, so that no request waits for it;
/// at once otherwise.
pub fn release_soon() {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(release)),
        Err(_) => release(),
    }
}
