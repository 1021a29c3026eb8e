//! The `check cluster` findings as Prometheus gauges, refreshed by `serve` on a schedule:
//! counts by check and severity (never one series per object), per-node drain readiness, and
//! when the checks last ran. `serve` keeps a [`ChecksStatus`] and appends it to `/metrics`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use super::{Check, Inventory, Report, Severity, ViewAccess};
use crate::cluster::SharedView;
use crate::exposition::family;
use crate::policy::Policy;

/// The metric names this module exports (docs/monitoring.md).
pub const NAMES: [&str; 5] = [
    "longhorn_guard_findings",
    "longhorn_guard_node_drain_ready",
    "longhorn_guard_node_drain_blocking_volumes",
    "longhorn_guard_checks_last_run_timestamp_seconds",
    "longhorn_guard_checks_runs_total",
];

/// The last completed run and run counts.
#[derive(Clone, Debug, Default)]
pub struct ChecksStatus {
    /// Findings per (check, severity), every pair present (zero when none).
    counts: BTreeMap<(Check, Severity), usize>,
    /// Node -> volumes a drain would wait for.
    nodes: BTreeMap<String, usize>,
    last_run: Option<SystemTime>,
    ok: u64,
    failed: u64,
}

/// Shared between the refresh task and the `/metrics` handler.
pub type SharedChecks = Arc<Mutex<ChecksStatus>>;

impl ChecksStatus {
    /// Records a completed run.
    pub fn record(&mut self, report: &Report, at: SystemTime) {
        let severities = [Severity::Error, Severity::Warning, Severity::Info];
        self.counts = Check::ALL.iter().flat_map(|&c| severities.map(|s| ((c, s), 0))).collect();
        for f in &report.findings {
            *self.counts.entry((f.check, f.severity)).or_default() += 1;
        }
        self.nodes = report.nodes.iter().map(|n| (n.node.clone(), n.blocking)).collect();
        self.last_run = Some(at);
        self.ok += 1;
    }
}

/// How long after the view has synced `serve` runs its first refresh: the start's own work
/// (the lists, the heap handed back after them, the first proofs) is over by then, so the
/// refresh neither slows it nor adds its memory to the start's peak (docs/scale.md).
pub const FIRST_REFRESH_AFTER_SYNC: Duration = Duration::from_secs(10);

/// Runs the checks once over an inventory and view, recording the result.
pub fn run_once(status: &SharedChecks, inv: &Inventory, view: &impl ViewAccess, policy: &Policy) -> Report {
    let now = SystemTime::now();
    let report = Report::build(inv, view, policy, now);
    status.lock().unwrap_or_else(|p| p.into_inner()).record(&report, now);
    report
}

/// Refreshes from the live cluster every `every` until the task is dropped, the first time
/// [`FIRST_REFRESH_AFTER_SYNC`] after the view has synced: the drain kinds come from `view`,
/// only what it lacks is listed. The checks run on the blocking pool and take the view's lock
/// for a few objects at a time ([`ViewAccess`]), so no review waits for them. A failed run is
/// logged, counted, and leaves the last findings in place.
pub async fn refresh_loop(
    client: kube::Client,
    view: SharedView,
    policy: Arc<Policy>,
    every: Duration,
    status: SharedChecks,
) {
    while !view.read().freshness().synced {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(FIRST_REFRESH_AFTER_SYNC).await;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let started = std::time::Instant::now();
        match super::live::read_inventory(&client).await {
            // A panic in the checks (a bug) is a failed run, not the end of every later one.
            Ok(inv) => match checked(&status, inv, &view, &policy).await {
                Ok(r) => tracing::info!(
                    errors = r.summary.errors,
                    warnings = r.summary.warnings,
                    took_ms = started.elapsed().as_millis() as u64,
                    "cluster checks refreshed"
                ),
                Err(panic) => {
                    status.lock().unwrap_or_else(|p| p.into_inner()).failed += 1;
                    let what = crate::clip::panic_text(panic.as_ref());
                    tracing::error!(
                        panic = %crate::clip::clip_to(&what, crate::clip::MAX_TEXT),
                        "cluster checks panicked; keeping the last findings and trying again at the next refresh"
                    );
                }
            },
            Err(e) => {
                status.lock().unwrap_or_else(|p| p.into_inner()).failed += 1;
                tracing::warn!(error = %e, "cluster checks could not read the cluster; keeping the last findings");
            }
        }
        crate::heap::release_soon();
    }
}

