//! The drain guard: evictions of instance-manager pods, node deletions and cordons, and the
//! deletions that stop a node's instance managers as a drain does ([`deletes`]: instance-manager
//! pods, InstanceManagers, Longhorn's instance-manager budgets).
//!
//! All read the same [`analyze_node`] result (as does `longhorn-guard check drain`), so a
//! denial, a cordon warning and the preflight report always say the same thing.

mod analysis;
mod blockers;
mod budget;
pub mod confirm;
mod deletes;
mod index;
mod instances;
mod marks;
mod message;
mod sites;

use std::time::SystemTime;

pub use analysis::{
    analyze_node, analyze_node_with, analyze_volumes, carries_data, format_time, is_available_healthy,
    override_reason, stalled_rebuilds, volumes_on_node, Explained, Holds, NodeAnalysis, Reason,
    ReplicaReport, Rest, StalledRebuild, Verdict, VolumeReport, WhyNot, ALLOW_DRAIN_ANNOTATION,
};
pub use blockers::Blockers;
pub use budget::{
    budget_node, budget_verdict, budget_volumes, is_instance_manager_budget, match_label, BudgetVerdict,
    PDB_NEEDED,
};
pub use deletes::{budget_delete, instance_manager_delete, pod_delete};
pub use index::DrainIndex;
pub use marks::RebuildMarks;

/// The derived state the drain rule reads, each starting empty, for a view to keep current
/// from the start ([`ClusterView::derive`]): the drain index, and when each rebuild was first
/// seen at its progress.
pub fn derivations() -> crate::cluster::Derivations {
    crate::cluster::Derivations::new(vec![Box::new(DrainIndex::default()), Box::new(RebuildMarks::default())])
}
pub use instances::{engines_reported_by, volume_of_engine_name, UnmappedInstance};
pub use message::{
    deny_message, impact, listed_in_denial, listed_in_warnings, reason_for, waits_for, warning_lines, Listing,
};

use crate::admission::AdmissionRequest;
use crate::cluster::{ClusterView, Node, Source, LONGHORN_NAMESPACE};
use crate::decision::{clip, Decision, Details, MAX_WARNING_LEN};
use crate::policy::{DrainAction, Policy, RuleError};

/// What is being done to the node, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Act {
    /// An instance-manager pod eviction (`kubectl drain`), or its deletion.
    Drain,
    /// Deleting the Kubernetes Node object.
    Delete,
    /// Deleting an InstanceManager (Longhorn then deletes its pod).
    InstanceManager,
    /// Deleting one of Longhorn's instance-manager budgets.
    Budget,
}

impl Act {
    const ALL: [Self; 4] = [Self::Drain, Self::Delete, Self::InstanceManager, Self::Budget];

    /// The act whose rule is `rule` ([`Act::rule`]): a decision names the act that decided it,
    /// so a later step (the confirmation) never dispatches on the request again.
    fn of_rule(rule: &str) -> Self {
        Self::ALL.into_iter().find(|a| a.rule() == rule).unwrap_or(Self::Drain)
    }

    fn phrase(self, node: &str) -> String {
        match self {
            Self::Drain => format!("draining {node}"),
            Self::Delete => format!("deleting node {node}"),
            Self::InstanceManager => format!("deleting {node}'s instance manager"),
            Self::Budget => format!("deleting {node}'s instance-manager budget"),
        }
    }

    fn rule(self) -> &'static str {
        match self {
            Self::Drain => "drain",
            Self::Delete => "node-delete",
            Self::InstanceManager => "instance-manager-delete",
            Self::Budget => "budget-delete",
        }
    }
}

/// A denial with `drain.denyCode` and its matching reason.
fn deny(policy: &Policy, message: String) -> Decision {
    let code = policy.drain.deny_code;
    Decision::deny(code, reason_for(code), message)
}

