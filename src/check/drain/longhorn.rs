//! Longhorn's instance-manager PodDisruptionBudgets in the doctor's terms: the verdict and its
//! words are the policy's ([`budget_verdict`]), shared with the rule on deleting a budget, so
//! the doctor's remedy and the webhook's answer agree (docs/drain.md).

use std::collections::BTreeSet;

use crate::cluster::{ClusterView, InstanceManager};
use crate::policy::drain::{self, budget_verdict, NodeAnalysis, VolumeReport};

use super::budgets::Budget;
use super::Bypass;

/// The id of a budget the guard's blocking volumes need.
pub const NEEDED: &str = drain::PDB_NEEDED;

/// True for a budget Longhorn made for an instance manager (as Longhorn's own clean-up tells
/// them: in its namespace, selecting `longhorn.io/component=instance-manager`).
pub fn is_instance_manager_budget(b: &Budget) -> bool {
    drain::is_instance_manager_budget(&b.namespace, b.pdb.spec.as_ref())
}

/// The node an instance-manager budget protects: its instance manager's, else its selector's.
pub fn node_of<'a>(view: &'a ClusterView, b: &'a Budget) -> Option<&'a str> {
    drain::budget_node(view, &b.name, b.pdb.spec.as_ref())
}

/// The volumes the analysis blocks on that have a replica on the instance manager's node or an
/// instance in it, in name order: what its budget is needed for.
fn needed_by<'a>(
    view: &ClusterView,
    im: &InstanceManager,
    analysis: &'a NodeAnalysis,
) -> impl Iterator<Item = &'a VolumeReport> {
    let volumes = drain::budget_volumes(view, im);
    analysis.blocking().filter(move |v| volumes.contains(&v.volume))
}

/// The volumes whose engine (or engine frontend) runs in `im`, by its status or the Engine's:
/// the engines that deleting its pod stops.
fn engines_in(view: &ClusterView, im: &InstanceManager) -> BTreeSet<String> {
    let name = im.metadata.name.as_deref().unwrap_or_default();
    let listed = drain::engines_reported_by([im]);
    let listed = listed
        .iter()
        .filter_map(|e| view.engine(e).and_then(|e| e.volume()).or_else(|| drain::volume_of_engine_name(e)));
    let by_engine = view
        .engines_on_node(&im.spec.node_id)
        .filter(|e| e.status.instance_manager_name.as_str() == name)
        .filter_map(|e| e.volume());
    listed.chain(by_engine).map(str::to_string).collect()
}

/// What deleting a needed budget, or its instance-manager pod, would cost: its volumes by
/// whether the node holds their last healthy copy or only runs their engine, an engine only
/// when it runs in that instance manager (during a Longhorn upgrade a node has two, and the
/// new one's pod stops no engine the old one runs). `None` for a budget with no instance
/// manager, or with no such cost (only for entries no known volume owns, or engines elsewhere).
pub fn bypass(view: &ClusterView, b: &Budget, analysis: &NodeAnalysis) -> Option<Bypass> {
    let im = view.instance_manager(&b.name)?;
    let (last, engine): (Vec<&VolumeReport>, Vec<&VolumeReport>) =
        needed_by(view, im, analysis).partition(|v| v.reason.holds_last_copy());
    let running = engines_in(view, im);
    let engine: Vec<&VolumeReport> = engine.into_iter().filter(|v| running.contains(&v.volume)).collect();
    let names = |vs: Vec<&VolumeReport>| vs.into_iter().map(|v| v.volume.clone()).collect::<Vec<_>>();
    let cost = Bypass { last_copy: names(last), engine_stops: names(engine) };
    (!cost.last_copy.is_empty() || !cost.engine_stops.is_empty()).then_some(cost)
}

/// What an instance-manager budget is to a drain of `node` under `analysis`: a stable id,
/// whether it blocks (given that it refuses an eviction now), the reason and the remedy. It is
/// needed when volumes the analysis blocks on have a replica on its node or an engine in it;
/// otherwise stale, with what Longhorn does about it.
pub fn explain(
    view: &ClusterView,
    b: &Budget,
    node: &str,
    analysis: &NodeAnalysis,
) -> (&'static str, bool, String, String) {
    let blocking: BTreeSet<&str> = analysis.blocking().map(|v| v.volume.as_str()).collect();
    let unmapped = analysis.blocking_unmapped().any(|u| u.instance_manager == b.name);
    let verdict = budget_verdict(view, &b.name, node, &blocking, unmapped);
    let mut reason = verdict.reason(&b.name, node);
    if verdict.is_needed() {
        // The doctor prints the guard's verdicts on those volumes above its findings.
        reason.push_str(" (verdicts above)");
    }
    (verdict.id(), verdict.blocks(), reason, verdict.remedy(&b.name))
}
