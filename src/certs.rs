//! `longhorn-guard certs`: a self-signed CA and a serving certificate signed by it (rcgen).

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `longhorn-guard certs`.
#[derive(Debug, clap::Args)]
pub struct CertsArgs {
    /// Directory to write ca.crt, ca.key, tls.crt and tls.key into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Service name for the DNS SANs.
    #[arg(long, default_value = "longhorn-guard")]
    pub service: String,
    /// Service namespace for the DNS SANs.
    #[arg(long, default_value = "longhorn-guard")]
    pub namespace: String,
    /// Extra IP SAN (repeatable); 127.0.0.1 is always included.
    #[arg(long = "ip", value_name = "ADDR")]
    pub ips: Vec<std::net::IpAddr>,
    /// Replace an existing CA too (otherwise it is kept and only the serving certificate is re-issued).
    #[arg(long)]
    pub rotate_ca: bool,
}

pub fn run(_args: CertsArgs) -> ExitCode {
    eprintln!("longhorn-guard certs: not built yet");
    ExitCode::from(2)
}
