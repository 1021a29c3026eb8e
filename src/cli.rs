//! Command-line interface: one binary, one subcommand per job. Flags are a contract
//! (README "Commands").

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Keeps Longhorn volumes redundant through drains, deploys and instance-manager start-up.
#[derive(Debug, Parser)]
#[command(name = "longhorn-guard", version, about)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value = "text", env = "LONGHORN_GUARD_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `longhorn_guard=debug`; wins over
    /// `-v`. Default: `info` for `serve` and `gate`, `warn` for the operator's commands.
    #[arg(long, global = true, env = "LONGHORN_GUARD_LOG", value_parser = log_filter)]
    pub log_level: Option<String>,
    /// Log more: `-v` logs at `info`, `-vv` at `debug` (when `--log-level` is not given).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the admission webhooks over HTTPS.
    Serve(Box<crate::server::ServeArgs>),
    /// Generate a CA and a serving certificate for the webhook.
    Certs(crate::certs::CertsArgs),
    /// Decide one AdmissionReview from stdin against a snapshot; print the response.
    Review(crate::review::ReviewArgs),
    /// Check manifests for low replica counts and risky settings, without a cluster.
    Lint(crate::lint::LintArgs),
    /// Preflight checks against a snapshot or the live cluster.
    #[command(subcommand)]
    Check(CheckCommand),
    /// Init-container gate: wait until the pod's storage network is up, or fail the pod.
    Gate(crate::gate::GateArgs),
    /// Print the init gate as a MutatingAdmissionPolicy and its binding (YAML), from the
    /// policy's gate settings: the gate injected by the API server itself.
    GatePolicy(crate::mutate::gate_policy::GatePolicyArgs),
    /// Print the replica-count rules the API server can check itself as a
    /// ValidatingAdmissionPolicy, its binding and its parameter ConfigMap (YAML).
    ReplicasPolicy(crate::policy::replicas::admission_policy::ReplicasPolicyArgs),
}

#[derive(Debug, Subcommand)]
pub enum CheckCommand {
    /// Would `kubectl drain NODE` proceed? Exit 0 yes, 1 no.
    Drain(crate::check::DrainArgs),
    /// The production checklist: node conditions, disks, backups, jobs, snapshots, replica
    /// counts, volume health, settings, drain readiness. Exit 0 no errors, 1 errors.
    Cluster(crate::check::cluster::ClusterArgs),
}

/// Variables that stay an error when blank: unset, they would silently turn client
/// authentication off or leave the server without its certificate source.
const BLANK_IS_AN_ERROR: [&str; 4] = [
    "LONGHORN_GUARD_CLIENT_CA",
    "LONGHORN_GUARD_TLS_DIR",
    "LONGHORN_GUARD_TLS_CERT",
    "LONGHORN_GUARD_TLS_KEY",
];

/// Treats every `LONGHORN_GUARD_*` environment variable whose value is empty or blank as unset,
/// so its flag's default applies: a manifest or chart that renders `value: ""` for an option it
/// leaves unset must not become a usage error ("a value is required"). The TLS and client-CA
/// variables ([`BLANK_IS_AN_ERROR`]) are made empty instead, so a blank one is that usage error
/// rather than a path of spaces. Call before parsing, while the process has one thread.
pub fn unset_blank_env() {
    let blank: Vec<_> = std::env::vars_os()
        .filter(|(k, v)| {
            k.to_str().is_some_and(|k| k.starts_with("LONGHORN_GUARD_"))
                && v.to_str().is_some_and(|v| v.trim().is_empty())
        })
        .map(|(k, _)| k)
        .collect();
    for k in blank {
        if k.to_str().is_some_and(|k| BLANK_IS_AN_ERROR.contains(&k)) {
            std::env::set_var(k, "");
        } else {
            std::env::remove_var(k);
        }
    }
}

/// The environment variables a command-line flag overrides beyond its own: the serving
/// certificate is named one way or the other (`--tls-dir`, or `--tls-cert` and `--tls-key`),
/// and a flag of one way wins over the variables of the other, as every flag wins over its own
/// variable. (Only both ways on the command line, or both in the environment, are a usage
/// error.)
pub fn env_overridden_by_flags(args: &[std::ffi::OsString]) -> Vec<&'static str> {
    let given = |flag: &str| {
        args.iter()
            .filter_map(|a| a.to_str())
            .any(|a| a == flag || a.strip_prefix(flag).is_some_and(|rest| rest.starts_with('=')))
    };
    let mut out = Vec::new();
    if given("--tls-dir") {
        out.extend(["LONGHORN_GUARD_TLS_CERT", "LONGHORN_GUARD_TLS_KEY"]);
    }
    if given("--tls-cert") || given("--tls-key") {
        out.push("LONGHORN_GUARD_TLS_DIR");
    }
    out
}

