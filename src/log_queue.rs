//! `serve`'s log lines, written to standard error by one thread of their own: a request
//! thread formats its event and hands the line over, and the writer thread writes whatever
//! lines are waiting with one `write` call. Under load (a drain that is denied thousands of
//! times a second) many lines share one system call instead of each request paying its own.
//!
//! Every line is written, in the order the events were logged: when the queue is full the
//! logging thread waits for room, as it waited for standard error before. [`flush`] waits
//! (for a bounded time) until every line handed over so far is written; `serve` calls it
//! before it exits, and [`crate::output::stderr_line`] before writing its own line.

use std::io::Write;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::OnceLock;
use std::time::Duration;

/// Lines waiting to be written before a logging thread waits for room.
const QUEUE_LINES: usize = 4096;
/// The most bytes written with one call.
const BATCH_BYTES: usize = 64 * 1024;
/// How long [`flush`] waits for the writer thread (standard error may be a full pipe).
const FLUSH_WAIT: Duration = Duration::from_secs(2);

enum Message {
    Line(Vec<u8>),
    /// Answered once every line before it is written.
    Flush(SyncSender<()>),
}

static QUEUE: OnceLock<SyncSender<Message>> = OnceLock::new();

/// The writer `tracing_subscriber` formats `serve`'s events into: each event's line goes to
/// the writer thread (started on first use) when the writer is dropped.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueuedStderr;

/// One event's line, handed to the writer thread when dropped.
pub struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            send(Message::Line(std::mem::take(&mut self.0)));
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for QueuedStderr {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line(Vec::new())
    }
}

fn queue() -> &'static SyncSender<Message> {
    QUEUE.get_or_init(|| {
        let (tx, rx) = sync_channel(QUEUE_LINES);
        let spawned = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || write_lines(rx, &mut std::io::stderr()));
        if spawned.is_err() {
            // No thread: lines are written by the logging thread ([`send`]).
            let (dead, _) = sync_channel(0);
            return dead;
        }
        tx
    })
}

/// Hands `message` to the writer thread; without one, writes a line at once.
fn send(message: Message) {
    if let Err(e) = queue().send(message) {
        if let Message::Line(line) = e.0 {
            let _ = std::io::stderr().write_all(&line);
        }
    }
}

/// The writer thread: waits for a line, then writes it with every line queued behind it.
fn write_lines(rx: Receiver<Message>, out: &mut impl Write) {
    let mut batch: Vec<u8> = Vec::with_capacity(BATCH_BYTES);
    let mut acks: Vec<SyncSender<()>> = Vec::new();
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Line(line) => batch.extend_from_slice(&line),
                Message::Flush(ack) => acks.push(ack),
            }
            if batch.len() < BATCH_BYTES {
                next = rx.try_recv().ok();
            }
        }
        // A line that cannot be written (standard error closed or full) is dropped.
        let _ = out.write_all(&batch).and_then(|()| out.flush());
        batch.clear();
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    }
}

/// Waits until every line logged so far is written (at most [`FLUSH_WAIT`]). Does nothing
/// when no line was ever queued.
pub fn flush() {
    let Some(queue) = QUEUE.get() else { return };
    let (ack, done) = sync_channel(1);
    if queue.send(Message::Flush(ack)).is_ok() {
        let _ = done.recv_timeout(FLUSH_WAIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Standard error as the test sees it: every write call and its bytes.
    #[derive(Clone, Default)]
    struct Capture(std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_are_written_whole_in_order_and_a_flush_waits_for_those_before_it() {
        let (tx, rx) = sync_channel(QUEUE_LINES);
        let capture = Capture::default();
        let mut out = capture.clone();
        let writer = std::thread::spawn(move || write_lines(rx, &mut out));
        let lines: Vec<String> = (0..5000).map(|i| format!("line {i} {}\n", "x".repeat(i % 300))).collect();
        for l in &lines {
            tx.send(Message::Line(l.clone().into_bytes())).unwrap();
        }
        let (ack, done) = sync_channel(1);
        tx.send(Message::Flush(ack)).unwrap();
        done.recv_timeout(FLUSH_WAIT).expect("flushed");
        let writes = capture.0.lock().unwrap().clone();
        assert_eq!(
            writes.concat(),
            lines.concat().into_bytes(),
            "every line, in order, before the flush returns"
        );
        assert!(writes.iter().all(|w| w.len() <= BATCH_BYTES + 400), "batches stay bounded");
        drop(tx);
        writer.join().unwrap();
    }

    #[test]
    fn an_event_is_handed_over_as_one_line() {
        use tracing_subscriber::fmt::MakeWriter as _;
        let mut line = QueuedStderr.make_writer();
        line.write_all(b"log_queue: ").unwrap();
        line.write_all(b"one line\n").unwrap();
        assert_eq!(line.0, b"log_queue: one line\n");
        drop(line);
        assert!(QUEUE.get().is_some(), "the first line starts the writer");
        flush();
    }
}
