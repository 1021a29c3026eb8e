//! Longhorn's instance-manager PodDisruptionBudgets: whether a drain of their node still needs
//! one. The drain doctor's `longhorn-pdb-*` findings (`check drain`) and the rule on deleting a
//! budget ([`super::budget_delete`]) both read this one verdict, and both write it with the
//! words of `message/budget.rs`, so the doctor's remedy and the webhook's answer agree.
//! What Longhorn's `syncInstanceManagerPDB` does about each case: docs/drain-internals.md.

use std::collections::BTreeSet;

use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;

use crate::cluster::{ClusterView, InstanceManager, COMPONENT_LABEL};
use crate::cluster::{INSTANCE_MANAGER_COMPONENT, INSTANCE_MANAGER_NODE_LABEL, LONGHORN_NAMESPACE};

use super::instances::volume_of_engine_name;

/// The id of a budget a drain of its node still needs.
pub const PDB_NEEDED: &str = "longhorn-pdb-needed";

/// What an instance-manager budget is to a drain of its node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BudgetVerdict {
    /// `longhorn-pdb-stale`: its instance manager no longer exists.
    Gone,
    /// `longhorn-pdb-needed`: volumes that block the drain have replicas on its node or
    /// replicas or engines in its instance manager (their names, then `entries no known volume
    /// owns in NAME` when such entries block too).
    Needed { needs: Vec<String> },
    /// `longhorn-pdb-stale`: nothing needs it and its instance manager is not running
    /// (`state`: the instance manager's state, `unknown` when empty), so Longhorn leaves it.
    NotRunning { state: String },
    /// `longhorn-pdb-stale`: nothing needs it, its instance manager runs, and the node is
    /// cordoned, yet it is still there.
    Cordoned,
    /// `longhorn-pdb-until-cordon`: nothing needs it; the node is schedulable, so Longhorn keeps
    /// it until the cordon.
    UntilCordon,
}

impl BudgetVerdict {
    /// The stable id (docs/drain.md, the doctor's ids).
    pub fn id(&self) -> &'static str {
        match self {
            Self::Needed { .. } => PDB_NEEDED,
            Self::UntilCordon => "longhorn-pdb-until-cordon",
            Self::Gone | Self::NotRunning { .. } | Self::Cordoned => "longhorn-pdb-stale",
        }
    }

    /// True when, refusing an eviction, it keeps a drain from finishing (every verdict but
    /// `longhorn-pdb-until-cordon`, which Longhorn drops at the cordon).
    pub fn blocks(&self) -> bool {
        !matches!(self, Self::UntilCordon)
    }

    pub fn is_needed(&self) -> bool {
        matches!(self, Self::Needed { .. })
    }
}

/// The verdict on the budget of instance manager `im` (Longhorn names the budget after it)
/// for a drain of `node`, on which the volumes in `blocking` block; `unmapped` when entries no
/// known volume owns in that instance manager block too.
pub fn budget_verdict(
    view: &ClusterView,
    im: &str,
    node: &str,
    blocking: &BTreeSet<&str>,
    unmapped: bool,
) -> BudgetVerdict {
    let Some(instance_manager) = view.instance_manager(im) else {
        return BudgetVerdict::Gone;
    };
    let mut needs: Vec<String> = budget_volumes(view, instance_manager)
        .into_iter()
        .filter(|v| blocking.contains(v.as_str()))
        .collect();
    if unmapped {
        needs.push(format!("entries no known volume owns in {im}"));
    }
    if !needs.is_empty() {
        return BudgetVerdict::Needed { needs };
    }
    match instance_manager.status.current_state.as_str() {
        "running" if view.is_node_cordoned(node) == Some(true) => BudgetVerdict::Cordoned,
        "running" => BudgetVerdict::UntilCordon,
        "" => BudgetVerdict::NotRunning { state: "unknown".into() },
        state => BudgetVerdict::NotRunning { state: state.into() },
    }
}

/// True for a budget Longhorn made for an instance manager, as Longhorn's own clean-up tells
/// them: in its namespace, selecting `longhorn.io/component=instance-manager`.
pub fn is_instance_manager_budget(namespace: &str, spec: Option<&PodDisruptionBudgetSpec>) -> bool {
    namespace == LONGHORN_NAMESPACE && match_label(spec, COMPONENT_LABEL) == Some(INSTANCE_MANAGER_COMPONENT)
}

/// The node the instance-manager budget `name` protects: its instance manager's, else the
/// `longhorn.io/node` its selector names.
pub fn budget_node<'a>(
    view: &'a ClusterView,
    name: &str,
    spec: Option<&'a PodDisruptionBudgetSpec>,
) -> Option<&'a str> {
    let im_node = view.instance_manager(name).map(|im| im.spec.node_id.as_str()).filter(|n| !n.is_empty());
    im_node.or_else(|| match_label(spec, INSTANCE_MANAGER_NODE_LABEL))
}

/// A `matchLabels` value of a budget's selector.
pub fn match_label<'a>(spec: Option<&'a PodDisruptionBudgetSpec>, key: &str) -> Option<&'a str> {
    spec?.selector.as_ref()?.match_labels.as_ref()?.get(key).map(String::as_str)
}

/// The volumes whose replicas are on the instance manager's node, in any state, or whose
/// replicas or engines it runs. Longhorn's `canDeleteInstanceManagerPDB` counts every Replica
/// labelled with the node: a stopped replica of a detached volume keeps the budget too.
pub fn budget_volumes(view: &ClusterView, im: &InstanceManager) -> BTreeSet<String> {
    let name = im.metadata.name.as_deref().unwrap_or("");
    let mut out: BTreeSet<String> = view
        .replicas_using_instance_manager(name)
        .chain(view.replicas_on_node(&im.spec.node_id))
        .filter_map(|r| r.volume())
        .map(str::to_string)
        .collect();
    let engines = im.status.engines().chain(im.status.instance_engine_frontends.keys());
    for e in engines {
        let volume = view.engine(e).and_then(|e| e.volume()).or_else(|| volume_of_engine_name(e));
        out.extend(volume.map(str::to_string));
    }
    for r in im.status.replicas() {
        out.extend(view.replica(r).and_then(|r| r.volume()).map(str::to_string));
    }
    out
}
