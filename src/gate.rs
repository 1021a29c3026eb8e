//! `longhorn-guard gate`: the init container that waits for the storage network.

use std::process::ExitCode;

/// Arguments of `longhorn-guard gate`.
#[derive(Debug, clap::Args)]
pub struct GateArgs {}

pub async fn run(_args: GateArgs) -> ExitCode {
    eprintln!("longhorn-guard gate: not built yet");
    ExitCode::from(2)
}
