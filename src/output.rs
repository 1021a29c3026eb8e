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
