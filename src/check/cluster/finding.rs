//! What `check cluster` reports: one [`Finding`] per problem (or per node for drain
//! readiness), each under a stable check identifier.

use serde::Serialize;

/// How serious a finding is. `Error` makes `check cluster` exit 1.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

/// The stable identifiers of the checks, in report order (docs/check-cluster.md).
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    NodeConditions,
    DiskSpace,
    BackupTarget,
    RecurringJobs,
    SnapshotRetention,
    ReplicaCount,
    VolumeHealth,
    Settings,
    StorageNetwork,
    DrainReadiness,
}

impl Check {
    /// Every check, in report order.
    pub const ALL: [Check; 10] = [
        Self::NodeConditions,
        Self::DiskSpace,
        Self::BackupTarget,
        Self::RecurringJobs,
        Self::SnapshotRetention,
        Self::ReplicaCount,
        Self::VolumeHealth,
        Self::Settings,
        Self::StorageNetwork,
        Self::DrainReadiness,
    ];

    /// The identifier, as in JSON output and the `check` metric label.
    pub fn id(self) -> &'static str {
        match self {
            Self::NodeConditions => "node-conditions",
            Self::DiskSpace => "disk-space",
            Self::BackupTarget => "backup-target",
            Self::RecurringJobs => "recurring-jobs",
            Self::SnapshotRetention => "snapshot-retention",
            Self::ReplicaCount => "replica-count",
            Self::VolumeHealth => "volume-health",
            Self::Settings => "settings",
            Self::StorageNetwork => "storage-network",
            Self::DrainReadiness => "drain-readiness",
        }
    }

    /// A finding of this check.
    pub fn finding(
        self,
        severity: Severity,
        object: impl Into<String>,
        message: impl Into<String>,
        remedy: impl Into<String>,
    ) -> Finding {
        let (object, message, remedy) = (object.into(), message.into(), remedy.into());
        Finding { check: self, severity, object, message, remedy }
    }
}

/// One finding: which check, how serious, about what, why, and what to do.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Finding {
    pub check: Check,
    pub severity: Severity,
    /// `kind/name`, e.g. `node/node-1`, `volume/pvc-0a1b...`, `setting/storage-network`.
    pub object: String,
    pub message: String,
    /// What to do about it ("" when nothing is to be done).
    pub remedy: String,
}

pub use crate::decision::count;

/// Up to `shown` names joined with ", ", then "and N more".
pub fn some_names<S: AsRef<str>>(names: &[S], shown: usize) -> String {
    let mut out: Vec<&str> = names.iter().take(shown).map(AsRef::as_ref).collect();
    let more = names.len().saturating_sub(shown);
    let tail = if more > 0 { format!(" and {more} more") } else { String::new() };
    if out.is_empty() {
        out.push("none");
    }
    format!("{}{tail}", out.join(", "))
}

/// Bytes as GiB with one decimal, e.g. `86.5 GiB`.
pub fn gib(bytes: i64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_counts_read_well() {
        assert_eq!(count(1, "volume"), "1 volume");
        assert_eq!(count(0, "volume"), "0 volumes");
        assert_eq!(some_names(&["a", "b", "c"], 2), "a, b and 1 more");
        assert_eq!(some_names(&["a"], 2), "a");
        assert_eq!(gib(3 << 29), "1.5 GiB");
        let ids: Vec<&str> = Check::ALL.iter().map(|c| c.id()).collect();
        for (c, id) in Check::ALL.iter().zip(&ids) {
            assert_eq!(serde_json::to_value(c).unwrap(), serde_json::json!(id));
        }
    }
}
