//! The words of the drain analysis's typed findings: the one place a [`Reason`], a
//! [`Remedy`], an [`Override`], a [`WhyNot`] or an unmapped entry becomes text.

use std::fmt::{self, Display, Formatter};

use crate::duration::coarse;

use super::super::analysis::{
    Attachment, Clause, Explained, Holds, Lead, Override, Reason, Remedy, Rest, VolumeReport, WhyNot,
    ALLOW_DRAIN_ANNOTATION,
};
use super::super::instances::{InstanceKind, UnmappedInstance};

/// `reason; remedy` (or the reason alone when there is no remedy).
struct Explanation<'a>(&'a Reason, &'a Remedy);

impl Display for Explanation<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.1 {
            Remedy::None => self.0.fmt(f),
            remedy => write!(f, "{}; {remedy}", self.0),
        }
    }
}

/// `volume: reason; remedy` (or `volume: reason`) as one line, written where it is shown.
pub struct Line<'a>(&'a str, &'a Reason, &'a Remedy);

impl Display for Line<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.0, Explanation(self.1, self.2))
    }
}

impl VolumeReport {
    /// `reason; remedy` (or the reason alone when there is no remedy).
    pub fn explanation(&self) -> String {
        Explanation(&self.reason, &self.remedy).to_string()
    }

    /// `volume: reason; remedy` as one line.
    pub fn line(&self) -> String {
        Line(&self.volume, &self.reason, &self.remedy).to_string()
    }
}

impl Explained {
    /// `volume: reason; remedy` as one line, as [`VolumeReport::line`] writes it.
    pub fn line(&self) -> Line<'_> {
        Line(&self.volume, &self.reason, &self.remedy)
    }
}

impl UnmappedInstance {
    /// `engine frontend X in instance manager Y: no known volume owns it` (no remedy).
    pub fn reason(&self) -> String {
        format!(
            "{} {} in instance manager {}: no known volume owns it",
            self.kind.as_str(),
            self.name,
            self.instance_manager
        )
    }

    /// The reason and what unblocks it, as one line.
    pub fn line(&self) -> String {
        format!("{}; wait until Longhorn stops it, or check that instance manager", self.reason())
    }
}

impl serde::Serialize for Override {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Display for Override {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let (what, name, reason) = match self {
            Self::Volume { volume, reason } => ("volume", volume, reason),
            Self::Node { node, reason } => ("node", node, reason),
        };
        write!(f, "{what} {name} annotation {ALLOW_DRAIN_ANNOTATION}: {reason}")
    }
}

impl Display for Attachment {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::EngineRunning { frontend: true } => f.write_str("engine and engine frontend running"),
            Self::EngineRunning { frontend: false } => f.write_str("engine running"),
            Self::Engine { name, state } => write!(f, "engine {name} {state}"),
            Self::Volume { state } => write!(f, "volume {state}"),
            Self::Instances(kinds) => {
                let what: Vec<&str> = kinds.iter().map(|k: &InstanceKind| k.as_str()).collect();
                write!(f, "{} running in its instance manager", what.join(" and "))
            }
        }
    }
}

impl Display for Holds {
    /// A clause that follows the attachment: ` and holds its last healthy replica`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoOtherCanProtect => f.write_str(" and no other replica can protect it"),
            Self::OnlyCopy => f.write_str(" and holds the only copy of its data"),
            Self::LastHealthy => f.write_str(" and holds its last healthy replica"),
            Self::AllHealthy(n) => write!(f, " and holds all {n} of its healthy replicas"),
        }
    }
}

/// `" and ..."` for a [`Holds`], or nothing.
fn maybe(holds: &Option<Holds>) -> &dyn Display {
    match holds {
        Some(h) => h,
        None => &"",
    }
}

/// A [`Lead`] on `node`.
struct LeadOn<'a>(&'a Lead, &'a str);

impl Display for LeadOn<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let node = self.1;
        match self.0 {
            Lead::NoOtherCanProtect => f.write_str("no other replica can protect it"),
            Lead::LastHealthy => write!(f, "last healthy replica is on {node}"),
            Lead::AllHealthy(h) => write!(f, "all {h} healthy replicas are on {node}"),
            Lead::OnlyCopy { state } => write!(f, "only copy of its data is on {node} (replica {state})"),
            Lead::OnlyCopies(n) => {
                write!(f, "only copies of its data are on {node} ({n} replicas, none healthy)")
            }
        }
    }
}

