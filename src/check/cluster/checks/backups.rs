//! `backup-target`, `recurring-jobs` and `snapshot-retention`: is there an off-site copy,
//! do jobs make one regularly, and do snapshots stay within `snapshot-max-count`.

use std::collections::BTreeSet;

use super::super::finding::{count, gib, some_names, Check, Finding, Severity};
use super::super::inventory::{Inventory, DEFAULT_GROUP, GROUP_LABEL_PREFIX, JOB_LABEL_PREFIX};

/// The setting bounding snapshots per volume, and its Longhorn default.
pub const SNAPSHOT_MAX_COUNT: (&str, i64) = ("snapshot-max-count", 250);
/// A volume with this share (%) of `snapshot-max-count` or more is reported as a warning.
pub const SNAPSHOT_WARN_PERCENT: i64 = 80;
/// Names listed in one aggregated finding before "and N more".
const SHOWN: usize = 5;

/// `backup-target`: none configured, or configured and not available.
pub fn backup_target(inv: &Inventory) -> Vec<Finding> {
    let setting = inv.settings.get("backup-target").map(|s| s.trim()).filter(|s| !s.is_empty());
    let configured: Vec<_> =
        inv.backup_targets.iter().filter(|t| !t.spec.backup_target_url.trim().is_empty()).collect();
    let remedy_none = "set a backup target (S3, NFS, CIFS or Azure Blob) on the default BackupTarget (Settings > Backup Target)";
    if configured.is_empty() {
        if !inv.read.contains("BackupTarget") && !inv.settings.contains_key("backup-target") {
            return vec![Finding::new(
                Check::BackupTarget,
                Severity::Info,
                "backuptargets",
                "not checked: no BackupTarget objects and no backup-target setting were read",
                "include backuptargets.longhorn.io in the snapshot",
            )];
        }
        if let Some(url) = setting {
            // Longhorn up to 1.7 keeps the target in a setting; its availability is not known here.
            return vec![Finding::new(
                Check::BackupTarget,
                Severity::Info,
                "setting/backup-target",
                format!(
                    "backup target {url} is set; its availability is not reported (no BackupTarget object)"
                ),
                "",
            )];
        }
        return vec![Finding::new(
            Check::BackupTarget,
            Severity::Error,
            "backuptargets",
            "no backup target is configured: no volume has an off-site copy",
            remedy_none,
        )];
    }
    let mut out = Vec::new();
    for t in configured {
        if t.status.available {
            continue;
        }
        let why = t
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == "Unavailable" && c.status == "True")
            .map(|c| c.message.trim())
            .filter(|m| !m.is_empty())
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        out.push(Finding::new(
            Check::BackupTarget,
            Severity::Error,
            format!("backuptarget/{}", t.metadata.name),
            format!("backup target {} ({}) is not available{why}", t.metadata.name, t.spec.backup_target_url),
            "check the target URL, its credential secret and the network path from the nodes",
        ));
    }
    out
}

fn is_snapshot_task(task: &str) -> bool {
    matches!(task, "snapshot" | "snapshot-force-create")
}

fn is_backup_task(task: &str) -> bool {
    matches!(task, "backup" | "backup-force-create")
}

/// Tasks whose `retain` bounds what they keep.
fn retains(task: &str) -> bool {
    is_snapshot_task(task) || is_backup_task(task) || task == "snapshot-delete"
}

fn snapshot_max(inv: &Inventory) -> Result<i64, Finding> {
    let (name, default) = SNAPSHOT_MAX_COUNT;
    inv.setting_int(name).map(|v| v.unwrap_or(default)).map_err(|why| {
        Finding::new(
            Check::SnapshotRetention,
            Severity::Error,
            format!("setting/{name}"),
            format!("{why}; snapshot counts not checked"),
            format!("set {name} to a whole number (2..250)"),
        )
    })
}

