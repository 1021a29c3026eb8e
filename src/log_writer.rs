//! Log lines to standard error in batches, written by one background thread: a line costs the
//! thread that logs it a copy into a shared buffer, not a system call, and the lines of a busy
//! moment leave in one write.
//!
//! Contract:
//! - lines keep the order in which they were logged, and each arrives whole;
//! - a line is written at most [`LINGER`] after it was logged, or at once by [`flush`], which
//!   returns when everything logged before it is written (or after [`FLUSH_WAIT`], so an exit
//!   never hangs on a standard error nobody reads);
//! - while [`MAX_PENDING`] bytes wait, a logger waits too, as a direct write to a full pipe
//!   would: no line is dropped unless writing to standard error itself fails.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// The longest a logged line waits for the batch it leaves in.
pub const LINGER: Duration = Duration::from_millis(1);
/// Unwritten bytes past which a logger waits for the writer.
pub const MAX_PENDING: usize = 1 << 20;
/// Unwritten bytes that end the wait for a batch early.
const EAGER: usize = 64 << 10;
/// The longest [`flush`] waits.
pub const FLUSH_WAIT: Duration = Duration::from_secs(2);

#[derive(Default)]
struct State {
    /// Logged and not yet taken by the writer.
    pending: Vec<u8>,
    /// A flush waits: write without lingering.
    urgent: bool,
    /// Bytes appended so far, and of those, written (or dropped by a failed write).
    appended: u64,
    written: u64,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when lines arrive in an empty buffer, or a flush begins.
    wake: Condvar,
    /// Signalled after each batch is written.
    written: Condvar,
    max_pending: usize,
    linger: Duration,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A logger that panicked mid-append leaves whole lines behind: carry on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A handle on one batching writer (cheap to clone; each clone appends to the same buffer).
#[derive(Clone)]
pub struct Batched {
    shared: Arc<Shared>,
}

impl Batched {
    /// Starts the writer thread for `out` with this module's limits.
    pub fn spawn<W: Write + Send + 'static>(out: W) -> std::io::Result<Self> {
        Self::with_limits(out, MAX_PENDING, LINGER)
    }

    /// [`Self::spawn`] with other limits (tests).
    pub fn with_limits<W: Write + Send + 'static>(
        out: W,
        max_pending: usize,
        linger: Duration,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            written: Condvar::new(),
            max_pending,
            linger,
        });
        let for_thread = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || write_batches(&for_thread, out))?;
        Ok(Self { shared })
    }

    /// Appends one line (or any bytes) to the next batch.
    pub fn append(&self, bytes: &[u8]) {
        let shared = &*self.shared;
        let mut st = shared.lock();
        while !st.pending.is_empty() && st.pending.len() + bytes.len() > shared.max_pending {
            // Make room as soon as possible rather than after the linger.
            st.urgent = true;
            shared.wake.notify_one();
            st = shared.written.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        let before = st.pending.len();
        st.pending.extend_from_slice(bytes);
        st.appended += bytes.len() as u64;
        // The writer waits for the first line of a batch, and lingers until a full one.
        let wake = before == 0 || (before < EAGER && st.pending.len() >= EAGER);
        drop(st);
        if wake {
            shared.wake.notify_one();
        }
    }

    /// Waits until everything appended before the call is written, at most `wait`. True when
    /// it was.
    pub fn flush_within(&self, wait: Duration) -> bool {
        let shared = &*self.shared;
        let mut st = shared.lock();
        // What was appended before this call; later lines do not hold it up.
        let target = st.appended;
        if st.written >= target {
            return true;
        }
        st.urgent = true;
        shared.wake.notify_one();
        let (st, _) = shared
            .written
            .wait_timeout_while(st, wait, |st| st.written < target)
            .unwrap_or_else(|e| e.into_inner());
        st.written >= target
    }
}

/// The writer thread: waits for lines, lingers for more, writes them in one go; forever.
fn write_batches<W: Write>(shared: &Shared, mut out: W) {
    let mut batch = Vec::new();
    loop {
        let mut st = shared.lock();
        while st.pending.is_empty() {
            st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        let (mut st, _) = shared
            .wake
            .wait_timeout_while(st, shared.linger, |st| !st.urgent && st.pending.len() < EAGER)
            .unwrap_or_else(|e| e.into_inner());
        std::mem::swap(&mut st.pending, &mut batch);
        let taken = st.appended;
        st.urgent = false;
        drop(st);
        // A batch that cannot be written (standard error closed or full) is dropped, as a
        // direct write's line would be; reporting it on standard error again cannot work.
        let _ = out.write_all(&batch).and_then(|()| out.flush());
        batch.clear();
        // A burst's buffer is not kept for good.
        batch.shrink_to(EAGER);
        let mut st = shared.lock();
        st.written = taken;
        drop(st);
        shared.written.notify_all();
    }
}

/// One event's writer for `tracing_subscriber::fmt`, which formats an event and then writes
/// it with one `write_all`: the line is appended whole.
pub struct Line<'a>(&'a Batched);

impl Write for Line<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.append(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Batched {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line(self)
    }
}

/// The process's standard-error writer: started by the first [`stderr`] call (`None`: its
/// thread could not start).
static STDERR: OnceLock<Option<Batched>> = OnceLock::new();

/// The batching writer on standard error for the process's logger (started on first call);
/// `None` when its thread cannot start, and the logger then writes directly.
pub fn stderr() -> Option<Batched> {
    STDERR.get_or_init(|| Batched::spawn(std::io::stderr()).ok()).clone()
}

/// Writes out what the process's logger has buffered (see the module's contract); at once
/// when logging never started.
pub fn flush() {
    if let Some(Some(b)) = STDERR.get() {
        b.flush_within(FLUSH_WAIT);
    }
}

