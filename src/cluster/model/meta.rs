//! The lean object metadata the cluster view keeps ([`Meta`]): name, namespace,
//! resourceVersion, the deletion mark, and only the labels and annotations decisions read.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use super::name::Name;

/// Labels any decision reads; every other label is dropped while parsing.
pub const KEPT_LABELS: [&str; 4] =
    ["longhorn.io/component", "longhorn.io/node", "longhornnode", "longhornvolume"];

/// Annotations any decision reads; every other annotation is dropped while parsing.
pub const KEPT_ANNOTATIONS: [&str; 1] = ["longhorn-guard.io/allow-drain"];

/// `metadata` reduced to what decisions read.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct Meta {
    pub name: Option<Name>,
    pub namespace: Option<Name>,
    /// The watch reads it to resume; the view does not keep it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<Box<str>>,
    /// Set while the object is being deleted (its RFC 3339 time, as the API gives it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Name>,
    #[serde(deserialize_with = "kept_labels", skip_serializing_if = "SmallMap::is_empty")]
    pub labels: SmallMap<Name>,
    #[serde(deserialize_with = "kept_annotations", skip_serializing_if = "SmallMap::is_empty")]
    pub annotations: SmallMap<Name>,
}

/// Reads a label or annotation map keeping only the keys `keep` accepts, without allocating
/// for the others.
pub fn kept_where<'de, D: Deserializer<'de>>(
    d: D,
    keep: fn(&str) -> bool,
) -> Result<SmallMap<Name>, D::Error> {
    struct Kept(fn(&str) -> bool);
    impl<'de> serde::de::Visitor<'de> for Kept {
        type Value = SmallMap<Name>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map of strings")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(SmallMap::default())
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(SmallMap::default())
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if (self.0)(&k) {
                    let v: Option<Name> = map.next_value()?;
                    out.push((Name::new(&k), v.unwrap_or_default()));
                } else {
                    map.next_value::<Option<AnyStr>>()?;
                }
            }
            Ok(out.into_iter().collect())
        }
    }
    d.deserialize_option(Kept(keep))
}

/// A string value that is checked and dropped.
struct AnyStr;

impl<'de> Deserialize<'de> for AnyStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = AnyStr;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E>(self, _: &str) -> Result<AnyStr, E> {
                Ok(AnyStr)
            }
        }
        d.deserialize_str(V)
    }
}

fn kept_labels<'de, D: Deserializer<'de>>(d: D) -> Result<SmallMap<Name>, D::Error> {
    kept_where(d, |k| KEPT_LABELS.contains(&k))
}

fn kept_annotations<'de, D: Deserializer<'de>>(d: D) -> Result<SmallMap<Name>, D::Error> {
    kept_where(d, |k| KEPT_ANNOTATIONS.contains(&k))
}

/// The entries of a [`SmallMap`] in key order.
pub type Entries<'a, V> = std::iter::Map<std::slice::Iter<'a, (Name, V)>, fn(&(Name, V)) -> (&Name, &V)>;

/// A small map with interned keys stored as one sorted boxed slice: a handful of entries take
/// a few dozen bytes instead of a B-tree node each. Parses from and prints as a JSON object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmallMap<V>(Box<[(Name, V)]>);

impl<V> Default for SmallMap<V> {
    fn default() -> Self {
        Self(Box::default())
    }
}

impl<V> SmallMap<V> {
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key)).ok().map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Entries in key order.
    pub fn iter(&self) -> Entries<'_, V> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.0.iter_mut().map(|(_, v)| v)
    }
}

impl<V> FromIterator<(Name, V)> for SmallMap<V> {
    /// Sorted by key; of equal keys the last wins (as in a JSON object).
    fn from_iter<I: IntoIterator<Item = (Name, V)>>(iter: I) -> Self {
        let sorted: BTreeMap<Name, V> = iter.into_iter().collect();
        Self(sorted.into_iter().collect())
    }
}

impl<'a, V> IntoIterator for &'a SmallMap<V> {
    type Item = (&'a Name, &'a V);
    type IntoIter = Entries<'a, V>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// `null` reads as empty: Go marshals a nil map without `omitempty` as `null` (a stopped
/// Longhorn Engine's `replicaModeMap` and `rebuildStatus`).
impl<'de, V: Deserialize<'de>> Deserialize<'de> for SmallMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(null_as_empty::<_, BTreeMap<Name, V>>(d)?.into_iter().collect())
    }
}

/// Reads a collection that Go may have marshalled as `null` (a nil map or slice in a field
/// without `omitempty`) as empty.
pub fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

impl<V: Serialize> Serialize for SmallMap<V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

/// A map value whose content is never read (only its key's presence): parses from any JSON
/// and keeps nothing, e.g. the per-instance status in an InstanceManager's `instanceEngines`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Present;

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Present)
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
        assert_eq!(m.labels.iter().collect::<Vec<_>>(), [(&Name::new("longhornvolume"), &Name::new("v1"))]);
        assert_eq!(m.annotations.len(), 1);
        assert!(m.deletion_timestamp.is_some());
        let none: Meta =
            serde_json::from_value(json!({"labels": {"app": "x"}, "annotations": null})).unwrap();
        assert!(none.labels.is_empty() && none.annotations.is_empty());
        let labels: Meta =
            serde_json::from_value(json!({"labels": {"longhornvolume": null, "app": "x"}})).unwrap();
        assert_eq!(labels.labels.get("longhornvolume").map(Name::as_str), Some(""));
        let map: SmallMap<Name> = serde_json::from_value(json!({"b": "2", "a": "1"})).unwrap();
        assert_eq!((map.get("a"), map.get("b"), map.get("c")), (Some(&"1".into()), Some(&"2".into()), None));
        assert_eq!(serde_json::to_value(&map).unwrap(), json!({"a": "1", "b": "2"}));
    }

    #[test]
    fn present_parses_from_anything() {
        let m: BTreeMap<String, Present> =
            serde_json::from_value(json!({"a": {"spec": {"x": [1, 2]}}, "b": null, "c": 3})).unwrap();
        assert_eq!(m.keys().map(String::as_str).collect::<Vec<_>>(), ["a", "b", "c"]);
    }
}
