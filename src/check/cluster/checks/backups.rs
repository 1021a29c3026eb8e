//! `backup-target` and `snapshot-retention`: is there an off-site copy, and do snapshots stay
//! within `snapshot-max-count` (`recurring-jobs` is in [`super::jobs`]).

use super::super::finding::{count, gib, some_names, Check, Finding, Severity};
use super::super::inventory::Inventory;

/// The setting bounding snapshots per volume, and its Longhorn default.
pub const SNAPSHOT_MAX_COUNT: (&str, i64) = ("snapshot-max-count", 250);
/// A volume with this share (%) of `snapshot-max-count` or more is reported as a warning.
pub const SNAPSHOT_WARN_PERCENT: i64 = 80;
/// Names listed in one aggregated finding before "and N more".
pub(super) const SHOWN: usize = 5;

/// `backup-target`: none configured, or configured and not available.
pub fn backup_target(inv: &Inventory) -> Vec<Finding> {
    let setting = inv.settings.get("backup-target").map(|s| s.trim()).filter(|s| !s.is_empty());
    let configured: Vec<_> =
        inv.backup_targets.iter().filter(|t| !t.spec.backup_target_url.trim().is_empty()).collect();
    let remedy_none = "set a backup target (S3, NFS, CIFS or Azure Blob) on the default BackupTarget (Settings > Backup Target)";
    if configured.is_empty() {
        if !inv.read.contains("BackupTarget") && !inv.settings.contains_key("backup-target") {
            return vec![Check::BackupTarget.finding(
                Severity::Info,
                "backuptargets",
                "not checked: no BackupTarget objects and no backup-target setting were read",
                "include backuptargets.longhorn.io in the snapshot",
            )];
        }
        if let Some(url) = setting {
            // Longhorn up to 1.7 keeps the target in a setting; its availability is not known here.
            return vec![Check::BackupTarget.finding(
                Severity::Info,
                "setting/backup-target",
                format!(
                    "backup target {url} is set; its availability is not reported (no BackupTarget object)"
                ),
                "",
            )];
        }
        return vec![Check::BackupTarget.finding(
            Severity::Error,
            "backuptargets",
            "no backup target is configured: no volume has an off-site copy",
            remedy_none,
        )];
    }
    let mut out = Vec::new();
    // A target without a URL is fine while no volume backs up to it; `default` is where a
    // volume without `backupTargetName` goes.
    for t in inv.backup_targets.iter().filter(|t| t.spec.backup_target_url.trim().is_empty()) {
        let name = t.metadata.name.as_str();
        let users: Vec<&str> = inv
            .volumes
            .iter()
            .filter(|v| {
                let target = v.spec.backup_target_name.as_str();
                (if target.is_empty() { "default" } else { target }) == name
            })
            .map(|v| v.metadata.name.as_str())
            .collect();
        if !users.is_empty() {
            out.push(Check::BackupTarget.finding(
                Severity::Error,
                format!("backuptarget/{name}"),
                format!(
                    "backup target {name} has no URL, and {} {} up to it: {}",
                    count(users.len(), "volume"),
                    if users.len() == 1 { "backs" } else { "back" },
                    some_names(&users, SHOWN)
                ),
                format!("set the URL of BackupTarget {name}, or point the volumes' backupTargetName at a configured target"),
            ));
        }
    }
    for t in configured {
        let Some(status) = &t.status else {
            // Longhorn has not reconciled it yet: unknown, not down.
            out.push(Check::BackupTarget.finding(
                Severity::Info,
                format!("backuptarget/{}", t.metadata.name),
                format!(
                    "backup target {} ({}) has no status yet: Longhorn has not probed it",
                    t.metadata.name, t.spec.backup_target_url
                ),
                "check again in a minute; if it stays so, look at the longhorn-manager logs",
            ));
            continue;
        };
        if status.available {
            continue;
        }
        let why = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Unavailable" && c.status == "True")
            .map(|c| c.message.trim())
            .filter(|m| !m.is_empty())
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        out.push(Check::BackupTarget.finding(
            Severity::Error,
            format!("backuptarget/{}", t.metadata.name),
            format!("backup target {} ({}) is not available{why}", t.metadata.name, t.spec.backup_target_url),
            "check the target URL, its credential secret and the network path from the nodes",
        ));
    }
    out
}

pub(super) fn snapshot_max(inv: &Inventory) -> Result<i64, Finding> {
    let (name, default) = SNAPSHOT_MAX_COUNT;
    inv.setting_int(name).map(|v| v.unwrap_or(default)).map_err(|why| {
        Check::SnapshotRetention.finding(
            Severity::Error,
            format!("setting/{name}"),
            format!("{why}; snapshot counts not checked"),
            format!("set {name} to a whole number (2..250)"),
        )
    })
}

/// `snapshot-retention`: volumes whose snapshot count approaches or reaches their snapshot
/// limit (`spec.snapshotMaxCount`, else `snapshot-max-count`), with the space their snapshots
/// hold.
pub fn snapshot_retention(inv: &Inventory) -> Vec<Finding> {
    let own: std::collections::HashMap<&str, i64> = inv
        .volumes
        .iter()
        .filter(|v| v.spec.snapshot_max_count > 0)
        .map(|v| (v.metadata.name.as_str(), v.spec.snapshot_max_count))
        .collect();
    let mut out = Vec::new();
    // An unreadable setting is reported even when some volumes carry their own limit.
    let setting = match snapshot_max(inv) {
        Ok(m) => m,
        Err(f) => {
            out.push(f);
            0
        }
    };
    for (volume, t) in &inv.snapshots {
        let (max, label) = match own.get(volume.as_str()) {
            Some(m) => (*m, "snapshotMaxCount"),
            None => (setting, "snapshot-max-count"),
        };
        if max <= 0 {
            continue;
        }
        let n = t.count as i64;
        let pct = n * 100 / max;
        if pct < SNAPSHOT_WARN_PERCENT {
            continue;
        }
        let space = if t.bytes > 0 { format!(", holding {}", gib(t.bytes)) } else { String::new() };
        let (severity, tail) = if n >= max {
            (Severity::Error, "at the limit: new snapshots and backups of it fail".to_string())
        } else {
            (Severity::Warning, format!("{pct}% of the limit"))
        };
        out.push(Check::SnapshotRetention.finding(
            severity,
            format!("volume/{volume}"),
            format!("{volume} has {} ({label}={max}){space}: {tail}", count(t.count, "snapshot")),
            "delete old snapshots or lower the retain of its recurring snapshot jobs",
        ));
    }
    out
}
