//! Longhorn's instance-manager PodDisruptionBudgets: which the guard's analysis needs and which
//! are stale, with what Longhorn's `syncInstanceManagerPDB` does about them (docs/drain.md).

use std::collections::BTreeSet;

use crate::cluster::{
    ClusterView, InstanceManager, COMPONENT_LABEL, INSTANCE_MANAGER_COMPONENT, LONGHORN_NAMESPACE,
};
use crate::policy::drain::{volume_of_engine_name, NodeAnalysis, VolumeReport};

use super::budgets::Budget;
use super::Bypass;

/// The label Longhorn's budget selects the instance manager's node by.
const NODE_LABEL: &str = "longhorn.io/node";

/// The id of a budget the guard's blocking volumes need.
pub const NEEDED: &str = "longhorn-pdb-needed";

/// Where Longhorn's handling of these budgets is, for messages.
pub const SOURCE: &str = "longhorn-manager controller/instance_manager_controller.go";

/// True for a budget Longhorn made for an instance manager (as Longhorn's own clean-up tells
/// them: in its namespace, selecting `longhorn.io/component=instance-manager`).
pub fn is_instance_manager_budget(b: &Budget) -> bool {
    b.namespace == LONGHORN_NAMESPACE && b.match_label(COMPONENT_LABEL) == Some(INSTANCE_MANAGER_COMPONENT)
}

/// The node an instance-manager budget protects: its instance manager's, else its selector's.
pub fn node_of<'a>(view: &'a ClusterView, b: &'a Budget) -> Option<&'a str> {
    view.instance_manager(&b.name).map(|im| im.spec.node_id.as_str()).or_else(|| b.match_label(NODE_LABEL))
}

/// The volumes whose replicas are on the instance manager's node, in any state, or whose
/// replicas or engines it runs. Longhorn's `canDeleteInstanceManagerPDB` counts every Replica
/// labelled with the node: a stopped replica of a detached volume keeps the budget too.
fn volumes_in(view: &ClusterView, im: &InstanceManager) -> BTreeSet<String> {
    let name = im.metadata.name.as_deref().unwrap_or("");
    let mut out: BTreeSet<String> = view
        .replicas_using_instance_manager(name)
        .chain(view.replicas_on_node(&im.spec.node_id))
        .filter_map(|r| r.volume())
        .map(str::to_string)
        .collect();
    let engines = im.status.instance_engines.keys().chain(im.status.instance_engine_frontends.keys());
    for e in engines {
        let volume = view.engine(e).and_then(|e| e.volume()).or_else(|| volume_of_engine_name(e));
        out.extend(volume.map(str::to_string));
    }
    for r in im.status.instance_replicas.keys() {
        out.extend(view.replica(r).and_then(|r| r.volume()).map(str::to_string));
    }
    out
}

/// The volumes the analysis blocks on that have a replica on the instance manager's node or an
/// instance in it, in name order: what its budget is needed for.
fn needed_by<'a>(
    view: &ClusterView,
    im: &InstanceManager,
    analysis: &'a NodeAnalysis,
) -> impl Iterator<Item = &'a VolumeReport> {
    let volumes = volumes_in(view, im);
    analysis.blocking().filter(move |v| volumes.contains(&v.volume))
}

/// What deleting a needed budget, or its instance-manager pod, would cost: its volumes by
/// whether the node holds their last healthy copy or only runs their engine. `None` for a
/// budget with no instance manager, or needed for no volume (only for entries no known volume
/// owns).
pub fn bypass(view: &ClusterView, b: &Budget, analysis: &NodeAnalysis) -> Option<Bypass> {
    let im = view.instance_manager(&b.name)?;
    let (last, engine): (Vec<&VolumeReport>, Vec<&VolumeReport>) =
        needed_by(view, im, analysis).partition(|v| v.reason.holds_last_copy());
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
    let delete = format!("kubectl -n {LONGHORN_NAMESPACE} delete pdb {}", b.name);
    let Some(im) = view.instance_manager(&b.name) else {
        return (
            "longhorn-pdb-stale",
            true,
            format!(
                "Longhorn's budget for instance manager {}, stale: that instance manager is gone; Longhorn deletes such \
                 budgets when it next reconciles an instance manager (cleanUpPDBForNonExistingIM, {SOURCE})",
                b.name
            ),
            format!("{delete} is safe: nothing it protected exists"),
        );
    };
    let mut needed: Vec<String> = needed_by(view, im, analysis).map(|v| v.volume.clone()).collect();
    if analysis.blocking_unmapped().any(|u| u.instance_manager == b.name) {
        needed.push(format!("entries no known volume owns in {}", b.name));
    }
    if !needed.is_empty() {
        return (
            NEEDED,
            true,
            format!(
                "Longhorn's budget for instance manager {}, needed: {node} holds replicas or engines of {}, which block \
                 the drain (verdicts above)",
                b.name,
                needed.join(", ")
            ),
            "do not delete it: once those volumes are protected elsewhere, Longhorn deletes it on the cordoned node \
             (canDeleteInstanceManagerPDB)"
                .into(),
        );
    }
    let safe = format!(
        "{delete} is safe: longhorn-guard's analysis finds no volume that needs instance manager {} \
         (Longhorn creates the budget again when that instance manager runs on a schedulable node)",
        b.name
    );
    let state = im.status.current_state.as_str();
    if state != "running" {
        let state = if state.is_empty() { "unknown" } else { state };
        (
            "longhorn-pdb-stale",
            true,
            format!(
                "Longhorn's budget for instance manager {}, stale: no replica or engine on {node} needs it, and the \
                 instance manager is {state}: Longhorn leaves the budget of an instance manager that is not running \
                 as it is (syncInstanceManagerPDB, {SOURCE}), so it stays",
                b.name
            ),
            safe,
        )
    } else if view.is_node_cordoned(node) == Some(true) {
        (
            "longhorn-pdb-stale",
            true,
            format!(
                "Longhorn's budget for instance manager {}, stale: no replica or engine on {node} needs it, yet it is \
                 still there on the cordoned node; Longhorn deletes it only when canDeleteInstanceManagerPDB passes \
                 ({SOURCE}): no engine on the node's instance managers, and under node-drain-policy each replica on \
                 the node has a healthy replica under a budget on another node; is the longhorn-manager pod on {node} \
                 running?",
                b.name
            ),
            safe,
        )
    } else {
        (
            "longhorn-pdb-until-cordon",
            false,
            format!(
                "Longhorn's budget for instance manager {}, not needed: no replica or engine on {node} needs it; \
                 Longhorn keeps it while {node} is schedulable and deletes it once the node is cordoned \
                 (kubectl drain cordons first; canDeleteInstanceManagerPDB, {SOURCE})",
                b.name
            ),
            format!("none needed; if it is still there after the cordon, {safe}"),
        )
    }
}
