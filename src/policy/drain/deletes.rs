//! The deletions that stop a node's instance managers as surely as a drain does, decided as
//! its eviction is: an instance-manager pod (`kubectl delete pod`, `kubectl drain
//! --disable-eviction`, a controller's force delete), an InstanceManager (Longhorn then
//! deletes its pod), and one of Longhorn's instance-manager budgets while a drain of its node
//! still needs it. Deletions by `drain.trustedUsers` are allowed at once (docs/drain.md, "Every
//! way to remove the last healthy copy").

use std::collections::BTreeSet;
use std::time::SystemTime;

use crate::admission::AdmissionRequest;
use crate::cluster::{
    label, ClusterView, InstanceManager, Meta, Name, Pod, PodDisruptionBudget, COMPONENT_LABEL,
    INSTANCE_MANAGER_COMPONENT, LONGHORN_NAMESPACE,
};
use crate::decision::Decision;
use crate::policy::{DrainAction, Policy, RuleError};

use super::analysis::override_reason;
use super::blockers::Blockers;
use super::budget::{budget_node, budget_verdict, is_instance_manager_budget, BudgetVerdict};
use super::instances::UnmappedInstance;
use super::message::budget::{budget_allowed, budget_refusal};
use super::message::{denial, listed_in_denial, listed_in_warnings, warning_lines, Listing};
use super::{guard, must_wait, must_wait_for, Act};

/// Where every delete rule starts: done, allowed, when `drain.action` is `off` or the user is
/// one of `drain.trustedUsers`; else the name and namespace of what is deleted.
enum Start<'a> {
    /// Allowed, by this rule.
    Done(&'static str),
    /// The request's name and namespace, else those of the object it deletes (a DELETE of a
    /// collection names no object: each one's admission carries it in `oldObject` only).
    Decide(&'a str, &'a str),
}

fn start<'a>(
    req: &'a AdmissionRequest,
    old: &'a Meta,
    policy: &Policy,
    rule: &'static str,
) -> Result<Start<'a>, RuleError> {
    if policy.drain.action == DrainAction::Off {
        return Ok(Start::Done(rule));
    }
    if policy.drain.trusts(&req.user_info.username) {
        return Ok(Start::Done("trusted"));
    }
    let name = Some(req.name()).filter(|n| !n.is_empty()).or(old.name.as_deref()).unwrap_or("");
    if name.is_empty() {
        return Err(RuleError::Missing { field: "name" });
    }
    let ns = Some(req.namespace()).filter(|n| !n.is_empty()).or(old.namespace.as_deref()).unwrap_or("");
    Ok(Start::Decide(name, ns))
}

/// Core `pods` DELETE: the pod is `old`, the request's `oldObject`. An instance-manager pod is
/// decided for its node exactly as its eviction is ([`super::eviction`]), whatever the
/// request's options say (a dry run, `gracePeriodSeconds: 0`); a pod already terminating, and
/// any other pod, is allowed.
pub fn pod_delete(
    req: &AdmissionRequest,
    old: &Pod,
    view: &ClusterView,
    policy: &Policy,
    now: SystemTime,
) -> Result<Decision, RuleError> {
    let (name, ns) = match start(req, &old.metadata, policy, Act::Drain.rule())? {
        Start::Done(rule) => return Ok(Decision::allow().rule(rule)),
        Start::Decide(name, ns) => (name, ns),
    };
    if ns != LONGHORN_NAMESPACE || label(&old.metadata, COMPONENT_LABEL) != Some(INSTANCE_MANAGER_COMPONENT) {
        return Ok(Decision::allow());
    }
    // Already terminating: the deletion that stops it was decided when it began (an eviction,
    // a delete this rule allowed, a trusted user's). This one only removes the object once its
    // containers are gone (the kubelet's final DELETE, as `system:node:NAME`, or a force
    // delete); refusing it would keep the pod from being made again and protect nothing.
    if old.metadata.deletion_timestamp.is_some() {
        return Ok(Decision::allow().rule("drain"));
    }
    Ok(match old.node() {
        Some(node) => guard(view, node, policy, now, Act::Drain, None),
        // The object as it is now: never scheduled, so nothing runs in it.
        None => Decision::warn(vec![format!(
            "longhorn-guard: instance-manager pod {name} has no node; nothing runs in it"
        )])
        .rule("drain"),
    })
}