/// Flushes the process's logger when dropped: at the end of a command, and while unwinding
/// from a panic.
pub struct FlushOnDrop;

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A sink whose bytes the test reads back, and that can be made to block.
    #[derive(Clone, Default)]
    struct Sink {
        bytes: Arc<Mutex<Vec<u8>>>,
        writes: Arc<Mutex<usize>>,
        stuck: Arc<AtomicBool>,
        /// Set: writes past this many are held.
        once: Arc<Mutex<Option<usize>>>,
    }

    impl Sink {
        /// Lets the write now waiting finish, and holds every later one.
        fn allow_one_write(&self) {
            *self.once.lock().unwrap() = Some(*self.writes.lock().unwrap() + 1);
            self.stuck.store(false, Ordering::Release);
        }
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let held = || {
                self.stuck.load(Ordering::Acquire)
                    || self.once.lock().unwrap().is_some_and(|n| *self.writes.lock().unwrap() >= n)
            };
            while held() {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.bytes.lock().unwrap().extend_from_slice(buf);
            *self.writes.lock().unwrap() += 1;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_from_many_threads_arrive_whole_in_each_threads_order_and_in_few_writes() {
        let sink = Sink::default();
        let b = Batched::with_limits(sink.clone(), 1 << 20, Duration::from_millis(20)).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let b = b.clone();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        b.append(format!("thread {t} line {i} {}\n", "x".repeat(i % 200)).as_bytes());
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert!(b.flush_within(Duration::from_secs(10)));
        let text = String::from_utf8(sink.bytes.lock().unwrap().clone()).unwrap();
        let mut next = [0usize; 4];
        for line in text.lines() {
            let mut w = line.split(' ');
            let (t, i): (usize, usize) =
                (w.nth(1).unwrap().parse().unwrap(), w.nth(1).unwrap().parse().unwrap());
            assert_eq!(i, next[t], "thread {t}'s lines out of order or torn: {line}");
            assert_eq!(w.next().unwrap_or(""), "x".repeat(i % 200));
            next[t] += 1;
        }
        assert_eq!(next, [500; 4]);
        // 2,000 lines logged within a few lingers leave in far fewer writes.
        let writes = *sink.writes.lock().unwrap();
        assert!(writes < 200, "{writes} writes for 2,000 lines");
    }

    #[test]
    fn a_flush_waits_for_the_lines_before_it_not_for_those_logged_after() {
        let sink = Sink::default();
        sink.stuck.store(true, Ordering::Release);
        let b = Batched::with_limits(sink.clone(), 1 << 20, Duration::ZERO).unwrap();
        b.append(b"before\n");
        let t0 = std::time::Instant::now();
        while !b.shared.lock().pending.is_empty() {
            assert!(t0.elapsed() < Duration::from_secs(10), "the writer never took the line");
            std::thread::yield_now();
        }
        // The writer is stuck writing "before"; a flush starts, then another line is logged.
        let flusher = {
            let b = b.clone();
            std::thread::spawn(move || b.flush_within(Duration::from_secs(10)))
        };
        while !b.shared.lock().urgent {
            assert!(t0.elapsed() < Duration::from_secs(10), "the flush never started");
            std::thread::yield_now();
        }
        b.append(b"after\n");
        // Only the first write may finish: "after" stays unwritten for good.
        sink.allow_one_write();
        assert!(flusher.join().unwrap(), "the flush waited for a line logged after it");
        assert_eq!(&*sink.bytes.lock().unwrap(), b"before\n");
    }

    #[test]
    fn a_line_leaves_within_the_linger_without_a_flush() {
        let sink = Sink::default();
        let b = Batched::with_limits(sink.clone(), 1 << 20, Duration::from_millis(1)).unwrap();
        b.append(b"one line\n");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while sink.bytes.lock().unwrap().is_empty() {
            assert!(std::time::Instant::now() < deadline, "the line was never written");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(&*sink.bytes.lock().unwrap(), b"one line\n");
    }

    #[test]
    fn a_logger_waits_for_a_stuck_writer_instead_of_dropping_and_a_flush_gives_up_in_time() {
        let sink = Sink::default();
        sink.stuck.store(true, Ordering::Release);
        let b = Batched::with_limits(sink.clone(), 64, Duration::ZERO).unwrap();
        // The first line is taken by the writer, which is stuck; the second fills the buffer.
        b.append(&[b'a'; 40]);
        let t0 = std::time::Instant::now();
        while !b.shared.lock().pending.is_empty() {
            assert!(t0.elapsed() < Duration::from_secs(10));
            std::thread::yield_now();
        }
        b.append(&[b'b'; 40]);
        let waiting = Arc::new(AtomicBool::new(true));
        let started = Arc::new(AtomicBool::new(false));
        let third = {
            let (b, waiting, started) = (b.clone(), Arc::clone(&waiting), Arc::clone(&started));
            std::thread::spawn(move || {
                started.store(true, Ordering::Release);
                b.append(&[b'c'; 40]);
                waiting.store(false, Ordering::Release);
            })
        };
        while !started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(50));
        assert!(waiting.load(Ordering::Acquire), "the third line did not wait for room");
        assert!(!b.flush_within(Duration::from_millis(20)), "a flush of a stuck writer claimed success");
        sink.stuck.store(false, Ordering::Release);
        third.join().unwrap();
        assert!(b.flush_within(Duration::from_secs(10)));
        let bytes = sink.bytes.lock().unwrap().clone();
        assert_eq!(bytes, [[b'a'; 40], [b'b'; 40], [b'c'; 40]].concat());
    }
}
