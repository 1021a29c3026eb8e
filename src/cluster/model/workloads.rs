//! What Longhorn says about the pods that use a volume (`status.kubernetesStatus`
//! `workloadsStatus` and `lastPodRefAt`): only whether one is listed, no pod names, so a drain
//! denial can tell a volume Longhorn attached itself from one a workload holds.

use serde::de::Deserializer;
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
        // Anything but a list or null only loses a hint in a message: unknown, not an error.
        Ok(match serde_json::Value::deserialize(d)? {
            serde_json::Value::Null => Workloads::None,
            serde_json::Value::Array(a) if a.is_empty() => Workloads::None,
            serde_json::Value::Array(_) => Workloads::Some,
            _ => Workloads::Unknown,
        })
    }
}

/// `lastPodRefAt` is set: the pods in `workloadsStatus` are history, none uses the volume now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodsGone(pub bool);

impl<'de> Deserialize<'de> for PodsGone {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A time when set; `""`, `null` or anything else: not set.
        let value = serde_json::Value::deserialize(d)?;
        Ok(PodsGone(value.as_str().is_some_and(|s| !s.trim().is_empty())))
    }
}

/// True when Longhorn's status says no pod uses the volume now: `workloadsStatus` empty, or
/// kept as history with `lastPodRefAt` set. False when it lists pods, or says nothing.
pub fn lists_no_pod(workloads: Workloads, gone: PodsGone) -> bool {
    match workloads {
        Workloads::None => true,
        Workloads::Some => gone.0,
        Workloads::Unknown => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Status {
        workloads_status: Workloads,
        last_pod_ref_at: PodsGone,
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
    fn pods_kept_as_history_are_no_pod_now() {
        let no_pod = |json: &str| {
            let st: Status = serde_json::from_str(json).unwrap();
            lists_no_pod(st.workloads_status, st.last_pod_ref_at)
        };
        let listed = r#""workloadsStatus": [{"podName": "redis-0", "podStatus": "Running"}]"#;
        assert!(!no_pod(&format!(r#"{{{listed}, "lastPodRefAt": ""}}"#)));
        assert!(no_pod(&format!(r#"{{{listed}, "lastPodRefAt": "2026-11-30T11:19:51Z"}}"#)));
        assert!(no_pod(r#"{"workloadsStatus": null, "lastPodRefAt": ""}"#));
        assert!(!no_pod("{}"), "nothing said: nothing known");
        assert!(!no_pod(r#"{"lastPodRefAt": "2026-11-30T11:19:51Z"}"#), "no list: nothing known");
        assert!(!no_pod(&format!(r#"{{{listed}, "lastPodRefAt": 7}}"#)));
    }

    #[test]
    fn other_shapes_read_as_unknown_not_as_errors() {
        for json in [r#""x""#, "7", "-1", "1.5", "true", r#"{"a": [1]}"#] {
            assert_eq!(read(&format!(r#"{{"workloadsStatus": {json}}}"#)), Workloads::Unknown, "{json}");
        }
    }
}