/// `instancemanagers.longhorn.io` DELETE: Longhorn deletes the pod of a deleted instance
/// manager itself (as its own ServiceAccount, and the garbage collector does through the
/// pod's owner reference), and Longhorn's webhook does not look at the deletion, so it is
/// decided here as the eviction of that pod would be, for the instance manager's node.
pub fn instance_manager_delete(
    req: &AdmissionRequest,
    old: &InstanceManager,
    view: &ClusterView,
    policy: &Policy,
    now: SystemTime,
) -> Result<Decision, RuleError> {
    let rule = Act::InstanceManager.rule();
    let (name, ns) = match start(req, &old.metadata, policy, rule)? {
        Start::Done(rule) => return Ok(Decision::allow().rule(rule)),
        Start::Decide(name, ns) => (name, ns),
    };
    if ns != LONGHORN_NAMESPACE {
        return Ok(Decision::allow());
    }
    Ok(match old.spec.node_id.as_str() {
        "" => Decision::warn(vec![format!(
            "longhorn-guard: InstanceManager {name} has no node; nothing runs in it"
        )])
        .rule(rule),
        node => guard(view, node, policy, now, Act::InstanceManager, None),
    })
}

/// `poddisruptionbudgets.policy` DELETE of one of Longhorn's instance-manager budgets (others
/// are allowed): denied while the drain doctor calls it `longhorn-pdb-needed`, allowed
/// otherwise with warnings naming the verdict; both in the doctor's words.
pub fn budget_delete(
    req: &AdmissionRequest,
    old: &PodDisruptionBudget,
    view: &ClusterView,
    policy: &Policy,
    now: SystemTime,
) -> Result<Decision, RuleError> {
    let rule = Act::Budget.rule();
    let (name, ns) = match start(req, &old.metadata, policy, rule)? {
        Start::Done(rule) => return Ok(Decision::allow().rule(rule)),
        Start::Decide(name, ns) => (name, ns),
    };
    if !is_instance_manager_budget(ns, old.spec.as_ref()) {
        return Ok(Decision::allow());
    }
    let fresh = view.is_fresh(now, policy.drain.max_view_age);
    let Some(node) = budget_node(view, name, old.spec.as_ref()) else {
        // Neither its instance manager (not in the view) nor its selector names a node.
        if fresh {
            return Ok(Decision::warn(budget_allowed(name, &BudgetVerdict::Gone, None)).rule(rule));
        }
        let msg = format!(
            "longhorn-guard: poddisruptionbudget {ns}/{name} names no node and its instance manager is not in \
             longhorn-guard's view, which is older than drain.maxViewAge; its deletion waits; retry in a few seconds"
        );
        return Ok(must_wait_for(policy, msg).rule(rule));
    };
    let b = Blockers::of(view, node, policy, view.node(node).and_then(|n| override_reason(&n.metadata)));
    let blocking: BTreeSet<&str> = b.blocking.iter().map(Name::as_str).collect();
    let unmapped: Vec<&UnmappedInstance> =
        b.blocking_unmapped().filter(|u| u.instance_manager == name).collect();
    let verdict = budget_verdict(view, name, node, &blocking, !unmapped.is_empty());
    let mut d = match &verdict {
        BudgetVerdict::Needed { needs } => {
            let line = budget_refusal(name, &verdict, node);
            let volumes: Vec<&Name> =
                b.blocking.iter().filter(|v| needs.iter().any(|n| n == v.as_str())).collect();
            let count = volumes.len();
            let listing = |n: usize| {
                let shown = b.reports(volumes.iter().copied(), n, policy, now);
                (shown, count)
            };
            let mut d = must_wait(
                policy,
                || {
                    let (shown, volumes) = listing(listed_in_denial(policy));
                    denial(&line, node, Listing { shown: &shown, volumes, unmapped: &unmapped }, policy)
                },
                || {
                    let (shown, volumes) = listing(listed_in_warnings(policy));
                    let head = format!("{line} (drain.action is warn, so it is allowed)");
                    warning_lines(head, node, Listing { shown: &shown, volumes, unmapped: &unmapped }, policy)
                },
            );
            d.details.volumes = volumes.into_iter().cloned().collect();
            d
        }
        _ => {
            let mut d = Decision::warn(budget_allowed(name, &verdict, Some(node)));
            if policy.drain.action == DrainAction::Enforce && !fresh {
                d.confirm_node = Some(node.to_string());
            }
            d
        }
    };
    d.details.node = Some(node.to_string());
    Ok(d.rule(rule))
}
