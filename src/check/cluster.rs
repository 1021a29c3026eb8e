//! `longhorn-guard check cluster`: the production checklist in one report, from a snapshot
//! (`--state`) or the live cluster. Exit 0: nothing is `error`; 1: something is; 2: bad input.

pub mod checks;
pub mod finding;
pub mod inventory;
pub mod live;
pub mod metrics;
pub mod network;
pub mod unreadable;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::SystemTime;

use serde::Serialize;

pub use finding::{Check, Finding, Severity};
pub use inventory::Inventory;

use super::CheckOutput;
use crate::cluster::snapshot::{items_of, SnapshotError};
use crate::cluster::{ClusterView, Object, Source};
use crate::output::bad_input;
use crate::policy::Policy;

/// Arguments of `longhorn-guard check cluster`.
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub input: super::CheckInput,
}

/// What one run found.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Report {
    pub findings: Vec<Finding>,
    pub summary: Summary,
    /// Per-node drain counts (for metrics; the JSON output has them as findings).
    #[serde(skip)]
    pub nodes: Vec<checks::volumes::NodeReadiness>,
}

/// Counts by severity, and the checks that ran.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
    pub info: usize,
    pub checks: Vec<&'static str>,
}

/// The cluster view the checks read: borrowed for the whole report (`check cluster`), or a
/// shared view taken under its lock for one piece of a check at a time (`serve`'s refresh),
/// so that no review and no watch waits behind a report.
pub trait ViewAccess {
    fn with<R>(&self, f: impl FnOnce(&ClusterView) -> R) -> R;
}

impl ViewAccess for ClusterView {
    fn with<R>(&self, f: impl FnOnce(&ClusterView) -> R) -> R {
        f(self)
    }
}

impl ViewAccess for crate::cluster::SharedView {
    fn with<R>(&self, f: impl FnOnce(&ClusterView) -> R) -> R {
        f(&self.read())
    }
}

impl Report {
    /// Runs every check over `inv` and `view`, in report order (after the objects that could
    /// not be read).
    pub fn build(inv: &Inventory, view: &impl ViewAccess, policy: &Policy, now: SystemTime) -> Self {
        let mut findings = inv.unreadable.findings();
        findings.extend(checks::nodes::node_conditions(inv));
        findings.extend(checks::nodes::disk_space(inv));
        findings.extend(checks::backups::backup_target(inv));
        findings.extend(checks::jobs::recurring_jobs(inv));
        findings.extend(checks::backups::snapshot_retention(inv));
        findings.extend(checks::volumes::replica_count(inv, view, policy, now));
        findings.extend(checks::volumes::volume_health(inv, view, policy, now));
        findings.extend(checks::volumes::settings(inv, policy));
        findings.extend(checks::network::storage_network(inv));
        let (drain, nodes) = checks::volumes::drain_readiness(inv, view, policy);
        findings.extend(drain);
        let n = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
        let summary = Summary {
            errors: n(Severity::Error),
            warnings: n(Severity::Warning),
            info: n(Severity::Info),
            checks: Check::ALL.iter().map(|c| c.id()).collect(),
        };
        Self { findings, summary, nodes }
    }

    /// 1 when any finding is an error, else 0.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.summary.errors > 0)
    }

    /// Findings grouped by check (in check order, errors first within a check), each with
    /// its remedy on the next line, then the one-line summary.
    pub fn table(&self) -> String {
        let mut by_check: BTreeMap<Check, Vec<&Finding>> = BTreeMap::new();
        for f in &self.findings {
            by_check.entry(f.check).or_default().push(f);
        }
        let mut out = String::new();
        for (check, mut list) in by_check {
            list.sort_by_key(|f| std::cmp::Reverse(f.severity));
            out.push_str(&format!("== {}\n", check.id()));
            for f in list {
                out.push_str(&format!("{:<8} {:<40} {}\n", f.severity.as_str(), f.object, f.message));
                if !f.remedy.is_empty() {
                    out.push_str(&format!("{:<8} {:<40} -> {}\n", "", "", f.remedy));
                }
            }
            out.push('\n');
        }
        out.push_str(&self.summary_line());
        out.push('\n');
        out
    }

    /// E.g. `check cluster: 2 errors, 5 warnings, 3 info (9 checks)`.
    pub fn summary_line(&self) -> String {
        let s = &self.summary;
        format!(
            "check cluster: {}, {}, {} info ({} checks)",
            finding::count(s.errors, "error"),
            finding::count(s.warnings, "warning"),
            s.info,
            s.checks.len()
        )
    }
}

/// Reads a snapshot file into the inventory and the drain view, item by item (a JSON List is
/// streamed: see [`crate::cluster::snapshot::items_of`]).
pub fn load_snapshot(path: &Path) -> Result<(Inventory, ClusterView), SnapshotError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| SnapshotError::Read { path: path.to_path_buf(), source })?;
    let (inv, objects) = items_of(
        &text,
        || (Inventory::default(), Vec::new()),
        |(inv, objects): &mut (Inventory, Vec<Object>), _label, item| {
            crate::cluster::snapshot::check_item(&item)?;
            crate::cluster::snapshot::check_version(&item)?;
            objects.extend(inv.ingest(item));
            Ok::<(), String>(())
        },
    )
    .map_err(|e| SnapshotError::from_items(path, e))?;
    drop(text);
    if objects.is_empty() && inv.read.is_empty() && inv.settings.is_empty() && inv.unreadable.is_empty() {
        return Err(SnapshotError::Empty { path: path.to_path_buf() });
    }
    if inv.unreadable.is_empty() && inv.read.is_empty() {
        // Unreadable objects are findings of their own, and the kinds only these checks read
        // (`inv.read`) are Longhorn's; otherwise the rule of every snapshot: without a Longhorn
        // object the checks would find nothing wrong.
        crate::cluster::snapshot::check_contents(path, &objects)?;
    }
    let now = SystemTime::now();
    let view = ClusterView::from_objects(Source::Snapshot(path.display().to_string()), objects, now);
    Ok((inv, view.derive(crate::policy::drain::derivations(), now)))
}

/// Runs the command; see the module doc for exit codes.
pub async fn run(args: ClusterArgs) -> ExitCode {
    let policy = match Policy::load(args.input.policy.as_deref()) {
        Ok(p) => p,
        Err(e) => return bad_input("check cluster", &format!("policy: {e}")),
    };
    let loaded = match &args.input.state {
        Some(path) => load_snapshot(path).map_err(|e| e.to_string()),
        None => live::read().await,
    };
    let (inv, view) = match loaded {
        Ok(v) => v,
        Err(e) => return bad_input("check cluster", &e),
    };
    let report = Report::build(&inv, &view, &policy, SystemTime::now());
    let text = match args.input.output {
        CheckOutput::Table => report.table(),
        CheckOutput::Json => match serde_json::to_string_pretty(&report) {
            Ok(s) => format!("{s}\n"),
            Err(e) => return bad_input("check cluster", &format!("cannot render JSON: {e}")),
        },
    };
    super::print_and("check cluster", report.exit_code(), &text)
}
