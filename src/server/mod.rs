//! The HTTPS admission server.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `longhorn-guard serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Directory holding tls.crt and tls.key (a Kubernetes TLS Secret volume works as is).
    #[arg(long, value_name = "DIR", env = "LONGHORN_GUARD_TLS_DIR")]
    pub tls_dir: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8443", env = "LONGHORN_GUARD_LISTEN")]
    pub listen: String,
    /// Cluster snapshot file; without it the view is filled from live watches.
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_STATE")]
    pub state: Option<PathBuf>,
    /// Policy file (YAML); defaults apply when absent.
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_POLICY")]
    pub policy: Option<PathBuf>,
}

pub async fn run(_args: ServeArgs) -> ExitCode {
    eprintln!("longhorn-guard serve: not built yet");
    ExitCode::from(2)
}
