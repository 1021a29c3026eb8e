//! The drain guard: evictions of instance-manager pods, node deletions and cordons.
//!
//! All three read the same [`analyze_node`] result (as does `longhorn-guard check drain`),
//! so a denial, a cordon warning and the preflight report always say the same thing.

mod analysis;
mod index;
mod instances;
mod message;
mod sites;

use std::collections::BTreeSet;
use std::time::SystemTime;

pub use analysis::{
    analyze_node, analyze_node_with, analyze_volumes, carries_data, format_time, override_reason,
    stalled_rebuilds, volume_verdict, volumes_on_node, NodeAnalysis, ReplicaReport, StalledRebuild, Verdict,
    VolumeReport, WhyNot, ALLOW_DRAIN_ANNOTATION,
};
pub use index::DrainIndex;
pub use instances::{
    engine_volume, engines_reported_by, volume_of_engine_name, EngineRef, InstanceKind, UnmappedInstance,
};
pub use message::{deny_message, impact, reason_for, waits_for, warning_lines};

use crate::admission::AdmissionRequest;
use crate::cluster::{ClusterView, Node, Source, LONGHORN_NAMESPACE};
use crate::decision::{clip, Decision, Details, MAX_WARNING_LEN};
use crate::policy::{object, old_object, typed, DrainAction, Policy, RuleError};

/// What is being done to the node, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Act {
    /// An instance-manager pod eviction (`kubectl drain`).
    Drain,
    /// Deleting the Kubernetes Node object.
    Delete,
}

impl Act {
    fn phrase(self, node: &str) -> String {
        match self {
            Self::Drain => format!("draining {node}"),
            Self::Delete => format!("deleting node {node}"),
        }
    }

    fn rule(self) -> &'static str {
        match self {
            Self::Drain => "drain",
            Self::Delete => "node-delete",
        }
    }
}

