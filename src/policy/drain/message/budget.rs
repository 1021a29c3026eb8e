//! The words of a [`BudgetVerdict`]: the one place the drain doctor's `longhorn-pdb-*`
//! findings and the answer to deleting one of Longhorn's budgets are written from.

use crate::cluster::LONGHORN_NAMESPACE;
use crate::decision::{wrap, MAX_WARNING_LEN};

use super::super::budget::BudgetVerdict;

/// Where Longhorn's handling of these budgets is, for messages.
pub const SOURCE: &str = "longhorn-manager controller/instance_manager_controller.go";

impl BudgetVerdict {
    /// Why the budget of instance manager `im` is what it is to a drain of `node`.
    pub fn reason(&self, im: &str, node: &str) -> String {
        match self {
            Self::Gone => format!(
                "Longhorn's budget for instance manager {im}, stale: that instance manager is gone; Longhorn deletes such \
                 budgets when it next reconciles an instance manager (cleanUpPDBForNonExistingIM, {SOURCE})"
            ),
            Self::Needed { needs } => format!(
                "Longhorn's budget for instance manager {im}, needed: {node} holds replicas or engines of {}, which block \
                 the drain",
                needs.join(", ")
            ),
            Self::NotRunning { state } => format!(
                "Longhorn's budget for instance manager {im}, stale: no replica or engine on {node} needs it, and the \
                 instance manager is {state}: Longhorn leaves the budget of an instance manager that is not running \
                 as it is (syncInstanceManagerPDB, {SOURCE}), so it stays"
            ),
            Self::Cordoned => format!(
                "Longhorn's budget for instance manager {im}, stale: no replica or engine on {node} needs it, yet it is \
                 still there on the cordoned node; Longhorn deletes it only when canDeleteInstanceManagerPDB passes \
                 ({SOURCE}): no engine on the node's instance managers, and under node-drain-policy each replica on \
                 the node has a healthy replica under a budget on another node; is the longhorn-manager pod on {node} \
                 running?"
            ),
            Self::UntilCordon => format!(
                "Longhorn's budget for instance manager {im}, not needed: no replica or engine on {node} needs it; \
                 Longhorn keeps it while {node} is schedulable and deletes it once the node is cordoned \
                 (kubectl drain cordons first; canDeleteInstanceManagerPDB, {SOURCE})"
            ),
        }
    }

    /// What to do about the budget of instance manager `im`.
    pub fn remedy(&self, im: &str) -> String {
        let delete = format!("kubectl -n {LONGHORN_NAMESPACE} delete pdb {im}");
        let safe = || {
            format!(
                "{delete} is safe: longhorn-guard's analysis finds no volume that needs instance manager {im} \
                 (Longhorn creates the budget again when that instance manager runs on a schedulable node)"
            )
        };
        match self {
            Self::Gone => format!("{delete} is safe: nothing it protected exists"),
            Self::Needed { .. } => {
                "do not delete it: once those volumes are protected elsewhere, Longhorn deletes it \
                                    on the cordoned node (canDeleteInstanceManagerPDB)"
                    .into()
            }
            Self::NotRunning { .. } | Self::Cordoned => safe(),
            Self::UntilCordon => format!("none needed; if it is still there after the cordon, {}", safe()),
        }
    }
}

/// `longhorn-guard: ID poddisruptionbudget longhorn-system/IM: reason; remedy`, as the doctor
/// prints the finding: the first line of the denial of deleting the budget of instance manager
/// `im` on `node`.
pub fn budget_refusal(im: &str, verdict: &BudgetVerdict, node: &str) -> String {
    format!("{}: {}; {}", budget_is(im, verdict), verdict.reason(im, node), verdict.remedy(im))
}

/// The warnings of an allowed deletion of the budget of instance manager `im`: its verdict and
/// the doctor's remedy, cut between words into lines of at most [`MAX_WARNING_LEN`] characters
/// (the doctor's reason, several lines more, is `longhorn-guard check drain NODE`'s to print).
pub fn budget_allowed(im: &str, verdict: &BudgetVerdict, node: Option<&str>) -> Vec<String> {
    let why = match node {
        Some(node) => format!(" (longhorn-guard check drain {node} says why)"),
        None => String::new(),
    };
    wrap(&format!("{}{why}; {}", budget_is(im, verdict), verdict.remedy(im)), MAX_WARNING_LEN)
}

/// `longhorn-guard: ID poddisruptionbudget longhorn-system/IM`.
fn budget_is(im: &str, verdict: &BudgetVerdict) -> String {
    format!("longhorn-guard: {} poddisruptionbudget {LONGHORN_NAMESPACE}/{im}", verdict.id())
}
