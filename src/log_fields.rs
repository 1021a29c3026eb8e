//! The fields of a text log line, written as tracing-subscriber's `DefaultFields` writes them,
//! byte for byte: an unstyled `name=value` field (the value in its `Debug` form) is written
//! here directly; the message, errors and styled terminal output go to `DefaultVisitor`
//! itself. A denial's line has 18 fields; each then costs its text, not a styled `write!`.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::{DefaultVisitor, Writer};

/// The field formatter of `--log-format text` (`tracing_subscriber::fmt().fmt_fields(...)`).
#[derive(Clone, Copy, Debug, Default)]
pub struct PlainFields;

impl<'a> MakeVisitor<Writer<'a>> for PlainFields {
    type Visitor = PlainVisitor<'a>;

    fn make_visitor(&self, writer: Writer<'a>) -> Self::Visitor {
        PlainVisitor { writer, is_empty: true, result: Ok(()) }
    }
}

/// Writes one event's (or span's) fields to a line.
pub struct PlainVisitor<'a> {
    writer: Writer<'a>,
    /// No field written yet: the next one has no leading space.
    is_empty: bool,
    result: fmt::Result,
}

impl PlainVisitor<'_> {
    /// Writes `name=value` the fast way when there is a `fast` value and the field is a plain
    /// one; otherwise hands the field (the message, `r#` names, an error with its sources,
    /// styled terminal output) to `DefaultVisitor` itself, through `default`.
    fn field(
        &mut self,
        field: &Field,
        fast: Option<&dyn fmt::Debug>,
        default: impl FnOnce(&mut DefaultVisitor),
    ) {
        let name = field.name();
        // Fields of a `log` record are its metadata, already written by the event formatter.
        if name.starts_with("log.") || self.result.is_err() {
            return;
        }
        let is_empty = std::mem::take(&mut self.is_empty);
        let value =
            fast.filter(|_| name != "message" && !name.starts_with("r#") && !self.writer.has_ansi_escapes());
        let Some(value) = value else {
            let mut visitor = DefaultVisitor::new(self.writer.by_ref(), is_empty);
            default(&mut visitor);
            self.result = visitor.finish();
            return;
        };
        self.result = (|| {
            if !is_empty {
                self.writer.write_char(' ')?;
            }
            self.writer.write_str(name)?;
            self.writer.write_char('=')?;
            write!(self.writer, "{value:?}")
        })();
    }
}

impl Visit for PlainVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.field(field, Some(&value), |d| d.record_str(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.field(field, Some(value), |d| d.record_debug(field, value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.field(field, None, |d| d.record_error(field, value));
    }
}

impl VisitOutput<fmt::Result> for PlainVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for PlainVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    /// Collects what a subscriber writes.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Lines {
        type Writer = Lines;
        fn make_writer(&'a self) -> Lines {
            self.clone()
        }
    }

    /// An error with a source, for `record_error`.
    #[derive(Debug)]
    struct Chained(std::io::Error);

    impl fmt::Display for Chained {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("write failed")
        }
    }

    impl std::error::Error for Chained {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// The same events, through `DefaultFields` and through [`PlainFields`].
    fn both(ansi: bool, events: impl Fn()) -> (String, String) {
        let run = |plain: bool| {
            let lines = Lines::default();
            let builder = tracing_subscriber::fmt().with_writer(lines.clone()).with_ansi(ansi).without_time();
            let dispatch = if plain {
                tracing::Dispatch::new(builder.fmt_fields(PlainFields).finish())
            } else {
                tracing::Dispatch::new(builder.finish())
            };
            tracing::dispatcher::with_default(&dispatch, &events);
            let bytes = lines.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
            String::from_utf8(bytes).expect("log lines are UTF-8")
        };
        (run(false), run(true))
    }

    #[test]
    fn fields_are_written_as_the_default_formatter_writes_them() {
        let events = || {
            let clipped = crate::clip::clip_line_to("a\nb\\c \u{1b}[31m", 100);
            tracing::warn!(
                uid = %"u-1",
                webhook = "validate",
                code = 429u16,
                warnings = 0usize,
                dry_run = false,
                ratio = 0.5f64,
                r#type = "x",
                quoted = "say \"hi\"\n",
                reason = %clipped,
                "admission denied"
            );
            tracing::info!(node = "n", "a message with \u{1b}[2J an escape and \u{85} a C1 control");
            tracing::info!(only = 1u64);
            tracing::info!("");
            let span = tracing::info_span!("span", id = 7u64, name = %"s");
            let _in = span.enter();
            tracing::error!(error = %std::io::Error::other("disk full"), "in a span");
            let inner = std::io::Error::other("no space left");
            let outer = std::io::Error::other(Chained(inner));
            tracing::warn!(cause = &outer as &(dyn std::error::Error + 'static), after = 1u64);
        };
        for ansi in [false, true] {
            let (default, plain) = both(ansi, events);
            assert!(default.contains("admission denied"), "{default}");
            assert_eq!(plain, default, "ansi {ansi}");
        }
    }
}
