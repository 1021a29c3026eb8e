//! The words of a stranded volume: its reason and remedy, and the clause on each replica
//! elsewhere that does not protect it.

use std::collections::BTreeSet;

use crate::cluster::Volume;

use super::facts::{is_available_healthy, ReplicaFacts};
use super::WhyNot;

/// True for a `strict-local` volume: Longhorn keeps exactly one replica, on its workload's node.
pub(super) fn is_strict_local(vol: Option<&Volume>) -> bool {
    vol.is_some_and(|v| v.spec.data_locality == "strict-local")
}

/// The remedy for a strict-local volume on `node`: Longhorn refuses a second replica and cannot
/// evict its one, and its workload cannot run elsewhere.
pub(super) fn strict_local_remedy(node: &str) -> String {
    format!(
        "it is strict-local, so its only replica stays on {node}: back it up and restore it elsewhere, or override with the longhorn-guard.io/allow-drain annotation"
    )
}

/// The remedy for a volume attached on `node` for which Longhorn lists no pod now: moving a
/// workload may not detach it, and its status cannot tell which of the other reasons holds.
pub(super) fn no_pod_remedy(node: &str) -> String {
    format!(
        "Longhorn lists no pod using it (Longhorn attaches a volume itself for a backup, snapshot, clone, restore or replica eviction, and keeps a disaster-recovery volume attached; or it was attached from the Longhorn UI): wait for the detach or detach it in Longhorn; if a pod does use it, move that pod off {node} first"
    )
}

/// True when some replica elsewhere is healthy and does not protect only because its own node
/// is being drained (cordoned, tainted for removal, deleted): the one on the drained node is
/// then not the last healthy copy.
pub(super) fn healthy_on_draining_node(others: &[&ReplicaFacts]) -> bool {
    others.iter().any(|f| {
        is_available_healthy(f.replica)
            && matches!(f.why_not, Some(WhyNot::CordonedNode | WhyNot::TaintedNode(_) | WhyNot::DeletedNode))
    })
}

