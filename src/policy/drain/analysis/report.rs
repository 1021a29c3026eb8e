//! What the drain analysis reports: verdicts, per-replica and per-volume reports, the node's
//! analysis, stalled rebuilds, and why a replica does not protect.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::super::instances::UnmappedInstance;
use super::finding::{Override, Reason, Remedy};
use crate::output::{as_opt_text, as_text};

/// What draining the node means for one volume.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Draining the node does not endanger this volume.
    Safe,
    /// Draining the node would strand this volume: a drain must wait.
    Block,
    /// It would block, but an operator override lets the drain proceed.
    Overridden,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Safe => "safe",
            Self::Block => "block",
            Self::Overridden => "overridden",
        }
    }
}

/// One replica of a volume under analysis.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaReport {
    pub name: String,
    pub node: String,
    /// Short state for tables: `RW`, `WO(37%)`, `WO(0%,stalled)`, `ERR`, `failed`, `stopped`,
    /// `healthy`, `unused`, `not-healthy`, `deleting`.
    pub state: String,
    /// The engine's mode for it (`RW`, `WO`, `ERR`) when the volume is attached.
    pub mode: Option<String>,
    /// Rebuild progress (0-100) while it is rebuilding.
    pub progress: Option<i64>,
    /// RFC 3339 time since which its rebuild has not progressed, when stalled.
    pub stalled_since: Option<String>,
    /// False only for a replica that was never healthy and never failed.
    pub carries_data: bool,
    /// True when it lives on the node under analysis.
    pub on_node: bool,
    /// True when it is a protecting replica on another node.
    pub protecting: bool,
    /// For a replica elsewhere that does not protect: why (rendered as a phrase that follows
    /// "its replica on NODE", e.g. `is rebuilding (37%)`).
    #[serde(serialize_with = "as_opt_text")]
    pub why_not: Option<WhyNot>,
}

/// The analysis of one volume.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeReport {
    pub volume: String,
    /// `spec.numberOfReplicas`, when the Volume is in the view.
    pub number_of_replicas: Option<i64>,
    /// `v1` or `v2`: the Volume's `spec.dataEngine`, else its replicas' or engine's ("" when
    /// none says).
    pub data_engine: String,
    /// `status.state` of the Volume ("" when unknown).
    pub state: String,
    /// An engine of the volume runs on the node.
    pub attached_here: bool,
    /// Every replica of the volume, those on the node first.
    pub replicas: Vec<ReplicaReport>,
    /// Names of the protecting replicas on other nodes.
    pub protecting: Vec<String>,
    pub verdict: Verdict,
    /// Why (no volume name, no remedy).
    #[serde(serialize_with = "as_text")]
    pub reason: Reason,
    /// What unblocks it ([`Remedy::None`], written "", when safe).
    #[serde(serialize_with = "as_text")]
    pub remedy: Remedy,
    /// Set when an override annotation changed the verdict: which object and its reason.
    #[serde(serialize_with = "as_opt_text")]
    pub overridden: Option<Override>,
}

/// What an answer prints of one volume: its verdict, why and what unblocks it, without the
/// per-replica detail of a [`VolumeReport`] (an admission answer lists only these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explained {
    pub volume: String,
    pub verdict: Verdict,
    pub reason: Reason,
    pub remedy: Remedy,
    pub overridden: Option<Override>,
}

impl VolumeReport {
    /// What an answer prints of this volume.
    pub fn explained(&self) -> Explained {
        Explained {
            volume: self.volume.clone(),
            verdict: self.verdict,
            reason: self.reason.clone(),
            remedy: self.remedy.clone(),
            overridden: self.overridden.clone(),
        }
    }
}

/// What draining one node means for every volume with a replica or an engine on it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodeAnalysis {
    pub node: String,
    /// The node is in the view (as a Kubernetes Node or a Longhorn Node).
    pub known: bool,
    /// The override on the Kubernetes Node, if set (written `node N annotation ...: reason`).
    #[serde(serialize_with = "as_opt_text")]
    pub node_override: Option<Override>,
    /// Volumes in name order.
    pub volumes: Vec<VolumeReport>,
    /// Engine and engine-frontend entries on the node that no known volume owns.
    pub unmapped_instances: Vec<UnmappedInstance>,
}

impl NodeAnalysis {
    /// Volumes that block the drain.
    pub fn blocking(&self) -> impl Iterator<Item = &VolumeReport> {
        self.volumes.iter().filter(|v| v.verdict == Verdict::Block)
    }

    /// Unmapped instance-manager entries that block the drain.
    pub fn blocking_unmapped(&self) -> impl Iterator<Item = &UnmappedInstance> {
        self.unmapped_instances.iter().filter(|u| !u.overridden)
    }

    /// Unmapped instance-manager entries let through by the node override.
    pub fn overridden_unmapped(&self) -> impl Iterator<Item = &UnmappedInstance> {
        self.unmapped_instances.iter().filter(|u| u.overridden)
    }

    /// True when a drain would have to wait.
    pub fn would_block(&self) -> bool {
        self.blocking().next().is_some() || self.blocking_unmapped().next().is_some()
    }
}

/// A rebuild whose progress has not moved for longer than `drain.stallAfter`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StalledRebuild {
    pub volume: String,
    pub engine: String,
    /// The rebuilding replica's name, when its address maps to one.
    pub replica: Option<String>,
    pub progress: i64,
    /// Since when the progress has not moved.
    pub since: SystemTime,
}

/// Why a replica on another node cannot vouch for its volume. Remedies are chosen from
/// this, never from its wording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WhyNot {
    Deleting,
    /// `spec.failedAt`: how long ago, or the raw value when it is not a time.
    Failed {
        ago: Option<Duration>,
        at: String,
    },
    /// A rebuild the engine reports: progress, and how long it has not moved when stalled.
    Rebuilding {
        progress: i64,
        stalled_for: Option<Duration>,
    },
    /// `WO` in the engine without a rebuild status.
    RebuildingUnknown,
    /// Carries data but has no `healthyAt`.
    NotYetHealthy,
    NeverHealthy,
    ErrMode,
    /// The volume's running engine has a replica set that does not list it: the engine does
    /// not use it, so its `healthyAt` is history.
    NotInEngine,
    NoNode,
    UnknownNode,
    CordonedNode,
    /// On a node carrying this drain taint (an autoscaler is removing it).
    TaintedNode(String),
    /// On a node being deleted.
    DeletedNode,
    NoInstanceManager,
    /// The instance manager's `status.currentState`.
    InstanceManagerNotRunning(String),
    /// The instance manager says `running`, but the view holds instance-manager pods and not
    /// its pod: the process is gone and Longhorn has not updated the state yet.
    InstanceManagerPodGone,
}

impl WhyNot {
    /// True when both print the same words (ages as printed), so that replicas with them
    /// share one clause: `other` is compared with `self`'s text as it is written.
    pub fn reads_same(&self, other: &Self) -> bool {
        crate::clip::prints_as(other, &self.to_string())
    }

    /// True when the replica's instance manager is the problem.
    pub fn is_instance_manager(&self) -> bool {
        matches!(
            self,
            Self::NoInstanceManager | Self::InstanceManagerNotRunning(_) | Self::InstanceManagerPodGone
        )
    }
}
