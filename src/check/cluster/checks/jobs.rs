//! `recurring-jobs`: do snapshot and backup jobs cover every volume, and do their retention
//! counts stay within each volume's snapshot limit, alone and together.

use super::super::finding::{count, some_names, Check, Finding, Severity};
use super::super::inventory::{
    Inventory, RecurringJobInfo, VolumeInfo, DEFAULT_GROUP, GROUP_LABEL_PREFIX, JOB_LABEL_PREFIX,
};
use super::backups::{snapshot_max, SHOWN};

fn is_snapshot_task(task: &str) -> bool {
    matches!(task, "snapshot" | "snapshot-force-create")
}

fn is_backup_task(task: &str) -> bool {
    matches!(task, "backup" | "backup-force-create")
}

/// Snapshot and backup tasks: the ones that make restore points (a trim or cleanup job does not).
fn makes_restore_points(task: &str) -> bool {
    is_snapshot_task(task) || is_backup_task(task)
}

/// Tasks whose `retain` bounds what they keep.
fn retains(task: &str) -> bool {
    makes_restore_points(task) || task == "snapshot-delete"
}

/// True when the job's `retain` is a count Longhorn reads: the count-based policy (empty, the
/// default, or `count-based`; `count-base` is accepted too). Under an age-based policy (Longhorn
/// 1.13+; 1.10 to 1.12 have no `retentionPolicy`) `retain` is not read.
fn retain_is_a_count(policy: &str) -> bool {
    matches!(policy, "" | "count-based" | "count-base")
}

/// `recurring-jobs`: no snapshot job, no backup job, retention out of range, volumes in no job.
pub fn recurring_jobs(inv: &Inventory) -> Vec<Finding> {
    if !inv.read.contains("RecurringJob") {
        if inv.volumes.is_empty() {
            return Vec::new();
        }
        // A snapshot without the kind cannot tell "no jobs" from "not included".
        return vec![Check::RecurringJobs.finding(
            Severity::Info,
            "recurringjobs",
            "not checked: no RecurringJob objects were read",
            "include recurringjobs.longhorn.io in the snapshot",
        )];
    }
    let mut out = Vec::new();
    let jobs = &inv.recurring_jobs;
    if !jobs.iter().any(|j| makes_restore_points(&j.spec.task)) {
        out.push(Check::RecurringJobs.finding(
            Severity::Warning,
            "recurringjobs",
            "no recurring snapshot job: volumes get no regular restore points",
            "create a RecurringJob with task snapshot (or backup) in group default",
        ));
    }
    if !jobs.iter().any(|j| is_backup_task(&j.spec.task)) {
        out.push(Check::RecurringJobs.finding(
            Severity::Warning,
            "recurringjobs",
            "no recurring backup job: nothing is copied off-site on a schedule",
            "create a RecurringJob with task backup in group default",
        ));
    }
    let max = snapshot_max(inv).ok();
    let members: Vec<(&VolumeInfo, Membership)> = inv.volumes.iter().map(|v| (v, membership(v))).collect();
    let counted = |j: &RecurringJobInfo| retains(&j.spec.task) && retain_is_a_count(&j.spec.retention_policy);
    for j in jobs.iter().filter(|j| counted(j)) {
        let name = &j.metadata.name;
        if j.spec.retain <= 0 {
            let (text, remedy) = if j.spec.task == "snapshot-delete" {
                (
                    format!(
                        "{name} (snapshot-delete) has retain {}: it deletes every snapshot of its volumes",
                        j.spec.retain
                    ),
                    "set retain to the number of snapshots to keep, if any should stay",
                )
            } else {
                (
                    format!(
                        "{name} ({}) has retain {}: it keeps nothing it makes",
                        j.spec.task, j.spec.retain
                    ),
                    "set retain to the number of snapshots or backups to keep (1 or more)",
                )
            };
            out.push(Check::RecurringJobs.finding(
                Severity::Warning,
                format!("recurringjob/{name}"),
                text,
                remedy,
            ));
        } else if is_snapshot_task(&j.spec.task) {
            // The job makes a snapshot, then prunes to `retain`: with `retain` at a volume's
            // limit, the next snapshot of that volume fails. The limit is the volume's own
            // (`spec.snapshotMaxCount`), else the setting.
            let tightest = members
                .iter()
                .filter(|(_, m)| m.covered_by(j))
                .filter_map(|(v, _)| Some((volume_max(v, max)?, v.metadata.name.as_str())))
                .min();
            match tightest {
                Some((limit, volume)) if limit > 0 && j.spec.retain >= limit => out.push(Check::RecurringJobs.finding(
                    Severity::Error,
                    format!("recurringjob/{name}"),
                    format!(
                        "{name} ({}) has retain {} >= the limit of {volume} ({limit}): its next snapshot fails before it prunes",
                        j.spec.task, j.spec.retain
                    ),
                    format!("lower retain below {limit}, or raise the volume's snapshotMaxCount"),
                )),
                // It covers no volume now: nothing fails yet, any volume added would.
                None => {
                    if let Some(limit) = max.filter(|m| *m > 0 && j.spec.retain >= *m) {
                        out.push(Check::RecurringJobs.finding(
                            Severity::Warning,
                            format!("recurringjob/{name}"),
                            format!(
                                "{name} ({}) has retain {} >= snapshot-max-count ({limit}) and covers no volume now: snapshots of any volume added to it would fail",
                                j.spec.task, j.spec.retain
                            ),
                            format!("lower retain below {limit}"),
                        ));
                    }
                }
                Some(_) => {}
            }
        }
    }
    out.extend(snapshot_jobs_adding_up(&members, jobs, max));
    let uncovered: Vec<&str> = members
        .iter()
        .filter(|(_, m)| !jobs.iter().any(|j| makes_restore_points(&j.spec.task) && m.covered_by(j)))
        .map(|(v, _)| v.metadata.name.as_str())
        .collect();
    if !uncovered.is_empty() {
        out.push(Check::RecurringJobs.finding(
            Severity::Warning,
            "volumes",
            format!(
                "{} in no recurring snapshot or backup job: {}",
                count(uncovered.len(), "volume"),
                some_names(&uncovered, SHOWN)
            ),
            "add the volumes to a job group with a snapshot or backup job (label recurring-job-group.longhorn.io/<group>=enabled) or give such a job group default",
        ));
    }
    out
}

