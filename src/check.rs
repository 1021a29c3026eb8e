//! `longhorn-guard check drain NODE`: the webhook's own [`analyze_node`] as a preflight report,
//! against a snapshot (`--state`) or the live cluster, with the drain doctor ([`drain`]). Exit 0:
//! a drain would proceed; 1: it would block; 2: bad input.

pub mod cluster;
pub mod drain;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use serde_json::json;

use crate::cluster::{snapshot, ClusterView};
use crate::output::bad_input;
use crate::policy::drain::confirm;
use crate::policy::drain::{analyze_node, NodeAnalysis};
use crate::policy::Policy;

/// Arguments of `longhorn-guard check drain`.
#[derive(Debug, clap::Args)]
pub struct DrainArgs {
    /// The node to check (not with --all).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub node: Option<String>,
    /// A maintenance plan over every Longhorn node instead of one node: which can be drained
    /// now one at a time, which together (greedy batch), what the rest wait for.
    #[arg(long)]
    pub all: bool,
    /// Wait until nothing of longhorn-guard's blocks a drain of NODE (live cluster only, from
    /// watches; never writes).
    #[arg(long, conflicts_with_all = ["state", "all"])]
    pub wait: bool,
    /// With --wait: give up after this long (exit 1).
    #[arg(long, value_name = "DURATION", requires = "wait", value_parser = drain_duration)]
    pub timeout: Option<std::time::Duration>,
    #[command(flatten)]
    pub input: CheckInput,
    /// The `kubectl drain --timeout` the drain will run with: pods whose
    /// terminationGracePeriodSeconds is longer are reported as never going.
    #[arg(long, value_name = "DURATION", value_parser = drain_duration)]
    pub drain_timeout: Option<std::time::Duration>,
}

/// A duration flag (`90s`, `10m`, `1h`): more than zero, at most 24 h.
fn drain_duration(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("not a duration (e.g. 90s, 10m): {e}"))?;
    if d.is_zero() || d > std::time::Duration::from_secs(24 * 3600) {
        return Err("must be more than 0 and at most 24h".into());
    }
    Ok(d)
}