/// `recurring-jobs`: no snapshot job, no backup job, retention out of range, volumes in no job.
pub fn recurring_jobs(inv: &Inventory) -> Vec<Finding> {
    if !inv.read.contains("RecurringJob") && inv.recurring_jobs.is_empty() && inv.volumes.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let jobs = &inv.recurring_jobs;
    if !jobs.iter().any(|j| is_snapshot_task(&j.spec.task) || is_backup_task(&j.spec.task)) {
        out.push(Finding::new(
            Check::RecurringJobs,
            Severity::Warning,
            "recurringjobs",
            "no recurring snapshot job: volumes get no regular restore points",
            "create a RecurringJob with task snapshot (or backup) in group default",
        ));
    }
    if !jobs.iter().any(|j| is_backup_task(&j.spec.task)) {
        out.push(Finding::new(
            Check::RecurringJobs,
            Severity::Warning,
            "recurringjobs",
            "no recurring backup job: nothing is copied off-site on a schedule",
            "create a RecurringJob with task backup in group default",
        ));
    }
    let max = snapshot_max(inv).ok();
    for j in jobs {
        let name = &j.metadata.name;
        if !retains(&j.spec.task) || j.spec.retention_policy == "age-based" {
            continue;
        }
        if j.spec.retain <= 0 {
            out.push(Finding::new(
                Check::RecurringJobs,
                Severity::Warning,
                format!("recurringjob/{name}"),
                format!("{name} ({}) has retain {}: it keeps nothing it makes", j.spec.task, j.spec.retain),
                "set retain to the number of snapshots or backups to keep (1 or more)",
            ));
        } else if let Some(max) = max.filter(|m| is_snapshot_task(&j.spec.task) && j.spec.retain > *m) {
            out.push(Finding::new(
                Check::RecurringJobs,
                Severity::Error,
                format!("recurringjob/{name}"),
                format!(
                    "{name} ({}) has retain {} > snapshot-max-count={max}: new snapshots fail before it prunes",
                    j.spec.task, j.spec.retain
                ),
                format!("lower retain below {max} or raise snapshot-max-count"),
            ));
        }
    }
    let names: BTreeSet<&str> = jobs.iter().map(|j| j.metadata.name.as_str()).collect();
    let groups: BTreeSet<&str> = jobs.iter().flat_map(|j| j.spec.groups.iter().map(String::as_str)).collect();
    let uncovered: Vec<&str> = inv
        .volumes
        .iter()
        .filter(|v| {
            let labels = &v.metadata.labels;
            let jobs_of: Vec<&str> = labels.keys().filter_map(|k| k.strip_prefix(JOB_LABEL_PREFIX)).collect();
            let groups_of: Vec<&str> =
                labels.keys().filter_map(|k| k.strip_prefix(GROUP_LABEL_PREFIX)).collect();
            let named_any = !jobs_of.is_empty() || !groups_of.is_empty();
            let by_job = jobs_of.iter().any(|j| names.contains(j));
            let by_group = groups_of.iter().any(|g| groups.contains(g));
            let by_default = !named_any && groups.contains(DEFAULT_GROUP);
            !(by_job || by_group || by_default)
        })
        .map(|v| v.metadata.name.as_str())
        .collect();
    if !uncovered.is_empty() {
        out.push(Finding::new(
            Check::RecurringJobs,
            Severity::Warning,
            "volumes",
            format!("{} in no recurring job or job group: {}", count(uncovered.len(), "volume"), some_names(&uncovered, SHOWN)),
            "add the volumes to a job group (label recurring-job-group.longhorn.io/<group>=enabled) or give a job group default",
        ));
    }
    out
}

/// `snapshot-retention`: volumes whose snapshot count approaches or reaches
/// `snapshot-max-count`, with the space their snapshots hold.
pub fn snapshot_retention(inv: &Inventory) -> Vec<Finding> {
    let max = match snapshot_max(inv) {
        Ok(m) if m > 0 => m,
        Ok(_) => return Vec::new(),
        Err(f) => return vec![f],
    };
    let mut out = Vec::new();
    for (volume, t) in &inv.snapshots {
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
        out.push(Finding::new(
            Check::SnapshotRetention,
            severity,
            format!("volume/{volume}"),
            format!("{volume} has {} (snapshot-max-count={max}){space}: {tail}", count(t.count, "snapshot")),
            "delete old snapshots or lower the retain of its recurring snapshot jobs",
        ));
    }
    out
}
