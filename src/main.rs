use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    longhorn_guard::cli::unset_blank_env();
    longhorn_guard::cli::unset_env_overridden_by_flags();
    let cli = longhorn_guard::cli::Cli::parse();
    longhorn_guard::cli::run(cli)
}