/// [`run_once`] on the blocking pool over the shared view; `Err` with the panic's payload.
async fn checked(
    status: &SharedChecks,
    inv: Inventory,
    view: &SharedView,
    policy: &Arc<Policy>,
) -> Result<Report, Box<dyn std::any::Any + Send>> {
    let (status, view, policy) = (status.clone(), view.clone(), policy.clone());
    let run = move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_once(&status, &inv, &view, &policy)))
    };
    match tokio::task::spawn_blocking(run).await {
        Ok(result) => result,
        Err(e) => Err(Box::new(format!("the checks' task ended: {e}"))),
    }
}

impl Collector for ChecksStatus {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut f = family(
            &mut encoder,
            "longhorn_guard_findings",
            "check cluster findings by check and severity at the last run.",
            MetricType::Gauge,
        )?;
        for ((check, sev), n) in &self.counts {
            f.labelled(&[("check", check.id()), ("severity", sev.as_str())], *n as f64)?;
        }
        let mut f = family(
            &mut encoder,
            "longhorn_guard_node_drain_ready",
            "1 when a drain of the node would proceed now, 0 when it would wait.",
            MetricType::Gauge,
        )?;
        for (node, blocking) in &self.nodes {
            f.labelled(&[("node", node.as_str())], f64::from(u8::from(*blocking == 0)))?;
        }
        let mut f = family(
            &mut encoder,
            "longhorn_guard_node_drain_blocking_volumes",
            "Volumes a drain of the node would wait for.",
            MetricType::Gauge,
        )?;
        for (node, blocking) in &self.nodes {
            f.labelled(&[("node", node.as_str())], *blocking as f64)?;
        }
        let mut f = family(
            &mut encoder,
            "longhorn_guard_checks_last_run_timestamp_seconds",
            "Unix time of the last completed cluster check run.",
            MetricType::Gauge,
        )?;
        if let Some(t) = self.last_run {
            f.value(t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) as f64)?;
        }
        let mut f = family(
            &mut encoder,
            "longhorn_guard_checks_runs",
            "Cluster check runs by result.",
            MetricType::Counter,
        )?;
        f.labelled(&[("result", "ok")], self.ok as f64)?;
        f.labelled(&[("result", "failed")], self.failed as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_and_severity_has_a_series_and_nodes_are_counted() {
        let demo = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/demo/cluster-snapshot.yaml"));
        let (inv, view) = super::super::load_snapshot(demo).unwrap();
        let status = SharedChecks::default();
        run_once(&status, &inv, &view, &Policy::default());
        let mut out = String::new();
        crate::exposition::append(&mut out, status.lock().unwrap().clone());
        assert_eq!(out.matches("longhorn_guard_findings{").count(), 30);
        assert!(
            out.contains("longhorn_guard_findings{check=\"backup-target\",severity=\"error\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("longhorn_guard_findings{check=\"settings\",severity=\"warning\"} 0\n"),
            "{out}"
        );
        assert!(out.contains("longhorn_guard_node_drain_ready{node=\"node-2\"} 0\n"), "{out}");
        assert!(out.contains("longhorn_guard_node_drain_ready{node=\"node-3\"} 1\n"), "{out}");
        assert!(out.contains("longhorn_guard_node_drain_blocking_volumes{node=\"node-2\"} 2\n"), "{out}");
        assert!(out.contains("longhorn_guard_checks_runs_total{result=\"ok\"} 1\n"), "{out}");
        for name in NAMES {
            assert!(out.contains(&format!("# TYPE {name} ")), "{name}");
        }
    }
}
