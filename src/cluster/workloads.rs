//! What Longhorn says about the pods that use a volume: `status.kubernetesStatus.workloadsStatus`.
//!
//! Longhorn fills that list with the pods that mount the volume's PVC and always writes the
//! field (`null` when no pod does). A volume attached with an empty list was attached by
//! Longhorn itself (a backup, a snapshot, a replica eviction) or from its UI, not for a
//! workload; a drain denial then cannot say "move its workload". Only whether the list is
//! empty is kept: the view holds one byte per volume, not the pod names.

use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;

/// Whether Longhorn lists a workload for a volume.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Workloads {
    /// The field is absent or not a list (an object not written by Longhorn, a hand-made one).
    #[default]
    Unknown,
    /// `null` or `[]`: no pod uses the volume.
    None,
    /// At least one pod uses the volume.
    Some,
}

impl<'de> Deserialize<'de> for Workloads {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Workloads;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of workloads or null")
            }
            fn visit_unit<E>(self) -> Result<Workloads, E> {
                Ok(Workloads::None)
            }
            fn visit_none<E>(self) -> Result<Workloads, E> {
                Ok(Workloads::None)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Workloads, A::Error> {
                let mut any = false;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(if any { Workloads::Some } else { Workloads::None })
            }
            // Anything else only loses a hint in a message: it reads as unknown, not as an error.
            fn visit_bool<E>(self, _: bool) -> Result<Workloads, E> {
                Ok(Workloads::Unknown)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Workloads, E> {
                Ok(Workloads::Unknown)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Workloads, E> {
                Ok(Workloads::Unknown)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Workloads, E> {
                Ok(Workloads::Unknown)
            }
            fn visit_str<E>(self, _: &str) -> Result<Workloads, E> {
                Ok(Workloads::Unknown)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Workloads, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Workloads::Unknown)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Status {
        workloads_status: Workloads,
    }

    fn read(json: &str) -> Workloads {
        serde_json::from_str::<Status>(json).unwrap().workloads_status
    }

    #[test]
    fn absent_null_empty_and_listed_are_told_apart() {
        assert_eq!(read("{}"), Workloads::Unknown);
        assert_eq!(read(r#"{"workloadsStatus": null}"#), Workloads::None);
        assert_eq!(read(r#"{"workloadsStatus": []}"#), Workloads::None);
        assert_eq!(
            read(r#"{"workloadsStatus": [{"podName": "redis-0", "podStatus": "Running"}]}"#),
            Workloads::Some
        );
        // From a serde_json::Value too (the watch path parses values).
        let v = serde_json::json!({"workloadsStatus": [{"podName": "a"}]});
        assert_eq!(serde_json::from_value::<Status>(v).unwrap().workloads_status, Workloads::Some);
    }

    #[test]
    fn other_shapes_read_as_unknown_not_as_errors() {
        for json in [r#""x""#, "7", "-1", "1.5", "true", r#"{"a": [1]}"#] {
            assert_eq!(read(&format!(r#"{{"workloadsStatus": {json}}}"#)), Workloads::Unknown, "{json}");
        }
    }
}