impl Display for Reason {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::Attached { node, how, holds } => {
                write!(f, "attached to {node} ({how}){}", maybe(holds))
            }
            Self::EngineFor { node, front, holds } => write!(
                f,
                "its engine runs on {node} (spec.engineNodeID) for its workload on {front}{}",
                maybe(holds)
            ),
            Self::Stranded { node, lead, rest } => {
                let lead = LeadOn(lead, node);
                match rest {
                    Rest::Alone { replicas: 1, number: Some(1) } => {
                        f.write_str("1 replica (numberOfReplicas=1)")
                    }
                    Rest::Alone { replicas, number } => {
                        match replicas {
                            1 => write!(f, "{lead}; no other replica exists")?,
                            n => write!(f, "{lead}; all {n} of its replicas are on {node}")?,
                        }
                        match number {
                            Some(nr) => write!(f, " (numberOfReplicas={nr})"),
                            None => Ok(()),
                        }
                    }
                    Rest::Elsewhere { clauses, hidden } => {
                        write!(f, "{lead}")?;
                        for c in clauses {
                            write!(f, "; {c}")?;
                        }
                        match hidden {
                            0 => Ok(()),
                            1 => f.write_str("; and 1 more replica"),
                            n => write!(f, "; and {n} more replicas"),
                        }
                    }
                }
            }
            Self::Protected { nodes } => {
                let s = if nodes.len() == 1 { "" } else { "s" };
                write!(f, "protected by healthy replica{s} on {}", nodes.join(", "))
            }
            Self::NoReplica { node } => write!(f, "no replica on {node}"),
            Self::NeverUsed { node, count: 1 } => write!(f, "replica on {node} was never used"),
            Self::NeverUsed { node, count } => write!(f, "{count} replicas on {node} were never used"),
            Self::StoppedDetached { node, count } => {
                match count {
                    1 => write!(f, "replica on {node} is stopped")?,
                    n => write!(f, "{n} replicas on {node} are stopped or unused")?,
                }
                f.write_str(" and the volume detached (drain.protectStoppedReplicas: false)")
            }
        }
    }
}

impl Display for Clause {
    /// `its replica on a failed 2m ago`, `its replicas on a, b each ...`, `its 3 replicas on
    /// a, b each ...` (several on one node), `its replica with no node ...`, `its 2 replicas
    /// have no node`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let n = self.nodes.len();
        // The phrase of the clause's reason.
        let why: &dyn Display = match &self.why {
            Some(w) => w,
            None => &"does not protect it",
        };
        if self.unplaced {
            let no_node = self.why == Some(WhyNot::NoNode);
            return match (n, no_node) {
                (1, true) => f.write_str("its replica has no node"),
                (_, true) => write!(f, "its {n} replicas have no node"),
                (1, false) => write!(f, "its replica with no node {why}"),
                _ => write!(f, "its {n} replicas with no node each {why}"),
            };
        }
        // The distinct nodes in name order.
        let mut distinct: Vec<&str> = self.nodes.iter().map(String::as_str).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let nodes = distinct.join(", ");
        match (n, distinct.len()) {
            (1, _) => write!(f, "its replica on {nodes} {why}"),
            (_, d) if d == n => write!(f, "its replicas on {nodes} each {why}"),
            _ => write!(f, "its {n} replicas on {nodes} each {why}"),
        }
    }
}

