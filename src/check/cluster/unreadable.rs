//! Objects `check cluster` could not read: left out of the checks, so one malformed object
//! does not blind the checklist, and reported as an error under the check each kind feeds.

use std::collections::BTreeMap;

use super::finding::{count, some_names, Check, Finding, Severity};
use crate::cluster::LONGHORN_NAMESPACE;

/// Names listed in one finding before "and N more".
const SHOWN: usize = 3;

/// The objects that could not be read, by `(apiVersion, kind)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unreadable {
    by_kind: BTreeMap<(String, String), Vec<Bad>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Bad {
    name: String,
    reason: String,
}

impl Unreadable {
    /// Records that the object `name` of `api_version` `kind` could not be read, and why.
    pub fn add(&mut self, api_version: &str, kind: &str, name: &str, reason: String) {
        let key = (api_version.to_string(), kind.to_string());
        self.by_kind.entry(key).or_default().push(Bad { name: name.to_string(), reason });
    }

    pub fn is_empty(&self) -> bool {
        self.by_kind.is_empty()
    }

    /// One error finding per kind, under the check that reads that kind.
    pub fn findings(&self) -> Vec<Finding> {
        self.by_kind
            .iter()
            .map(|((api_version, kind), bad)| {
                let names: Vec<&str> = bad.iter().map(|b| b.name.as_str()).collect();
                let verb = if bad.len() == 1 { "was" } else { "were" };
                let longhorn = api_version.starts_with("longhorn.io/");
                let shown = if longhorn && kind == "Node" { "Longhorn Node" } else { kind.as_str() };
                let plural = if kind.ends_with('s') { format!("{kind}es") } else { format!("{kind}s") }.to_lowercase();
                let resource = match (longhorn, kind.as_str()) {
                    (true, _) => format!("-n {LONGHORN_NAMESPACE} get {plural}.longhorn.io"),
                    (false, "Pod") => format!("-n {LONGHORN_NAMESPACE} get pods"),
                    (false, "DaemonSet") => "get daemonsets -A".to_string(),
                    (false, _) => format!("get {plural}"),
                };
                check_of(kind).finding(
                    Severity::Error,
                    plural,
                    format!(
                        "{} could not be read and {verb} left out of this check: {}; {}: {}",
                        count(bad.len(), shown),
                        some_names(&names, SHOWN),
                        bad[0].name,
                        bad[0].reason
                    ),
                    format!(
                        "look at it (kubectl {resource} {} -o yaml): if Longhorn wrote it so, this longhorn-guard does not know the format",
                        bad[0].name
                    ),
                )
            })
            .collect()
    }
}

/// The check whose answer rests on objects of `kind`.
fn check_of(kind: &str) -> Check {
    match kind {
        "Node" => Check::NodeConditions,
        "BackupTarget" => Check::BackupTarget,
        "RecurringJob" => Check::RecurringJobs,
        "Snapshot" => Check::SnapshotRetention,
        "StorageClass" => Check::ReplicaCount,
        "Setting" => Check::Settings,
        "DaemonSet" => Check::StorageNetwork,
        // Volumes, replicas, engines, instance managers, pods: what volume health reads.
        _ => Check::VolumeHealth,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_error_per_kind_under_its_check() {
        let mut u = Unreadable::default();
        assert!(u.is_empty() && u.findings().is_empty());
        for n in ["s1", "s2", "s3", "s4"] {
            u.add("longhorn.io/v1beta2", "Snapshot", n, format!("bad size of {n}"));
        }
        u.add("longhorn.io/v1beta2", "Volume", "v", "invalid type".into());
        u.add("v1", "Node", "n1", "invalid type".into());
        u.add("storage.k8s.io/v1", "StorageClass", "sc", "invalid type".into());
        let f = u.findings();
        assert_eq!(f.len(), 4);
        assert_eq!(
            (f[0].check, f[0].severity, f[0].object.as_str()),
            (Check::SnapshotRetention, Severity::Error, "snapshots")
        );
        assert_eq!(
            f[0].message,
            "4 Snapshots could not be read and were left out of this check: s1, s2, s3 and 1 more; s1: bad size of s1"
        );
        assert_eq!(f[1].check, Check::VolumeHealth);
        assert_eq!(
            f[1].message,
            "1 Volume could not be read and was left out of this check: v; v: invalid type"
        );
        assert!(
            f[1].remedy.contains("(kubectl -n longhorn-system get volumes.longhorn.io v -o yaml)"),
            "{}",
            f[1].remedy
        );
        assert_eq!((f[2].check, f[2].object.as_str()), (Check::ReplicaCount, "storageclasses"));
        assert!(f[2].remedy.contains("(kubectl get storageclasses sc -o yaml)"), "{}", f[2].remedy);
        assert_eq!((f[3].check, f[3].object.as_str()), (Check::NodeConditions, "nodes"));
    }
}
