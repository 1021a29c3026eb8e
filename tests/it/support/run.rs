//! Running the real binary with a standard input. Tests that need nothing else of the support
//! tree include this file alone (`#[path = "support/run.rs"] mod run;`).

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

/// Runs `cmd` with `stdin` on its standard input, collecting its standard output and error. A
/// child that exits before reading all of stdin closes the pipe: that is no error here, its
/// exit code and output say what it did.
pub fn with_stdin(cmd: &mut Command, stdin: &[u8]) -> Output {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}
