//! The findings of a stranded volume: its reason and remedy, and the clause on each replica
//! elsewhere that does not protect it (typed; the message module writes their words).

use crate::cluster::Volume;

use super::facts::{is_available_healthy, ReplicaFacts};
use super::finding::{Clause, Lead, Reason, Remedy, Rest};
use super::WhyNot;

/// True for a `strict-local` volume: Longhorn keeps exactly one replica, on its workload's node.
pub(super) fn is_strict_local(vol: Option<&Volume>) -> bool {
    vol.is_some_and(|v| v.spec.data_locality == "strict-local")
}

/// True when some replica elsewhere is healthy and does not protect only because its own node
/// is being drained (cordoned, tainted for removal, deleted): the one on the drained node is
/// then not the last healthy copy.
pub(super) fn healthy_on_draining_node<'a>(mut others: impl Iterator<Item = &'a ReplicaFacts<'a>>) -> bool {
    others.any(|f| {
        is_available_healthy(f.replica)
            && matches!(f.why_not, Some(WhyNot::CordonedNode | WhyNot::TaintedNode(_) | WhyNot::DeletedNode))
    })
}

/// How many clauses on replicas elsewhere a reason shows.
const SHOWN: usize = 2;

/// The reason and remedy for a volume whose data on `node` has no protecting copy elsewhere.
pub(super) fn stranded_reason(
    node: &str,
    vol: Option<&Volume>,
    facts: &[ReplicaFacts],
    at_risk: &[&ReplicaFacts],
) -> (Reason, Remedy) {
    let others: Vec<&ReplicaFacts> = facts.iter().filter(|f| !f.on_node).collect();
    let number = vol.map(|v| v.spec.number_of_replicas);
    let detached = vol.is_some_and(|v| v.status.state == "detached");
    let healthy_here = at_risk.iter().filter(|f| is_available_healthy(f.replica)).count();
    let lead = match (healthy_here, at_risk) {
        _ if healthy_on_draining_node(others.iter().copied()) => Lead::NoOtherCanProtect,
        (1, _) => Lead::LastHealthy,
        (h, _) if h > 1 => Lead::AllHealthy(h),
        (_, [one]) => Lead::OnlyCopy { state: one.state() },
        (_, many) => Lead::OnlyCopies(many.len()),
    };
    let reason = |rest| Reason::Stranded { node: node.to_string(), lead, rest };

    if others.is_empty() {
        let n = facts.len();
        let remedy = match number {
            _ if is_strict_local(vol) => Remedy::StrictLocal { node: node.to_string() },
            _ if n > 1 => Remedy::EvictReplicas { node: node.to_string() },
            Some(nr) if nr <= 1 && detached => Remedy::RaiseReplicasAndAttach,
            Some(nr) if nr <= 1 => Remedy::RaiseReplicas,
            _ if detached => Remedy::AttachToRebuildMissing,
            _ => Remedy::WaitRebuildMissing,
        };
        return (reason(Rest::Alone { replicas: n, number }), remedy);
    }

    // Other replicas with the same reason share one clause: "its replicas on a, b each ...".
    // Replicas without a node form their own clause, so no node name is ever empty.
    let mut clauses: Vec<Clause> = Vec::new();
    for f in &others {
        let unplaced = f.node.is_empty();
        let same = |c: &&mut Clause| {
            c.unplaced == unplaced
                && match (&c.why, &f.why_not) {
                    (Some(a), Some(b)) => a.reads_same(b),
                    (a, b) => a == b,
                }
        };
        match clauses.iter_mut().find(same) {
            Some(c) => c.nodes.push(f.node.to_string()),
            None => {
                clauses.push(Clause { unplaced, why: f.why_not.clone(), nodes: vec![f.node.to_string()] })
            }
        }
    }
    let hidden: usize = clauses.iter().skip(SHOWN).map(|c| c.nodes.len()).sum();
    clauses.truncate(SHOWN);
    // The remedy follows the most hopeful other replica.
    let remedy = if others.iter().any(|f| f.rebuild.as_ref().is_some_and(|rb| rb.stalled_since.is_none())) {
        Remedy::WaitRebuild
    } else if let Some(f) =
        others.iter().find(|f| f.rebuild.as_ref().is_some_and(|rb| rb.stalled_since.is_some()))
    {
        if f.rebuild.as_ref().is_some_and(|rb| rb.no_storage_network) {
            Remedy::RestartInstanceManager
        } else {
            Remedy::CheckEngine
        }
    } else if let Some(f) = others.iter().find(|f| f.why_not == Some(WhyNot::CordonedNode)) {
        // A healthy volume is not rebuilt by itself: only an eviction moves its data, and
        // only a healthy replica's eviction helps.
        Remedy::Uncordon {
            cordoned: f.node.to_string(),
            evict_on: (healthy_here > 0).then(|| node.to_string()),
        }
    } else if let Some(f) =
        others.iter().find(|f| matches!(f.why_not, Some(WhyNot::TaintedNode(_) | WhyNot::DeletedNode)))
    {
        // That node is going away with its replica.
        let moved = if healthy_here > 0 { node } else { f.node };
        Remedy::Removed { leaving: f.node.to_string(), evict_on: moved.to_string() }
    } else if let Some(f) =
        others.iter().find(|f| f.why_not.as_ref().is_some_and(WhyNot::is_instance_manager))
    {
        Remedy::WaitInstanceManager { node: f.node.to_string() }
    } else if detached {
        Remedy::AttachToRebuild
    } else {
        Remedy::WaitRebuildElsewhere
    };
    (reason(Rest::Elsewhere { clauses, hidden }), remedy)
}
