use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = longhorn_guard::cli::Cli::parse();
    longhorn_guard::cli::run(cli)
}
