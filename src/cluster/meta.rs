//! The lean object metadata the cluster view keeps: what decisions read, nothing else.
//!
//! A full `ObjectMeta` (managedFields, every annotation, owner references...) is most of an
//! object's size; [`Meta`] keeps the name, the namespace, the resourceVersion (for the watch,
//! which takes it out), the deletion mark, and only the labels and annotations longhorn-guard reads ([`KEPT_LABELS`],
//! [`KEPT_ANNOTATIONS`]). It deserializes straight from the API's JSON.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

/// Labels any decision reads; every other label is dropped while parsing.
pub const KEPT_LABELS: [&str; 4] =
    ["longhorn.io/component", "longhorn.io/node", "longhornnode", "longhornvolume"];

/// Annotations any decision reads; every other annotation is dropped while parsing.
pub const KEPT_ANNOTATIONS: [&str; 1] = ["longhorn-guard.io/allow-drain"];

/// `metadata` reduced to what decisions read.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct Meta {
    pub name: Option<String>,
    pub namespace: Option<Arc<str>>,
    /// The watch reads it to resume; the view does not keep it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Set while the object is being deleted (its RFC 3339 time, as the API gives it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    #[serde(deserialize_with = "kept_labels", skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(deserialize_with = "kept_annotations", skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

fn kept<'de, D: Deserializer<'de>>(
    d: D,
    keep: &[&str],
) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    let all: Option<BTreeMap<String, Option<String>>> = Option::deserialize(d)?;
    let kept: BTreeMap<String, String> = all
        .into_iter()
        .flatten()
        .filter(|(k, _)| keep.contains(&k.as_str()))
        .map(|(k, v)| (k, v.unwrap_or_default()))
        .collect();
    Ok((!kept.is_empty()).then_some(kept))
}

fn kept_labels<'de, D: Deserializer<'de>>(d: D) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    kept(d, &KEPT_LABELS)
}

fn kept_annotations<'de, D: Deserializer<'de>>(d: D) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    kept(d, &KEPT_ANNOTATIONS)
}

/// A map value whose content is never read (only its key's presence): parses from any JSON
/// and keeps nothing, e.g. the per-instance status in an InstanceManager's `instanceEngines`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Present;

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Present)
    }
}

impl Serialize for Present {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_unit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_labels_and_annotations_decisions_read_are_kept() {
        let m: Meta = serde_json::from_value(json!({
            "name": "r1", "namespace": "longhorn-system", "resourceVersion": "7",
            "managedFields": [{"manager": "longhorn-manager", "fieldsV1": {"f:spec": {}}}],
            "labels": {"longhornvolume": "v1", "app": "x"},
            "annotations": {"longhorn-guard.io/allow-drain": "ok", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
            "deletionTimestamp": "2026-11-30T10:00:00Z"
        }))
        .unwrap();
        assert_eq!(m.name.as_deref(), Some("r1"));
        assert_eq!(m.namespace.as_deref(), Some("longhorn-system"));
        assert_eq!(
            m.labels.unwrap().into_iter().collect::<Vec<_>>(),
            [("longhornvolume".into(), "v1".into())]
        );
        assert_eq!(m.annotations.unwrap().len(), 1);
        assert!(m.deletion_timestamp.is_some());
        let none: Meta =
            serde_json::from_value(json!({"labels": {"app": "x"}, "annotations": null})).unwrap();
        assert_eq!((none.labels, none.annotations), (None, None));
    }

    #[test]
    fn present_parses_from_anything() {
        let m: BTreeMap<String, Present> =
            serde_json::from_value(json!({"a": {"spec": {"x": [1, 2]}}, "b": null, "c": 3})).unwrap();
        assert_eq!(m.keys().map(String::as_str).collect::<Vec<_>>(), ["a", "b", "c"]);
    }
}