impl Display for Remedy {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => Ok(()),
            Self::MoveEngine => f.write_str(
                "set its spec.engineNodeID to another node first; Longhorn moves the engine there and the workload stays",
            ),
            Self::StrictLocal { node } => write!(
                f,
                "it is strict-local, so its only replica stays on {node}: back it up and restore it elsewhere, or override with the {ALLOW_DRAIN_ANNOTATION} annotation"
            ),
            Self::NoPod { node } => write!(
                f,
                "Longhorn lists no pod using it (Longhorn attaches a volume itself for a backup, snapshot, clone, restore or replica eviction, and keeps a disaster-recovery volume attached; or it was attached from the Longhorn UI): wait for the detach or detach it in Longhorn; if a pod does use it, move that pod off {node} first"
            ),
            Self::MoveWorkload { pvc: Some((ns, name)), node } => {
                write!(f, "move its workload (PVC {ns}/{name}) off {node} first")
            }
            Self::MoveWorkload { pvc: None, node } => write!(f, "move its workload off {node} first"),
            Self::EvictReplicas { node } => write!(
                f,
                "evict the replicas on {node} in Longhorn (node or disk eviction) and wait for the rebuild elsewhere"
            ),
            Self::RaiseReplicasAndAttach => {
                f.write_str("raise numberOfReplicas to 2 or more and attach it until the rebuild is done")
            }
            Self::RaiseReplicas => f.write_str("raise numberOfReplicas to 2 or more and wait for the rebuild"),
            Self::AttachToRebuildMissing => f.write_str("attach it so Longhorn rebuilds the missing replicas, then wait"),
            Self::WaitRebuildMissing => f.write_str("wait for Longhorn to rebuild the missing replicas"),
            Self::WaitRebuild => f.write_str("wait for the rebuild"),
            Self::RestartInstanceManager => f.write_str("restart its instance manager (no storage network)"),
            Self::CheckEngine => f.write_str("check its engine and instance manager"),
            Self::Uncordon { cordoned, evict_on: Some(node) } => write!(
                f,
                "uncordon {cordoned}, or evict the replica on {node} in Longhorn (node or disk eviction) and wait for the rebuild elsewhere"
            ),
            Self::Uncordon { cordoned, evict_on: None } => write!(f, "uncordon {cordoned}"),
            Self::Removed { leaving, evict_on } => write!(
                f,
                "{leaving} is being removed: evict the replica on {evict_on} in Longhorn (node or disk eviction) and wait for the rebuild on a node that stays"
            ),
            Self::WaitInstanceManager { node } => write!(f, "wait until the instance manager on {node} is running"),
            Self::AttachToRebuild => {
                f.write_str("attach the volume so Longhorn rebuilds a healthy replica elsewhere, then wait")
            }
            Self::WaitRebuildElsewhere => f.write_str("wait for Longhorn to rebuild a healthy replica elsewhere"),
        }
    }
}

impl Display for WhyNot {
    /// A phrase that follows "its replica on NODE".
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deleting => f.write_str("is being deleted"),
            Self::Failed { ago: Some(d), .. } => write!(f, "failed {} ago", coarse(*d)),
            Self::Failed { ago: None, at } => write!(f, "failed at {}", crate::decision::clip(at, 25)),
            Self::Rebuilding { progress, stalled_for: None } => write!(f, "is rebuilding ({progress}%)"),
            Self::Rebuilding { progress, stalled_for: Some(d) } => {
                write!(f, "is stuck rebuilding at {progress}% for {}", coarse(*d))
            }
            Self::RebuildingUnknown => f.write_str("is rebuilding"),
            Self::NotYetHealthy => f.write_str("is being rebuilt and not yet healthy"),
            Self::NeverHealthy => f.write_str("has never been healthy"),
            Self::ErrMode => f.write_str("is in ERR mode"),
            Self::NotInEngine => f.write_str("is not in its engine's replica set"),
            Self::NoNode => f.write_str("has no node"),
            Self::UnknownNode => f.write_str("is on a node longhorn-guard does not see"),
            Self::CordonedNode => f.write_str("is on a cordoned node"),
            Self::TaintedNode(taint) => write!(f, "is on a node tainted {taint} (being drained for removal)"),
            Self::DeletedNode => f.write_str("is on a node being deleted"),
            Self::NoInstanceManager => f.write_str("has no instance manager"),
            Self::InstanceManagerNotRunning(state) => write!(
                f,
                "has no running instance manager (state {})",
                if state.is_empty() { "unknown" } else { state.as_str() }
            ),
            Self::InstanceManagerPodGone => f.write_str("has no running instance manager (its pod is gone)"),
        }
    }
}