/// An operation that has to wait, as `drain.action` answers it: denied with `denial` in
/// `enforce` mode, else allowed with `warnings`, the same content. The one place the mode
/// applies; only the form that is sent is written.
fn must_wait(
    policy: &Policy,
    denial: impl FnOnce() -> String,
    warnings: impl FnOnce() -> Vec<String>,
) -> Decision {
    match policy.drain.action {
        DrainAction::Enforce => deny(policy, denial()),
        _ => Decision::warn(warnings()),
    }
}

/// [`must_wait`] for a one-line answer: the warning is the message, clipped.
fn must_wait_for(policy: &Policy, message: String) -> Decision {
    let warning = clip(&message, MAX_WARNING_LEN);
    must_wait(policy, || message, || vec![warning])
}

/// `pods/eviction` CREATE.
///
/// Pods outside `longhorn-system`, and pods there that are not instance managers, are
/// allowed at once. An instance-manager pod is decided by [`analyze_node`] for its node.
/// A `longhorn-system` pod missing from the view is looked up as an InstanceManager of the
/// same name (Longhorn names the pod after it); failing that, a name starting with
/// `instance-manager` is denied as "not in the view yet, retry" and any other name is
/// allowed (Longhorn names every instance-manager pod `instance-manager-*`).
pub fn eviction(
    req: &AdmissionRequest,
    view: &ClusterView,
    policy: &Policy,
    now: SystemTime,
) -> Result<Decision, RuleError> {
    if policy.drain.action == DrainAction::Off {
        return Ok(Decision::allow().rule("drain"));
    }
    let (ns, name) = (req.namespace(), req.name());
    if name.is_empty() {
        return Err(RuleError::Missing { field: "name" });
    }
    if ns != LONGHORN_NAMESPACE {
        return Ok(Decision::allow());
    }
    let node = match view.pod(ns, name) {
        Some(pod) if !pod.is_instance_manager() => return Ok(Decision::allow()),
        Some(pod) => match pod.node() {
            Some(n) => n.to_string(),
            // Not scheduled, by data current enough for an allow: nothing runs in it.
            None if view.is_fresh(now, policy.drain.max_view_age) => {
                return Ok(Decision::warn(vec![format!(
                    "longhorn-guard: instance-manager pod {ns}/{name} has no node; nothing runs in it"
                )])
                .rule("drain"))
            }
            // By older data it may have been scheduled since, and run replicas now.
            None => {
                let msg = format!(
                    "longhorn-guard: instance-manager pod {ns}/{name} has no node in longhorn-guard's view, which is older than drain.maxViewAge; it may run on one by now, so its eviction waits; retry in a few seconds"
                );
                return Ok(must_wait_for(policy, msg).rule("drain"));
            }
        },
        None => {
            match view.instance_manager(name).map(|im| im.spec.node_id.as_str()).filter(|n| !n.is_empty()) {
                Some(n) => n.to_string(),
                None if name.starts_with("instance-manager") => {
                    return Ok(unknown_pod(view, ns, name, policy))
                }
                None => return Ok(Decision::allow()),
            }
        }
    };
    Ok(guard(view, &node, policy, now, Act::Drain, None))
}

/// The answer for a `longhorn-system` pod named like an instance manager that the view
/// does not hold: never an allow in `enforce` mode.
fn unknown_pod(view: &ClusterView, ns: &str, name: &str, policy: &Policy) -> Decision {
    let lead = format!("longhorn-guard: pod {ns}/{name}");
    let tail = "it may be an instance manager, so its eviction";
    let msg = match &view.freshness().source {
        // A snapshot does not change: retrying cannot help.
        Source::Snapshot(path) => {
            format!("{lead} is not in the snapshot {path}; {tail} is refused; use a snapshot that has it")
        }
        _ if !view.freshness().synced => format!(
            "{lead} is not in longhorn-guard's view yet (its watches are still syncing); {tail} waits; retry in a few seconds"
        ),
        _ => format!("{lead} is not in longhorn-guard's view yet; {tail} waits; retry in a few seconds"),
    };
    must_wait_for(policy, msg).rule("drain")
}