/// Volumes whose count-based snapshot jobs each stay under the volume's limit but together
/// reach it: each job prunes only its own snapshots, so theirs add up. One finding per set of
/// jobs and limit, naming the volumes.
fn snapshot_jobs_adding_up(
    members: &[(&VolumeInfo, Membership)],
    jobs: &[RecurringJobInfo],
    max: Option<i64>,
) -> Vec<Finding> {
    let snapshot_jobs: Vec<&RecurringJobInfo> = jobs
        .iter()
        .filter(|j| {
            is_snapshot_task(&j.spec.task) && retain_is_a_count(&j.spec.retention_policy) && j.spec.retain > 0
        })
        .collect();
    // (the covering jobs with their retain, the limit, the retains' sum) -> the volumes.
    type Key = (Vec<(String, i64)>, i64, i64);
    let mut by_jobs: std::collections::BTreeMap<Key, Vec<&str>> = Default::default();
    for (v, m) in members {
        let Some(limit) = volume_max(v, max).filter(|l| *l > 0) else { continue };
        let covering: Vec<(String, i64)> = snapshot_jobs
            .iter()
            .filter(|j| m.covered_by(j))
            .map(|j| (j.metadata.name.clone(), j.spec.retain))
            .collect();
        let sum: i64 = covering.iter().map(|(_, r)| *r).fold(0, i64::saturating_add);
        // One job alone at the limit is reported on the job.
        if covering.len() > 1 && sum >= limit && covering.iter().all(|(_, r)| *r < limit) {
            by_jobs.entry((covering, limit, sum)).or_default().push(v.metadata.name.as_str());
        }
    }
    by_jobs
        .into_iter()
        .map(|((covering, limit, sum), volumes)| {
            let parts: Vec<String> = covering.iter().map(|(n, r)| format!("{n} ({r})")).collect();
            Check::RecurringJobs.finding(
                Severity::Error,
                "volumes",
                format!(
                    "{}: snapshot jobs {} keep up to {sum} snapshots together, >= the limit ({limit}); each prunes only its own, so snapshots fail once they add up: {}",
                    count(volumes.len(), "volume"),
                    parts.join(" + "),
                    some_names(&volumes, SHOWN)
                ),
                format!("lower the jobs' retain so their sum stays below {limit}, or raise the volumes' snapshotMaxCount"),
            )
        })
        .collect()
}

/// The jobs and groups a volume is in, as Longhorn selects it: its labels set to `enabled`,
/// and the default group when it carries no recurring-job label at all.
struct Membership<'a> {
    jobs: Vec<&'a str>,
    groups: Vec<&'a str>,
}

fn membership(v: &VolumeInfo) -> Membership<'_> {
    let labels = &v.metadata.labels;
    let enabled = |prefix: &'static str| -> Vec<&str> {
        labels
            .iter()
            .filter(|(_, val)| val.as_str() == "enabled")
            .filter_map(|(k, _)| k.strip_prefix(prefix))
            .collect()
    };
    let mut groups = enabled(GROUP_LABEL_PREFIX);
    if labels.is_empty() {
        groups.push(DEFAULT_GROUP);
    }
    Membership { jobs: enabled(JOB_LABEL_PREFIX), groups }
}

impl Membership<'_> {
    fn covered_by(&self, j: &RecurringJobInfo) -> bool {
        self.jobs.contains(&j.metadata.name.as_str())
            || j.spec.groups.iter().any(|g| self.groups.contains(&g.as_str()))
    }
}

/// A volume's snapshot limit: its own `spec.snapshotMaxCount`, else the setting's.
fn volume_max(v: &VolumeInfo, setting: Option<i64>) -> Option<i64> {
    Some(v.spec.snapshot_max_count).filter(|m| *m > 0).or(setting)
}