/// What every `check` reads and how it prints: `--state`, `--policy`, `--output`.
#[derive(Debug, clap::Args)]
pub struct CheckInput {
    /// Cluster snapshot; without it the live cluster is read (KUBECONFIG or in-cluster).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Policy file (YAML); defaults apply when absent.
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_POLICY")]
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

/// Runs the check; see the module doc for the exit codes.
pub async fn run_drain(args: DrainArgs) -> ExitCode {
    let policy = match Policy::load(args.input.policy.as_deref()) {
        Ok(p) => p,
        Err(e) => return bad_input("check drain", &format!("policy: {e}")),
    };
    if args.all {
        return run_plan(&args, &policy).await;
    }
    let node = args.node.as_deref().unwrap_or_default();
    if args.wait {
        return drain::wait::run(node, &policy, args.timeout).await;
    }
    let (view, scene) = match &args.input.state {
        Some(path) => match snapshot::load_observing(path, drain::Scene::default, |s, v| s.take(node, v)) {
            Ok((v, scene)) => (v.derive(crate::policy::drain::derivations(), SystemTime::now()), scene),
            Err(e) => return bad_input("check drain", &format!("state: {e}")),
        },
        None => match live_view(node).await {
            Ok(v) => v,
            Err(e) => return bad_input("check drain", &e),
        },
    };
    if let Some(first) = scene.unreadable.first() {
        return bad_input("check drain", &format!("cannot read {first}"));
    }
    if view.node(node).is_none() && view.longhorn_node(node).is_none() {
        let mut known: Vec<&str> = view.longhorn_nodes().filter_map(|n| n.metadata.name.as_deref()).collect();
        known.sort_unstable();
        let source = match &args.input.state {
            Some(p) => format!("the snapshot {}", p.display()),
            None => "the cluster".to_string(),
        };
        let hint =
            if known.is_empty() { String::new() } else { format!(" (known nodes: {})", known.join(", ")) };
        return bad_input("check drain", &format!("node {node} is not in {source}{hint}"));
    }
    let now = SystemTime::now();
    let analysis = analyze_node(&view, node, &policy, now);
    let diagnosis = drain::diagnose(&view, &analysis, &scene, args.drain_timeout, now);
    let text = match args.input.output {
        CheckOutput::Table => drain::render::report(&analysis, &diagnosis),
        CheckOutput::Json => {
            let json = render_json_with(&analysis, &diagnosis);
            format!("{}\n", serde_json::to_string_pretty(&json).unwrap_or_default())
        }
    };
    print_and("check drain", u8::from(analysis.would_block() || diagnosis.blocks()), &text)
}

/// `check drain --all`: exit 0 when every node can be drained now (one at a time), 1 when some
/// node waits, 2 on bad input.
async fn run_plan(args: &DrainArgs, policy: &Policy) -> ExitCode {
    let view = match &args.input.state {
        Some(path) => match snapshot::load(path) {
            Ok(v) => v.derive(crate::policy::drain::derivations(), SystemTime::now()),
            Err(e) => return bad_input("check drain", &format!("state: {e}")),
        },
        None => match cluster::live::read().await {
            // Derived already.
            Ok((_, v)) => v,
            Err(e) => return bad_input("check drain", &format!("cluster: {e}")),
        },
    };
    let plan = drain::plan::plan(&view, policy, SystemTime::now());
    let text = match args.input.output {
        CheckOutput::Table => drain::plan::table(&plan),
        CheckOutput::Json => format!("{}\n", serde_json::to_string_pretty(&plan).unwrap_or_default()),
    };
    print_and("check drain", u8::from(!plan.nodes.iter().all(|n| n.drainable_now)), &text)
}

/// Prints `text` and exits with `code`; with 2 (bad input) when stdout cannot be written.
pub(crate) fn print_and(command: &str, code: u8, text: &str) -> ExitCode {
    if let Err(e) = crate::output::stdout(text) {
        return bad_input(command, &e);
    }
    ExitCode::from(code)
}

async fn live_view(node: &str) -> Result<(ClusterView, drain::Scene), String> {
    let client = crate::cluster::client::try_default()
        .await
        .map_err(|e| format!("cannot build a Kubernetes client (KUBECONFIG or in-cluster): {e}"))?;
    let within = crate::cluster::client::READ_TIMEOUT;
    let view = async {
        tokio::time::timeout(within, confirm::read_node_state(&client, node))
            .await
            .map_err(|_| format!("cluster: the API server did not answer within {}s", within.as_secs()))?
            .map_err(|e| format!("cluster: {e}"))
    };
    futures::try_join!(view, drain::live::read_scene(&client, node))
}

/// The JSON report: the analysis plus `drain: proceed|block`.
pub fn render_json(a: &NodeAnalysis) -> serde_json::Value {
    json!({
        "node": a.node,
        "drain": if a.would_block() { "block" } else { "proceed" },
        "nodeOverride": a.node_override,
        "volumes": a.volumes,
        "unmappedInstances": a.unmapped_instances,
    })
}

/// [`render_json`] with the doctor's findings (`findings`, `kubectlDrain`, `podsRead`,
/// `podDisruptionBudgetsRead`); `drain` is `block` when either blocks.
pub fn render_json_with(a: &NodeAnalysis, d: &drain::Diagnosis) -> serde_json::Value {
    let mut v = render_json(a);
    v["drain"] = json!(if a.would_block() || d.blocks() { "block" } else { "proceed" });
    v["findings"] = json!(d.findings);
    v["kubectlDrain"] = json!(d.kubectl_drain);
    v["podsRead"] = json!(d.pods_read);
    v["podDisruptionBudgetsRead"] = json!(d.budgets_read);
    v
}

/// The guard's table (per volume, then the instance-manager entries no known volume owns) and
/// its verdict line, without the doctor's findings.
pub fn render_table(a: &NodeAnalysis) -> String {
    drain::render::volumes(a) + &drain::render::verdict(a, None)
}
