//! Why a drain of a node blocks on, or is safe for, one volume, and what unblocks it: typed
//! values with the data their words need. The analysis builds them, nothing reads their text
//! back, and the message module ([`super::super::message`]) is the one place that renders
//! them, for denials, warnings, `check drain`, `check cluster` and the logs alike.

use super::super::instances::InstanceKind;
use super::WhyNot;

/// Why draining the node blocks on (or is safe for) one volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// An engine of the volume runs on the node (`holds`: and the node has its data).
    Attached { node: String, how: Attachment, holds: Option<Holds> },
    /// A v2 engine placed on the node by `spec.engineNodeID` serves its workload on `front`.
    EngineFor { node: String, front: String, holds: Option<Holds> },
    /// The volume's data on the node has no protecting copy elsewhere.
    Stranded { node: String, lead: Lead, rest: Rest },
    /// Safe: healthy replicas on these nodes protect it.
    Protected { nodes: Vec<String> },
    /// Safe: no replica on the node.
    NoReplica { node: String },
    /// Safe: the `count` replicas on the node never held data.
    NeverUsed { node: String, count: usize },
    /// Safe: the `count` replicas on the node are stopped or unused and the volume detached
    /// (`drain.protectStoppedReplicas: false`).
    StoppedDetached { node: String, count: usize },
}

impl Reason {
    /// True when the node holds data of the volume that no replica elsewhere protects: a
    /// stranded volume, or an attached one whose node also holds that data. Stopping the
    /// node's instance manager (a drain, or deleting its pod) takes the last healthy copy; for
    /// the other blocking reasons it stops an engine whose data is safe elsewhere.
    pub fn holds_last_copy(&self) -> bool {
        matches!(
            self,
            Self::Stranded { .. }
                | Self::Attached { holds: Some(_), .. }
                | Self::EngineFor { holds: Some(_), .. }
        )
    }
}

/// How an engine of the volume runs on the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attachment {
    /// Its Engine object runs there (`frontend`: an engine frontend too, in its instance manager).
    EngineRunning { frontend: bool },
    /// Its Engine object is in another live state there (`starting`).
    Engine { name: String, state: String },
    /// The Volume says it is attached there (`attached`, `attaching`, `detaching`).
    Volume { state: String },
    /// The node's instance managers run these entries for it.
    Instances(Vec<InstanceKind>),
}

/// What the node holds of an attached volume that no other replica protects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holds {
    /// A healthy replica elsewhere cannot protect only because its own node is being drained.
    NoOtherCanProtect,
    /// The only copy of its data (no healthy replica).
    OnlyCopy,
    /// Its last healthy replica.
    LastHealthy,
    /// All of its `n` healthy replicas.
    AllHealthy(usize),
}

/// The first clause of a stranded volume's reason: what the node holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lead {
    NoOtherCanProtect,
    LastHealthy,
    AllHealthy(usize),
    /// The one replica with data, in this short state (`stopped`, `failed`, ...).
    OnlyCopy {
        state: String,
    },
    /// `n` replicas with data, none healthy.
    OnlyCopies(usize),
}

/// The rest of a stranded volume's reason: the replicas elsewhere, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rest {
    /// Every one of its `replicas` is on the node; `number` is `spec.numberOfReplicas`.
    Alone { replicas: usize, number: Option<i64> },
    /// The replicas elsewhere, grouped by what keeps them from protecting (at most two groups
    /// shown), and how many replicas the groups not shown hold.
    Elsewhere { clauses: Vec<Clause>, hidden: usize },
}

/// Replicas elsewhere that share a reason for not protecting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clause {
    /// The replicas have no node (then `nodes` holds one empty name per replica).
    pub unplaced: bool,
    pub why: Option<WhyNot>,
    /// One node name per replica, in replica order.
    pub nodes: Vec<String>,
}

/// What unblocks a volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remedy {
    /// Safe: nothing to do.
    None,
    /// Move a v2 engine placed by `spec.engineNodeID`.
    MoveEngine,
    /// A strict-local volume on `node`.
    StrictLocal {
        node: String,
    },
    /// Attached on `node` with no pod using it, by Longhorn's status.
    NoPod {
        node: String,
    },
    /// Move the workload (of this PVC, `namespace/name`) off `node`.
    MoveWorkload {
        /// The view's own names: no copy per volume.
        pvc: Option<(crate::cluster::Name, crate::cluster::Name)>,
        node: String,
    },
    /// Evict the replicas on `node` in Longhorn.
    EvictReplicas {
        node: String,
    },
    RaiseReplicasAndAttach,
    RaiseReplicas,
    AttachToRebuildMissing,
    WaitRebuildMissing,
    WaitRebuild,
    RestartInstanceManager,
    CheckEngine,
    /// Uncordon `cordoned`; `evict_on`: or evict the healthy replica on that node.
    Uncordon {
        cordoned: String,
        evict_on: Option<String>,
    },
    /// `leaving` is being removed: evict the replica on `evict_on`.
    Removed {
        leaving: String,
        evict_on: String,
    },
    WaitInstanceManager {
        node: String,
    },
    AttachToRebuild,
    WaitRebuildElsewhere,
}

/// The operator override that let a blocking volume through: which object, and its reason.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Override {
    Volume { volume: String, reason: String },
    Node { node: String, reason: String },
}