/// A denial with `drain.denyCode` and its matching reason.
fn deny(policy: &Policy, message: String) -> Decision {
    let code = policy.drain.deny_code;
    Decision::deny(code, reason_for(code), message)
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
            None if view.freshness().is_fresh(now, policy.drain.max_view_age) => {
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
                let d = match policy.drain.action {
                    DrainAction::Enforce => deny(policy, msg),
                    _ => Decision::warn(vec![clip(&msg, MAX_WARNING_LEN)]),
                };
                return Ok(d.rule("drain"));
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
    let d = match policy.drain.action {
        DrainAction::Enforce => deny(policy, msg),
        _ => Decision::warn(vec![clip(&msg, MAX_WARNING_LEN)]),
    };
    d.rule("drain")
}

/// What a drain of `node` would wait for: the blocking and overridden volumes and the unmapped
/// entries (safe volumes left out). From the view's [`DrainIndex`] when it keeps one (only the
/// volumes that are not safe are analysed), else by the full [`analyze_node_with`]; both give
/// the same reports. The node's override is read from the view.
pub fn analyze_blockers(view: &ClusterView, node: &str, policy: &Policy, now: SystemTime) -> NodeAnalysis {
    let node_override = view.node(node).and_then(|n| override_reason(&n.metadata));
    analyze_for_decision(view, node, policy, now, node_override)
}

fn analyze_for_decision(
    view: &ClusterView,
    node: &str,
    policy: &Policy,
    now: SystemTime,
    node_override: Option<String>,
) -> NodeAnalysis {
    match view.index::<DrainIndex>() {
        Some(index) => index.analyze(view, node, policy, now, node_override),
        None => analyze_node_with(view, node, policy, now, node_override),
    }
}

/// Decides an operation that takes away every instance on `node`.
fn guard(
    view: &ClusterView,
    node: &str,
    policy: &Policy,
    now: SystemTime,
    act: Act,
    node_override: Option<String>,
) -> Decision {
    let node_override = node_override.or_else(|| view.node(node).and_then(|n| override_reason(&n.metadata)));
    let analysis = analyze_for_decision(view, node, policy, now, node_override);
    let blocking: Vec<&VolumeReport> = analysis.blocking().collect();
    let unmapped: Vec<&UnmappedInstance> = analysis.blocking_unmapped().collect();
    let overridden: Vec<&VolumeReport> = analysis.overridden().collect();
    let overridden_unmapped: Vec<&UnmappedInstance> = analysis.overridden_unmapped().collect();
    let mut details = Details { node: Some(node.to_string()), ..Details::default() };

    let mut d = if !blocking.is_empty() || !unmapped.is_empty() {
        details.volumes = blocking.iter().map(|v| v.volume.clone()).collect();
        match policy.drain.action {
            DrainAction::Enforce => {
                deny(policy, deny_message(&act.phrase(node), node, &blocking, &unmapped, policy))
            }
            _ => {
                let head = format!(
                    "longhorn-guard: {} would {} (drain.action is warn, so it is allowed):",
                    act.phrase(node),
                    message::impact(blocking.len(), unmapped.len())
                );
                Decision::warn(warning_lines(head, node, &blocking, &unmapped, policy))
            }
        }
    } else {
        let mut d = Decision::allow();
        if !overridden.is_empty() || !overridden_unmapped.is_empty() {
            details.volumes = overridden.iter().map(|v| v.volume.clone()).collect();
            let bys: Vec<&str> = overridden
                .iter()
                .filter_map(|v| v.overridden.as_deref())
                .chain(analysis.node_override.as_deref().filter(|_| !overridden_unmapped.is_empty()))
                .collect::<BTreeSet<&str>>()
                .into_iter()
                .collect();
            details.overridden = Some(bys.join("; "));
            let head = format!(
                "longhorn-guard: {} would {}; allowed by override ({})",
                act.phrase(node),
                message::impact(overridden.len(), overridden_unmapped.len()),
                bys.join("; ")
            );
            d.warnings = warning_lines(head, node, &overridden, &overridden_unmapped, policy);
        }
        if policy.drain.action == DrainAction::Enforce
            && !view.freshness().is_fresh(now, policy.drain.max_view_age)
        {
            d.confirm_node = Some(node.to_string());
        }
        d
    };
    d.details = details;
    d.rule(act.rule())
}

/// Core `nodes` DELETE: the node is in `oldObject` (`object` is null).
///
/// Denied like an eviction when it would strand data. When it is allowed but the node still
/// holds Longhorn replicas, a warning says so: replicas left on a deleted node keep later
/// drains of other nodes from finishing under Longhorn's own rule (Longhorn #10833).
pub fn node_delete(
    req: &AdmissionRequest,
    view: &ClusterView,
    policy: &Policy,
    now: SystemTime,
) -> Result<Decision, RuleError> {
    if policy.drain.action == DrainAction::Off {
        return Ok(Decision::allow().rule("node-delete"));
    }
    let old: Node = typed("oldObject", old_object(req)?)?;
    let name = match req.name() {
        "" => old.metadata.name.as_deref().unwrap_or_default().to_string(),
        n => n.to_string(),
    };
    if name.is_empty() {
        return Err(RuleError::Missing { field: "name" });
    }
    let mut d = guard(view, &name, policy, now, Act::Delete, override_reason(&old.metadata));
    if d.allowed {
        let left = view.replica_count_on_node(&name);
        if left > 0 {
            d.warnings.push(leftover_replicas(&name, left));
        }
    }
    Ok(d)
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

/// Core `nodes` UPDATE. Only a cordon (`spec.unschedulable` turning true) is looked at, and
/// never denied: it is allowed with warnings that list what a drain will wait for. An update
/// whose objects cannot be read is allowed too, with one warning saying so.
pub fn node_update(
    req: &AdmissionRequest,
    view: &ClusterView,
    policy: &Policy,
    now: SystemTime,
) -> Result<Decision, RuleError> {
    if policy.drain.action == DrainAction::Off {
        return Ok(Decision::allow());
    }
    let read = || -> Result<(Node, Node), RuleError> {
        Ok((typed("object", object(req)?)?, typed("oldObject", old_object(req)?)?))
    };
    let (new, old) = match read() {
        Ok(pair) => pair,
        Err(e) => {
            return Ok(Decision::warn(vec![unreadable_update(&e.to_string())]).rule("cordon"));
        }
    };
    let cordon = new.spec.unschedulable == Some(true) && old.spec.unschedulable != Some(true);
    if !cordon {
        return Ok(Decision::allow());
    }
    let name = match req.name() {
        "" => new.metadata.name.as_deref().unwrap_or_default().to_string(),
        n => n.to_string(),
    };
    if name.is_empty() {
        return Ok(Decision::warn(vec![unreadable_update("it names no node")]).rule("cordon"));
    }
    let node_override = override_reason(&new.metadata);
    let analysis = analyze_for_decision(view, &name, policy, now, node_override);
    let blocking: Vec<&VolumeReport> = analysis.blocking().collect();
    let unmapped: Vec<&UnmappedInstance> = analysis.blocking_unmapped().collect();
    let mut d = Decision::allow().rule("cordon");
    d.details.node = Some(name.clone());
    if blocking.is_empty() && unmapped.is_empty() {
        return Ok(d);
    }
    d.details.volumes = blocking.iter().map(|v| v.volume.clone()).collect();
    let head = format!(
        "longhorn-guard: a drain of {name} will wait for {} (longhorn-guard check drain {name}):",
        message::waits_for(blocking.len(), unmapped.len())
    );
    d.warnings = warning_lines(head, &name, &blocking, &unmapped, policy);
    Ok(d)
}

/// The one warning for a Node update longhorn-guard cannot read; the reason is clipped so
/// the line keeps its end within [`MAX_WARNING_LEN`].
fn unreadable_update(why: &str) -> String {
    const HEAD: &str = "longhorn-guard: could not read this Node update (";
    const TAIL: &str = "); no drain preview";
    let room = MAX_WARNING_LEN - HEAD.len() - TAIL.len();
    format!("{HEAD}{}{TAIL}", clip(why, room))
}

/// The denial for an eviction (or, `deleting`, a node deletion) whose allow could not be
/// confirmed with fresh data.
pub fn unconfirmed(node: &str, deleting: bool, why: &str, policy: &Policy) -> Decision {
    let act = if deleting { Act::Delete } else { Act::Drain };
    let action = act.phrase(node);
    let mut d =
        deny(policy, format!("longhorn-guard: could not confirm that {action} is safe ({why}); retry later"))
            .rule(act.rule());
    d.details.node = Some(node.to_string());
    d
}