/// Removes the variables [`env_overridden_by_flags`] names for this process's command line.
/// Call before parsing, while the process has one thread.
pub fn unset_env_overridden_by_flags() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    for var in env_overridden_by_flags(&args) {
        std::env::remove_var(var);
    }
}

/// A `--log-level` filter the logger accepts: a typo is a usage error, not silently `info`.
fn log_filter(s: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("not a log filter (e.g. `info`, `longhorn_guard=debug`): {e}"))
}

impl Cli {
    /// The log filter in force: `--log-level` (or `LONGHORN_GUARD_LOG`), else `-v`'s level, else
    /// the command's default. `serve` and `gate` run unattended and log their work at `info`;
    /// an operator's command prints its answer on stdout and logs only warnings and errors
    /// unless asked.
    pub fn log_filter(&self) -> &str {
        match (&self.log_level, self.verbose) {
            (Some(filter), _) => filter,
            (None, 0) => match self.command {
                Command::Serve(_) | Command::Gate(_) => "info",
                _ => "warn",
            },
            (None, 1) => "info",
            (None, _) => "debug",
        }
    }
}

/// Installs logging, builds the runtime and runs the subcommand.
pub fn run(cli: Cli) -> ExitCode {
    init_logging(cli.log_format, cli.log_filter());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            crate::stderr_line!("longhorn-guard: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => crate::server::run(*args).await,
            Command::Certs(args) => crate::certs::run(args),
            Command::Review(args) => crate::review::run(args).await,
            Command::Lint(args) => crate::lint::run(args),
            Command::Check(CheckCommand::Drain(args)) => crate::check::run_drain(args).await,
            Command::Check(CheckCommand::Cluster(args)) => crate::check::cluster::run(args).await,
            Command::Gate(args) => crate::gate::run(args).await,
            Command::GatePolicy(args) => crate::mutate::gate_policy::run(args),
            Command::ReplicasPolicy(args) => crate::policy::replicas::admission_policy::run(args),
        }
    })
}

fn init_logging(format: LogFormat, filter: &str) {
    use tracing_subscriber::EnvFilter;
    // Checked while parsing (`log_filter`).
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        // A log line that cannot be written (standard error closed or full) is dropped;
        // reporting that on standard error again would panic.
        .log_internal_errors(false)
        // Each line is written to standard error as it is logged, in one write.
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tls_flag_of_one_way_overrides_the_variables_of_the_other() {
        let args = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert_eq!(
            env_overridden_by_flags(&args(&["serve", "--tls-cert", "c", "--tls-key=k"])),
            ["LONGHORN_GUARD_TLS_DIR"]
        );
        assert_eq!(
            env_overridden_by_flags(&args(&["serve", "--tls-dir=/certs"])),
            ["LONGHORN_GUARD_TLS_CERT", "LONGHORN_GUARD_TLS_KEY"]
        );
        assert!(env_overridden_by_flags(&args(&["serve", "--tls-directory", "x", "--state", "s"])).is_empty());
    }

    #[test]
    fn operator_commands_log_warnings_unless_asked_and_serve_logs_its_work() {
        // As if LONGHORN_GUARD_LOG were unset, unless the arguments give --log-level.
        let filter = |a: &[&str]| {
            let mut cli =
                Cli::try_parse_from(std::iter::once("longhorn-guard").chain(a.iter().copied())).unwrap();
            if !a.contains(&"--log-level") {
                cli.log_level = None;
            }
            cli.log_filter().to_string()
        };
        let drain = ["check", "drain", "node-1", "--wait"];
        assert_eq!(filter(&drain), "warn");
        assert_eq!(filter(&["-v", "check", "drain", "node-1", "--wait"]), "info");
        assert_eq!(filter(&["check", "drain", "node-1", "--wait", "-vv"]), "debug");
        assert_eq!(filter(&["--log-level", "trace", "-v", "check", "cluster"]), "trace");
        for cmd in
            [&["check", "cluster"][..], &["review", "--state", "s"], &["lint", "x"], &["certs", "--out", "d"]]
        {
            assert_eq!(filter(cmd), "warn", "{cmd:?}");
        }
        assert_eq!(filter(&["serve", "--tls-dir", "d"]), "info");
        assert_eq!(filter(&["gate", "--networks", "n"]), "info");
        assert_eq!(filter(&["--log-level", "warn", "serve", "--tls-dir", "d"]), "warn");
    }
}