/// Decides an operation that takes away every instance on `node`, from the drain index: the
/// volumes are counted by name and only those the answer lists are analysed and written.
fn guard(
    view: &ClusterView,
    node: &str,
    policy: &Policy,
    now: SystemTime,
    act: Act,
    node_override: Option<String>,
) -> Decision {
    let node_override = node_override.or_else(|| view.node(node).and_then(|n| override_reason(&n.metadata)));
    let mut b = Blockers::of(view, node, policy, node_override);
    let mut details = Details { node: Some(node.to_string()), ..Details::default() };

    let mut d = if b.would_block() {
        let unmapped: Vec<&UnmappedInstance> = b.blocking_unmapped().collect();
        let count = b.blocking.len();
        let denial = || {
            let shown = b.reports(&b.blocking, listed_in_denial(policy), policy, now);
            let listing = Listing { shown: &shown, volumes: count, unmapped: &unmapped };
            deny_message(&act.phrase(node), node, listing, policy)
        };
        let warnings = || {
            let shown = b.reports(&b.blocking, listed_in_warnings(policy), policy, now);
            let listing = Listing { shown: &shown, volumes: count, unmapped: &unmapped };
            let head = format!(
                "longhorn-guard: {} would {} (drain.action is warn, so it is allowed):",
                act.phrase(node),
                message::impact(count, unmapped.len())
            );
            warning_lines(head, node, listing, policy)
        };
        let d = must_wait(policy, denial, warnings);
        // The names move into the details: no copy per blocking volume.
        drop(unmapped);
        details.volumes = std::mem::take(&mut b.blocking);
        d
    } else {
        let mut d = Decision::allow();
        let unmapped: Vec<&UnmappedInstance> = b.overridden_unmapped().collect();
        if !b.overridden.is_empty() || !unmapped.is_empty() {
            details.volumes = b.overridden.iter().map(|(v, _)| v.clone()).collect();
            let bys = b.override_reasons().join("; ");
            let head = format!(
                "longhorn-guard: {} would {}; allowed by override ({bys})",
                act.phrase(node),
                message::impact(b.overridden.len(), unmapped.len()),
            );
            details.overridden = Some(bys);
            let shown =
                b.reports(b.overridden.iter().map(|(v, _)| v), listed_in_warnings(policy), policy, now);
            let listing = Listing { shown: &shown, volumes: b.overridden.len(), unmapped: &unmapped };
            d.warnings = warning_lines(head, node, listing, policy);
        }
        if policy.drain.action == DrainAction::Enforce && !view.is_fresh(now, policy.drain.max_view_age) {
            d.confirm_node = Some(node.to_string());
        }
        d
    };
    d.details = details;
    d.rule(act.rule())
}

/// Core `nodes` DELETE: the node is `old`, the request's `oldObject` (`object` is null).
///
/// Denied like an eviction when it would strand data. When it is allowed but the node still
/// holds Longhorn replicas, a warning says so: replicas left on a deleted node keep later
/// drains of other nodes from finishing under Longhorn's own rule (Longhorn #10833).
pub fn node_delete(
    req: &AdmissionRequest,
    old: &Node,
    view: &ClusterView,
    policy: &Policy,
    now: SystemTime,
) -> Result<Decision, RuleError> {
    if policy.drain.action == DrainAction::Off {
        return Ok(Decision::allow().rule("node-delete"));
    }
    let name = node_name(req, old);
    if name.is_empty() {
        return Err(RuleError::Missing { field: "name" });
    }
    let mut d = guard(view, name, policy, now, Act::Delete, override_reason(&old.metadata));
    if d.allowed {
        let left = view.replica_count_on_node(name);
        if left > 0 {
            d.warnings.push(leftover_replicas(name, left));
        }
    }
    Ok(d)
}

