//! `longhorn-guard gate`: the init container that waits for the storage network.
//!
//! Waits until the pod's own network status lists every expected network (`name == ns/nad`)
//! with an IP — the condition Longhorn uses to pick the storage IP — and the interface exists
//! under `/sys/class/net`. Exit 0 when ready, 1 at the deadline, 2 on bad arguments.
//! Pure parsing and checks live in [`status`]; reading the API server and files in [`source`].

mod go_json;
pub mod kubelet_file;
pub mod networks;
pub mod source;
pub mod status;

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tokio::time::Instant;

use self::networks::{parse_networks, ExpectedNetwork};
use self::source::ApiSource;
use self::status::{check, ready_line, timeout_message, Missing};
use crate::policy::config::MAX_GATE_TIMEOUT;

/// Where the mutation mounts the downward-API volume of `metadata.annotations`.
pub const DEFAULT_ANNOTATIONS_FILE: &str = "/etc/longhorn-guard/podinfo/annotations";

/// Whether the gate asks the API server for its pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ApiMode {
    /// GET the own pod with the in-cluster service account; the file when that fails.
    Auto,
    /// Only the downward-API annotations file.
    Off,
}

/// Arguments of `longhorn-guard gate`.
#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// Networks to wait for, in either form of the `k8s.v1.cni.cncf.io/networks` annotation:
    /// `ns/name@iface,...` or the JSON list. A name without namespace is in the pod's namespace.
    #[arg(long, env = "LONGHORN_GUARD_GATE_NETWORKS")]
    pub networks: String,
    /// Give up (exit 1) after this long, e.g. `60s`, `2m`.
    #[arg(long, env = "LONGHORN_GUARD_GATE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Time between checks, e.g. `1s`, `250ms`.
    #[arg(long, env = "LONGHORN_GUARD_GATE_POLL_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub poll_interval: Duration,
    /// The pod's name (downward API).
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// The pod's namespace (downward API).
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: Option<String>,
    /// The downward-API file of `metadata.annotations`, read when the API server cannot be.
    #[arg(long, env = "LONGHORN_GUARD_GATE_ANNOTATIONS_FILE", default_value = DEFAULT_ANNOTATIONS_FILE)]
    pub annotations_file: PathBuf,
    /// Where the pod's network interfaces are listed.
    #[arg(long, default_value = "/sys/class/net")]
    pub sys_class_net: PathBuf,
    /// `auto`: read the own pod from the API server, falling back to the file; `off`: file only.
    #[arg(long, value_enum, default_value = "auto")]
    pub api: ApiMode,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = crate::policy::duration::parse(text)?;
    if d.is_zero() {
        return Err("must be longer than 0s".into());
    }
    if d > MAX_GATE_TIMEOUT {
        return Err("must be at most 1h (a pod waiting longer is better failed and recreated)".into());
    }
    Ok(d)
}

/// What the wait loop needs, validated.
#[derive(Clone, Debug)]
pub struct GateOptions {
    pub networks: Vec<ExpectedNetwork>,
    pub timeout: Duration,
    pub poll_interval: Duration,
    pub annotations_file: PathBuf,
    pub sys_class_net: PathBuf,
}

/// How the wait ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every network is ready; the one log line.
    Ready(String),
    /// The deadline passed; the failure message.
    TimedOut(String),
}

impl GateArgs {
    /// Validates the arguments into options; the error is a one-line usage message.
    pub fn options(&self) -> Result<GateOptions, String> {
        let networks = parse_networks(&self.networks, self.pod_namespace.as_deref())
            .map_err(|e| format!("--networks {:?}: {e}", self.networks))?;
        if networks.is_empty() {
            return Err("--networks names no network; pass e.g. kube-system/storage-net@lhnet1".into());
        }
        Ok(GateOptions {
            networks,
            timeout: self.timeout,
            poll_interval: self.poll_interval,
            annotations_file: self.annotations_file.clone(),
            sys_class_net: self.sys_class_net.clone(),
        })
    }
}

