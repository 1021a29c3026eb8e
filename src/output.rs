//! A command's result on standard output.

use std::io::Write;

/// Writes `text` to standard output. A reader that went away (`| head`) ends the output
/// quietly: the command's exit status still tells its result.
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}