/// The request's name, else the name of the Node it carries.
fn node_name<'a>(req: &'a AdmissionRequest, node: &'a Node) -> &'a str {
    match req.name() {
        "" => node.metadata.name.as_deref().unwrap_or_default(),
        n => n,
    }
}

/// The warning for a deleted node that still holds `left` Longhorn replicas. The issue
/// reference goes first when the line would not fit.
fn leftover_replicas(node: &str, left: usize) -> String {
    let what = if left == 1 {
        "1 Longhorn replica; delete that Replica object".to_string()
    } else {
        format!("{left} Longhorn replicas; delete those Replica objects")
    };
    let line = format!("longhorn-guard: {node} holds {what} or later drains may hang");
    let with_ref = format!("{line} (longhorn#10833)");
    if with_ref.chars().count() <= MAX_WARNING_LEN {
        with_ref
    } else {
        clip(&line, MAX_WARNING_LEN)
    }
}

/// Core `nodes` UPDATE from `old` to `new`. Only a cordon (`spec.unschedulable` turning
/// true) is looked at, and never denied: it is allowed with warnings that list what a drain
/// will wait for.
pub fn node_update(
    req: &AdmissionRequest,
    new: &Node,
    old: &Node,
    view: &ClusterView,
    policy: &Policy,
    now: SystemTime,
) -> Decision {
    if policy.drain.action == DrainAction::Off {
        return Decision::allow();
    }
    let cordon = new.spec.unschedulable == Some(true) && old.spec.unschedulable != Some(true);
    if !cordon {
        return Decision::allow();
    }
    let name = node_name(req, new);
    if name.is_empty() {
        let warning = "longhorn-guard: could not read this Node update (it names no node); no drain preview";
        return Decision::warn(vec![warning.to_string()]).rule("cordon");
    }
    let node_override = override_reason(&new.metadata);
    let b = Blockers::of(view, name, policy, node_override);
    let unmapped: Vec<&UnmappedInstance> = b.blocking_unmapped().collect();
    let mut d = Decision::allow().rule("cordon");
    d.details.node = Some(name.to_string());
    if b.blocking.is_empty() && unmapped.is_empty() {
        return d;
    }
    d.details.volumes = b.blocking.clone();
    let head = format!(
        "longhorn-guard: a drain of {name} will wait for {} (longhorn-guard check drain {name}):",
        message::waits_for(b.blocking.len(), unmapped.len())
    );
    let shown = b.reports(&b.blocking, listed_in_warnings(policy), policy, now);
    let listing = Listing { shown: &shown, volumes: b.blocking.len(), unmapped: &unmapped };
    d.warnings = warning_lines(head, name, listing, policy);
    d
}

/// The denial for a request whose allow on `node` by `rule` (the deciding rule: `drain` for an
/// eviction or an instance-manager pod's deletion, `node-delete`, `instance-manager-delete`,
/// `budget-delete`) could not be confirmed with fresh data.
pub fn unconfirmed(rule: &str, node: &str, why: &str, policy: &Policy) -> Decision {
    let act = Act::of_rule(rule);
    let action = act.phrase(node);
    let mut d =
        deny(policy, format!("longhorn-guard: could not confirm that {action} is safe ({why}); retry later"))
            .rule(act.rule());
    d.details.node = Some(node.to_string());
    d
}

#[cfg(test)]
mod act_tests {
    use super::*;

    #[test]
    fn an_unconfirmed_denial_names_the_act_of_the_rule_that_asked() {
        for act in Act::ALL {
            assert_eq!(Act::of_rule(act.rule()), act);
            let d = unconfirmed(act.rule(), "node-3", "why", &Policy::default());
            let message = &d.status.as_ref().unwrap().message;
            assert!(
                message.contains(&format!("could not confirm that {} is safe (why)", act.phrase("node-3"))),
                "{message}"
            );
            assert_eq!(d.rule, act.rule());
        }
    }
}
