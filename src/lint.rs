//! `longhorn-guard lint`: the replica and settings rules over manifests, without a cluster.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `longhorn-guard lint`.
#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// Policy file (YAML); defaults apply when absent.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: LintFormat,
    /// Files or folders of manifests (YAML, JSON, Lists, `helm template` output, Helm values).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LintFormat {
    Text,
    Json,
}

pub fn run(_args: LintArgs) -> ExitCode {
    eprintln!("longhorn-guard lint: not built yet");
    ExitCode::from(2)
}
