//! Lean, lenient models of the Kubernetes kinds the policy reads (the Longhorn ones are in
//! `longhorn`): only the fields used, each with a default, so any Longhorn since 1.5 parses.

mod longhorn;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use super::meta::{Meta, Present, SmallMap};
pub use super::name::Name;
pub use super::stamp::Stamp;
pub use super::workloads::{lists_no_pod, PodsGone, Workloads};
pub use longhorn::*;

/// The API group/version of every Longhorn custom resource longhorn-guard reads.
pub const LONGHORN_API_VERSION: &str = "longhorn.io/v1beta2";
/// The namespace Longhorn runs in (its custom resources and instance-manager pods).
pub const LONGHORN_NAMESPACE: &str = "longhorn-system";
/// Label that marks instance-manager pods.
pub const COMPONENT_LABEL: &str = "longhorn.io/component";
/// Value of [`COMPONENT_LABEL`] on instance-manager pods.
pub const INSTANCE_MANAGER_COMPONENT: &str = "instance-manager";
/// Label Longhorn puts on replicas and engines naming their node.
pub const LONGHORN_NODE_LABEL: &str = "longhornnode";
/// Label Longhorn puts on replicas and engines naming their volume.
pub const LONGHORN_VOLUME_LABEL: &str = "longhornvolume";
/// Label Longhorn puts on instance managers (and their pods): the node they run on.
pub const INSTANCE_MANAGER_NODE_LABEL: &str = "longhorn.io/node";

/// Core `v1` Pod: only what drain decisions need.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Pod {
    pub metadata: Meta,
    pub spec: PodSpec,
    pub status: PodStatus,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSpec {
    pub node_name: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodStatus {
    pub phase: Option<String>,
    #[serde(rename = "podIP")]
    pub pod_ip: Option<String>,
}

impl Pod {
    /// True for a Longhorn instance-manager pod (`longhorn.io/component=instance-manager` in
    /// `longhorn-system`).
    pub fn is_instance_manager(&self) -> bool {
        self.metadata.namespace.as_deref() == Some(LONGHORN_NAMESPACE)
            && label(&self.metadata, COMPONENT_LABEL) == Some(INSTANCE_MANAGER_COMPONENT)
    }

    /// The node the pod runs on: `spec.nodeName`, else the `longhorn.io/node` label.
    pub fn node(&self) -> Option<&str> {
        let node = self.spec.node_name.as_deref().filter(|n| !n.is_empty());
        node.or_else(|| label(&self.metadata, INSTANCE_MANAGER_NODE_LABEL))
    }
}

/// Core `v1` Node.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Node {
    pub metadata: Meta,
    pub spec: NodeSpec,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSpec {
    pub unschedulable: Option<bool>,
    /// Only the taints of a drain for removal ([`super::draining::DRAIN_TAINTS`]).
    #[serde(deserialize_with = "super::draining::drain_taints", skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<super::draining::Taint>,
}

/// `storage.k8s.io/v1` StorageClass.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct StorageClass {
    pub metadata: Meta,
    pub provisioner: String,
    pub parameters: BTreeMap<String, String>,
}

/// The value of a label, if set.
pub fn label<'a>(meta: &'a Meta, key: &str) -> Option<&'a str> {
    meta.labels.get(key).map(Name::as_str)
}

/// The value of an annotation, if set.
pub fn annotation<'a>(meta: &'a Meta, key: &str) -> Option<&'a str> {
    meta.annotations.get(key).map(Name::as_str)
}

fn non_empty_name(s: &Name) -> Option<&Name> {
    Some(s).filter(|s| !s.is_empty())
}
