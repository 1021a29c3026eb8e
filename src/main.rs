use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    longhorn_guard::cli::unset_blank_env();
    let cli = longhorn_guard::cli::Cli::parse();
    longhorn_guard::cli::run(cli)
}