/// Runs the gate: exit 0 ready, 1 timed out, 2 bad arguments.
pub async fn run(args: GateArgs) -> ExitCode {
    // Listening from the start: the gate is PID 1, which has no default action for SIGTERM.
    let mut signals = crate::signal::Termination::listen();
    let opts = match args.options() {
        Ok(o) => o,
        Err(e) => {
            tracing::error!("longhorn-guard gate: {e}");
            return ExitCode::from(2);
        }
    };
    let api = match args.api {
        ApiMode::Off => None,
        ApiMode::Auto => {
            let (Some(ns), Some(name)) = (args.pod_namespace.as_deref(), args.pod_name.as_deref()) else {
                tracing::error!(
                    "longhorn-guard gate: --api auto needs --pod-name/POD_NAME and --pod-namespace/POD_NAMESPACE; \
                     set them from the downward API or pass --api off"
                );
                return ExitCode::from(2);
            };
            let unreachable = |e: &String| {
                let file = opts.annotations_file.display();
                tracing::warn!("cannot reach the API server ({e}); reading annotations only from {file}");
            };
            ApiSource::in_cluster(ns, name).inspect_err(unreachable).ok()
        }
    };
    let outcome = tokio::select! {
        o = wait(&opts, api.as_ref()) => o,
        () = signals.recv() => {
            tracing::warn!("longhorn-guard gate: asked to stop before the storage network was ready");
            return ExitCode::from(1);
        }
    };
    match outcome {
        Outcome::Ready(line) => {
            tracing::info!("{line}");
            ExitCode::SUCCESS
        }
        Outcome::TimedOut(message) => {
            tracing::error!("{message}");
            ExitCode::from(1)
        }
    }
}

/// Polls until every network is ready or the timeout passes. Malformed annotations and API
/// failures are logged once each, not on every poll.
pub async fn wait(opts: &GateOptions, api: Option<&ApiSource>) -> Outcome {
    // The CLI and the policy cap the timeout at 1h; cap here too so no caller can overflow.
    let start = Instant::now();
    let deadline = start.checked_add(opts.timeout.min(MAX_GATE_TIMEOUT)).unwrap_or(start);
    let mut logged: HashSet<String> = HashSet::new();
    loop {
        let (read, origin) = read_annotations(opts, api, &mut logged).await;
        let missing = match read {
            Ok(annotations) => {
                // `check` asks only for valid interface names (no `/`, `.` or `..`).
                let exists = |iface: &str| opts.sys_class_net.join(iface).exists();
                match check(&opts.networks, &annotations, &exists) {
                    Ok(found) => return Outcome::Ready(ready_line(&found, &origin)),
                    Err(missing) => missing,
                }
            }
            Err(reason) => Missing::Unreadable { reason },
        };
        if let Missing::Malformed { .. } = &missing {
            let text = missing.to_string();
            if logged.insert(text.clone()) {
                tracing::warn!("{text}; waiting for Multus to rewrite it");
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Outcome::TimedOut(timeout_message(&opts.networks, opts.timeout, &missing));
        }
        tokio::time::sleep(opts.poll_interval.min(deadline - now)).await;
    }
}

async fn read_annotations(
    opts: &GateOptions,
    api: Option<&ApiSource>,
    logged: &mut HashSet<String>,
) -> (Result<std::collections::BTreeMap<String, String>, String>, String) {
    let file = opts.annotations_file.display().to_string();
    let mut api_error = None;
    if let Some(api) = api {
        match api.annotations().await {
            Ok(map) => return (Ok(map), "the API server".to_string()),
            Err(e) => {
                if logged.insert("api".into()) {
                    tracing::warn!("cannot read the pod from the API server ({e}); falling back to {file}");
                }
                api_error = Some(e);
            }
        }
    }
    let read = source::file_annotations(&opts.annotations_file).await;
    let read = read.map_err(|e| match api_error {
        Some(a) => format!("{a}; {e}"),
        None => e,
    });
    (read, file)
}
