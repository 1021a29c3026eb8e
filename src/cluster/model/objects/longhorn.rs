//! The Longhorn custom resources (`longhorn.io/v1beta2`) the policy reads, as lean and
//! lenient as the rest of the model: only the fields used, every one with a default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    non_empty_name, Meta, Name, PodsGone, Present, SmallMap, Stamp, Workloads, LONGHORN_NODE_LABEL,
    LONGHORN_VOLUME_LABEL,
};

/// `longhorn.io/v1beta2` Volume.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Volume {
    pub metadata: Meta,
    pub spec: VolumeSpec,
    pub status: VolumeStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeSpec {
    pub number_of_replicas: i64,
    pub data_engine: Name,
    pub data_locality: Name,
    #[serde(rename = "nodeID")]
    pub node_id: Name,
    /// Where a v2 volume's engine (target) runs when not on `nodeID` (Longhorn 1.12+; empty:
    /// on `nodeID`).
    #[serde(rename = "engineNodeID")]
    pub engine_node_id: Name,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeStatus {
    pub state: Name,
    pub robustness: Name,
    #[serde(rename = "currentNodeID")]
    pub current_node_id: Name,
    pub kubernetes_status: KubernetesStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct KubernetesStatus {
    pub namespace: Name,
    pub pvc_name: Name,
    pub pv_name: Name,
    #[serde(rename = "workloadsStatus", skip_serializing)]
    pub workloads: Workloads,
    #[serde(rename = "lastPodRefAt", skip_serializing)]
    pub pods_gone: PodsGone,
}

/// `longhorn.io/v1beta2` Replica.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Replica {
    pub metadata: Meta,
    pub spec: ReplicaSpec,
    pub status: InstanceStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ReplicaSpec {
    pub volume_name: Name,
    #[serde(rename = "nodeID")]
    pub node_id: Name,
    pub desire_state: Name,
    pub data_engine: Name,
    pub engine_name: Name,
    pub healthy_at: Stamp,
    pub last_healthy_at: Stamp,
    /// Text, not a [`Stamp`]: printed as written when it is not a time.
    pub failed_at: Name,
    pub last_failed_at: Stamp,
    pub eviction_requested: bool,
    pub hard_node_affinity: Name,
}

/// The `status` shared by Longhorn instances (replicas and engines).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceStatus {
    pub current_state: Name,
    pub instance_manager_name: Name,
    pub ip: Name,
    #[serde(rename = "storageIP")]
    pub storage_ip: Name,
    pub port: i64,
    pub started: bool,
}

impl Replica {
    /// True while the object carries a deletion timestamp.
    pub fn is_deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

/// `longhorn.io/v1beta2` Engine.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Engine {
    pub metadata: Meta,
    pub spec: EngineSpec,
    pub status: EngineStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct EngineSpec {
    pub volume_name: Name,
    #[serde(rename = "nodeID")]
    pub node_id: Name,
    pub active: bool,
    pub desire_state: Name,
    pub data_engine: Name,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct EngineStatus {
    pub current_state: Name,
    pub instance_manager_name: Name,
    pub ip: Name,
    #[serde(rename = "storageIP")]
    pub storage_ip: Name,
    pub port: i64,
    /// Replica name -> `RW` | `WO` | `ERR`.
    pub replica_mode_map: SmallMap<Name>,
    /// Replica name -> time of its last mode change.
    pub replica_transition_time_map: SmallMap<Stamp>,
    /// Replica name -> `ip:port`.
    pub current_replica_address_map: SmallMap<Name>,
    /// `tcp://ip:port` of a rebuilding replica -> its rebuild status.
    pub rebuild_status: SmallMap<RebuildStatus>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct RebuildStatus {
    pub is_rebuilding: bool,
    pub progress: i64,
    pub state: String,
    pub error: String,
    pub from_replica_address: String,
}

/// The node and the volume of a Longhorn instance (a Replica or an Engine): its spec's
/// `nodeID` and `volumeName`, else the `longhornnode` and `longhornvolume` labels Longhorn puts
/// on it.
macro_rules! node_and_volume {
    ($($kind:ident),*) => {$(
        impl $kind {
            /// Where it lives: `spec.nodeID`, else the `longhornnode` label.
            pub fn node_name(&self) -> Option<&Name> {
                non_empty_name(&self.spec.node_id).or_else(|| self.metadata.labels.get(LONGHORN_NODE_LABEL))
            }

            /// Its volume: `spec.volumeName`, else the `longhornvolume` label.
            pub fn volume_name(&self) -> Option<&Name> {
                non_empty_name(&self.spec.volume_name)
                    .or_else(|| self.metadata.labels.get(LONGHORN_VOLUME_LABEL))
            }

            /// [`Self::node_name`] as text.
            pub fn node(&self) -> Option<&str> {
                self.node_name().map(Name::as_str)
            }

            /// [`Self::volume_name`] as text.
            pub fn volume(&self) -> Option<&str> {
                self.volume_name().map(Name::as_str)
            }
        }
    )*};
}

node_and_volume!(Replica, Engine);

/// `longhorn.io/v1beta2` Node (a Longhorn node; same name as the Kubernetes node).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct LonghornNode {
    pub metadata: Meta,
    pub spec: LonghornNodeSpec,
    pub status: LonghornNodeStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct LonghornNodeSpec {
    pub allow_scheduling: bool,
    pub eviction_requested: bool,
    #[serde(deserialize_with = "super::super::meta::null_as_empty")]
    pub disks: BTreeMap<String, DiskSpec>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct DiskSpec {
    pub allow_scheduling: bool,
    pub eviction_requested: bool,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct LonghornNodeStatus {
    #[serde(deserialize_with = "super::super::meta::null_as_empty")]
    pub conditions: Vec<Condition>,
    pub auto_evicting: bool,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl LonghornNode {
    /// The status (`"True"`, `"False"`, ...) of the condition of that type, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }

    /// True when Longhorn may place a new replica here: scheduling allowed, Ready and
    /// Schedulable conditions not False, and at least one disk that allows scheduling.
    pub fn can_take_replica(&self) -> bool {
        let cond_ok = |t: &str| self.condition(t).is_none_or(|c| c.status != "False");
        self.spec.allow_scheduling
            && !self.spec.eviction_requested
            && cond_ok("Ready")
            && cond_ok("Schedulable")
            && self.spec.disks.values().any(|d| d.allow_scheduling && !d.eviction_requested)
    }
}

/// `longhorn.io/v1beta2` Setting. `value` is always a string.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Setting {
    pub metadata: Meta,
    #[serde(deserialize_with = "string_value")]
    pub value: String,
}

/// A Setting's `value`: a string (`null` is `""`); anything else "must be a string".
fn string_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Option::<String>::deserialize(d)
        .map(Option::unwrap_or_default)
        .map_err(|_: D::Error| serde::de::Error::custom("must be a string"))
}

/// `longhorn.io/v1beta2` InstanceManager.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceManager {
    pub metadata: Meta,
    pub spec: InstanceManagerSpec,
    pub status: InstanceManagerStatus,
}

impl InstanceManager {
    /// The data engine whose replicas it can run (`v1` when unset), or `None` for an
    /// instance manager of engines only (type `engine`).
    pub fn replica_engine(&self) -> Option<&str> {
        let engine = Some(self.spec.data_engine.as_str()).filter(|e| !e.is_empty());
        matches!(self.spec.type_.as_str(), "aio" | "replica" | "").then(|| engine.unwrap_or("v1"))
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceManagerSpec {
    #[serde(rename = "nodeID")]
    pub node_id: Name,
    #[serde(rename = "type")]
    pub type_: Name,
    pub data_engine: Name,
    pub image: Name,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceManagerStatus {
    pub current_state: Name,
    pub ip: Name,
    /// Engine names it runs (their status is not kept).
    #[serde(deserialize_with = "super::super::meta::null_as_empty")]
    pub instance_engines: BTreeMap<Name, Present>,
    /// Engine-frontend names it runs (v2 data engine; their status is not kept).
    #[serde(deserialize_with = "super::super::meta::null_as_empty")]
    pub instance_engine_frontends: BTreeMap<Name, Present>,
    /// Replica names it runs (their status is not kept).
    #[serde(deserialize_with = "super::super::meta::null_as_empty")]
    pub instance_replicas: BTreeMap<Name, Present>,
    /// Engines and replicas in one map, told apart by their type: what an instance manager of
    /// API version 3 or older (an image from before Longhorn 1.5) reports. Longhorn 1.10 still
    /// reads it beside the two maps above (its budget and node checks consolidate all three);
    /// 1.11 dropped it from the CRD.
    #[serde(
        deserialize_with = "super::super::meta::null_as_empty",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub instances: BTreeMap<Name, LegacyInstance>,
}

/// An entry of an InstanceManager's `status.instances`: only its type is kept.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct LegacyInstance {
    pub status: LegacyInstanceStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct LegacyInstanceStatus {
    /// `engine` or `replica`.
    #[serde(rename = "type")]
    pub type_: Name,
}

impl InstanceManagerStatus {
    /// The engines it runs: `instanceEngines`, then the engines of `instances`.
    pub fn engines(&self) -> impl Iterator<Item = &Name> {
        self.instance_engines.keys().chain(self.legacy("engine"))
    }

    /// The replicas it runs: `instanceReplicas`, then the replicas of `instances`.
    pub fn replicas(&self) -> impl Iterator<Item = &Name> {
        self.instance_replicas.keys().chain(self.legacy("replica"))
    }

    fn legacy<'a>(&'a self, type_: &'a str) -> impl Iterator<Item = &'a Name> {
        self.instances.iter().filter(move |(_, i)| i.status.type_ == type_).map(|(name, _)| name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_managers_engines_and_replicas_include_those_of_status_instances() {
        let im: InstanceManager = serde_json::from_value(serde_json::json!({"status": {
            "instanceEngines": {"v-e-0": {}}, "instanceReplicas": {"v-r-1": {}},
            "instances": {"old-e-0": {"spec": {"name": "old-e-0"}, "status": {"type": "engine"}},
                          "old-r-0": {"status": {"type": "replica"}}, "odd": {"status": {}}}}}))
        .unwrap();
        let names = |i: &mut dyn Iterator<Item = &Name>| i.map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(names(&mut im.status.engines()), ["v-e-0", "old-e-0"]);
        assert_eq!(names(&mut im.status.replicas()), ["v-r-1", "old-r-0"]);
        let none: InstanceManager =
            serde_json::from_value(serde_json::json!({"status": {"instances": null}})).unwrap();
        assert_eq!(none.status.engines().count(), 0);
        // Not written back when empty (the shape of 1.11 and later).
        assert!(serde_json::to_value(&none).unwrap()["status"].get("instances").is_none());
    }
}