/// The reason and remedy for a volume whose data on `node` has no protecting copy elsewhere.
pub(super) fn stranded_reason(
    node: &str,
    vol: Option<&Volume>,
    facts: &[ReplicaFacts],
    at_risk: &[&&ReplicaFacts],
) -> (String, String) {
    let others: Vec<&ReplicaFacts> = facts.iter().filter(|f| !f.report.on_node).collect();
    let number = vol.map(|v| v.spec.number_of_replicas);
    let detached = vol.is_some_and(|v| v.status.state == "detached");
    let healthy_here = at_risk.iter().filter(|f| is_available_healthy(f.replica)).count();
    // A healthy replica elsewhere that cannot vouch only because its own node is being drained:
    // the one on the node is not the last healthy one.
    let healthy_elsewhere = healthy_on_draining_node(&others);
    let lead = match (healthy_here, at_risk) {
        _ if healthy_elsewhere => "no other replica can protect it".to_string(),
        (1, _) => format!("last healthy replica is on {node}"),
        (h, _) if h > 1 => format!("all {h} healthy replicas are on {node}"),
        (_, [one]) => format!("only copy of its data is on {node} (replica {})", one.report.state),
        (_, many) => format!("only copies of its data are on {node} ({} replicas, none healthy)", many.len()),
    };

    if others.is_empty() {
        let n = facts.len();
        let reason = match number {
            Some(1) if n == 1 => "1 replica (numberOfReplicas=1)".to_string(),
            Some(nr) if n == 1 => format!("{lead}; no other replica exists (numberOfReplicas={nr})"),
            None if n == 1 => format!("{lead}; no other replica exists"),
            Some(nr) => format!("{lead}; all {n} of its replicas are on {node} (numberOfReplicas={nr})"),
            None => format!("{lead}; all {n} of its replicas are on {node}"),
        };
        let remedy = match number {
            _ if is_strict_local(vol) => strict_local_remedy(node),
            _ if n > 1 => {
                format!("evict the replicas on {node} in Longhorn (node or disk eviction) and wait for the rebuild elsewhere")
            }
            Some(nr) if nr <= 1 && detached => {
                "raise numberOfReplicas to 2 or more and attach it until the rebuild is done".to_string()
            }
            Some(nr) if nr <= 1 => "raise numberOfReplicas to 2 or more and wait for the rebuild".to_string(),
            _ if detached => "attach it so Longhorn rebuilds the missing replicas, then wait".to_string(),
            _ => "wait for Longhorn to rebuild the missing replicas".to_string(),
        };
        return (reason, remedy);
    }

    // Other replicas with the same reason share one clause: "its replicas on a, b each ...".
    // Replicas without a node form their own clause, so no node name is ever empty.
    let mut groups: Vec<(bool, WhyNotText, Vec<&str>)> = Vec::new();
    for f in &others {
        let why = WhyNotText::of(f.why_not.as_ref());
        let unplaced = f.node.is_empty();
        match groups.iter_mut().find(|(u, w, _)| *u == unplaced && *w == why) {
            Some((_, _, nodes)) => nodes.push(f.node.as_str()),
            None => groups.push((unplaced, why, vec![f.node.as_str()])),
        }
    }
    let mut parts = vec![lead];
    const SHOWN: usize = 2;
    for (unplaced, why, nodes) in groups.iter().take(SHOWN) {
        parts.push(replica_clause(*unplaced, why, nodes));
    }
    let hidden: usize = groups.iter().skip(SHOWN).map(|(_, _, n)| n.len()).sum();
    if hidden > 0 {
        parts.push(format!("and {hidden} more replica{}", if hidden == 1 { "" } else { "s" }));
    }
    // The remedy follows the most hopeful other replica.
    let remedy = if others.iter().any(|f| f.rebuild.as_ref().is_some_and(|rb| rb.stalled_since.is_none())) {
        "wait for the rebuild".to_string()
    } else if let Some(f) =
        others.iter().find(|f| f.rebuild.as_ref().is_some_and(|rb| rb.stalled_since.is_some()))
    {
        if f.rebuild.as_ref().is_some_and(|rb| rb.no_storage_network) {
            "restart its instance manager (no storage network)".to_string()
        } else {
            "check its engine and instance manager".to_string()
        }
    } else if let Some(f) = others.iter().find(|f| f.why_not == Some(WhyNot::CordonedNode)) {
        // A healthy volume is not rebuilt by itself: only an eviction moves its data, and
        // only a healthy replica's eviction helps.
        if healthy_here > 0 {
            format!(
                "uncordon {}, or evict the replica on {node} in Longhorn (node or disk eviction) and wait for the rebuild elsewhere",
                f.node
            )
        } else {
            format!("uncordon {}", f.node)
        }
    } else if let Some(f) =
        others.iter().find(|f| matches!(f.why_not, Some(WhyNot::TaintedNode(_) | WhyNot::DeletedNode)))
    {
        // That node is going away with its replica.
        let moved = if healthy_here > 0 { node } else { f.node.as_str() };
        format!(
            "{} is being removed: evict the replica on {moved} in Longhorn (node or disk eviction) and wait for the rebuild on a node that stays",
            f.node
        )
    } else if let Some(f) =
        others.iter().find(|f| f.why_not.as_ref().is_some_and(WhyNot::is_instance_manager))
    {
        format!("wait until the instance manager on {} is running", f.node)
    } else if detached {
        "attach the volume so Longhorn rebuilds a healthy replica elsewhere, then wait".to_string()
    } else {
        "wait for Longhorn to rebuild a healthy replica elsewhere".to_string()
    };
    (parts.join("; "), remedy)
}

/// A [`WhyNot`] as grouped in a sentence ("does not protect it" when there is none).
#[derive(Clone, Debug, PartialEq, Eq)]
struct WhyNotText {
    no_node: bool,
    text: String,
}

impl WhyNotText {
    fn of(why: Option<&WhyNot>) -> Self {
        Self {
            no_node: why == Some(&WhyNot::NoNode),
            text: why.map_or_else(|| "does not protect it".to_string(), ToString::to_string),
        }
    }
}

/// One clause about replicas elsewhere that share a reason: `its replica on a failed 2m ago`,
/// `its replicas on a, b each ...`, `its 3 replicas on a, b each ...` (several on one node),
/// `its replica with no node ...`, `its 2 replicas have no node`.
fn replica_clause(unplaced: bool, why: &WhyNotText, nodes: &[&str]) -> String {
    let n = nodes.len();
    if unplaced {
        return match (n, why.no_node) {
            (1, true) => "its replica has no node".to_string(),
            (_, true) => format!("its {n} replicas have no node"),
            (1, false) => format!("its replica with no node {}", why.text),
            _ => format!("its {n} replicas with no node each {}", why.text),
        };
    }
    let distinct: Vec<&str> = nodes.iter().copied().collect::<BTreeSet<&str>>().into_iter().collect();
    match (n, distinct.len()) {
        (1, _) => format!("its replica on {} {}", distinct.join(", "), why.text),
        (_, d) if d == n => format!("its replicas on {} each {}", distinct.join(", "), why.text),
        _ => format!("its {n} replicas on {} each {}", distinct.join(", "), why.text),
    }
}
