//! A command's result on standard output.

use std::io::{ErrorKind, Write};

/// Writes `text` to standard output. A reader that went away (`| head`) ends the output
/// quietly: the command's exit status still tells its result. Any other failure (a full disk
/// behind a redirection) is an error the command reports.
pub fn stdout(text: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(format!("cannot write to standard output: {e}")),
        _ => Ok(()),
    }
}

/// Writes one line to standard error, as `eprintln!` does, but never panics: when standard
/// error is gone or full (a closed pipe, `2>/dev/full`) the line is dropped and the command
/// goes on to its exit status.
pub fn stderr_line(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}").and_then(|()| err.flush());
}

/// `longhorn-guard CMD: MSG` on standard error, and exit status 2 (bad input).
pub fn bad_input(cmd: &str, msg: &str) -> std::process::ExitCode {
    stderr_line(&format!("longhorn-guard {cmd}: {msg}"));
    std::process::ExitCode::from(2)
}

/// [`stderr_line`] with `format!` arguments.
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {
        $crate::output::stderr_line(&format!($($arg)*))
    };
}

/// `rows` as a text table: every column but the last padded to its widest cell, two spaces apart.
pub fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        for (cell, w) in row.iter().zip(widths).take(N - 1) {
            out.push_str(&format!("{cell:<w$}  "));
        }
        out.push_str(&row[N - 1]);
        out.push('\n');
    }
    out
}

/// Serialises a value as the text it renders to (JSON reports keep their strings).
pub fn as_text<T: std::fmt::Display, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// [`as_text`] for an optional value (`null` when absent).
pub fn as_opt_text<T: std::fmt::Display, S: serde::Serializer>(
    v: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}
