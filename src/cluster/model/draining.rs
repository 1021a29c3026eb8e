//! Whether a Kubernetes node is being drained, as the drain decisions read it: cordoned, marked
//! for removal by an autoscaler (which taints a node and evicts its pods without cordoning it),
//! or being deleted. A replica on such a node never vouches for a volume: the node's own drain
//! may take it at any moment.

use serde::{Deserialize, Deserializer, Serialize};

use super::{Name, Node};

/// Taints that mark a node being drained for removal, kept on the view's nodes (every other
/// taint is dropped while parsing): Cluster Autoscaler's and Karpenter's (v1 and v0.3x). (The
/// `node.kubernetes.io/unschedulable` taint mirrors a cordon, which `spec.unschedulable` shows,
/// and may linger a moment after an uncordon.)
pub const DRAIN_TAINTS: [&str; 3] =
    ["ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted", "karpenter.sh/disruption"];

/// One kept taint of a node.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct Taint {
    pub key: Name,
    pub effect: Name,
}

/// Reads `spec.taints` keeping the [`DRAIN_TAINTS`] that keep pods off the node (`NoSchedule`,
/// `NoExecute`).
pub fn drain_taints<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Taint>, D::Error> {
    let all: Option<Vec<Taint>> = Option::deserialize(d)?;
    Ok(all
        .unwrap_or_default()
        .into_iter()
        .filter(|t| {
            DRAIN_TAINTS.contains(&t.key.as_str()) && matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
        })
        .collect())
}

/// Why a node counts as being drained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Draining {
    Cordoned,
    /// Carries this drain taint.
    Tainted(Name),
    Deleting,
}

impl Node {
    /// Why the node counts as being drained, or `None` when it does not.
    pub fn draining(&self) -> Option<Draining> {
        if self.spec.unschedulable == Some(true) {
            Some(Draining::Cordoned)
        } else if let Some(t) = self.spec.taints.first() {
            Some(Draining::Tainted(t.key.clone()))
        } else if self.metadata.deletion_timestamp.is_some() {
            Some(Draining::Deleting)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(spec: serde_json::Value, deleting: bool) -> Node {
        let mut meta = json!({"name": "n1"});
        if deleting {
            meta["deletionTimestamp"] = json!("2026-12-01T10:00:00Z");
        }
        serde_json::from_value(json!({"metadata": meta, "spec": spec})).unwrap()
    }

    #[test]
    fn cordons_removal_taints_and_deletion_count_as_draining() {
        assert_eq!(node(json!({}), false).draining(), None);
        assert_eq!(node(json!({"unschedulable": true}), false).draining(), Some(Draining::Cordoned));
        let tainted = node(
            json!({"taints": [
                {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
                {"key": "ToBeDeletedByClusterAutoscaler", "value": "1733040000", "effect": "NoSchedule"}
            ]}),
            false,
        );
        assert_eq!(tainted.spec.taints.len(), 1, "only drain taints are kept");
        assert_eq!(tainted.draining(), Some(Draining::Tainted("ToBeDeletedByClusterAutoscaler".into())));
        // A preference is not a drain.
        let soft =
            node(json!({"taints": [{"key": "karpenter.sh/disrupted", "effect": "PreferNoSchedule"}]}), false);
        assert_eq!(soft.draining(), None);
        assert_eq!(node(json!({"taints": null}), true).draining(), Some(Draining::Deleting));
    }
}
