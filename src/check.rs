//! `longhorn-guard check drain NODE`: the drain computation as a preflight report.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `longhorn-guard check drain`.
#[derive(Debug, clap::Args)]
pub struct DrainArgs {
    /// The node to check.
    pub node: String,
    /// Cluster snapshot; without it the live cluster is read (KUBECONFIG or in-cluster).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Policy file (YAML); defaults apply when absent.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub output: CheckOutput,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum CheckOutput {
    Table,
    Json,
}

pub async fn run_drain(_args: DrainArgs) -> ExitCode {
    eprintln!("longhorn-guard check drain: not built yet");
    ExitCode::from(2)
}
