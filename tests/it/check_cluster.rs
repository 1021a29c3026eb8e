//! `longhorn-guard check cluster` over snapshot files: every check firing (the demo snapshot,
//! exact messages) and not firing (`tests/data/check-cluster/quiet.json`, a three-node cluster
//! with nothing wrong), plus the boundaries of each check as edits of the quiet snapshot.

use std::path::Path;
use std::process::Command;
use std::time::SystemTime;

use longhorn_guard::check::cluster::{load_snapshot, Check, Report, Severity};
use longhorn_guard::policy::Policy;
use serde_json::{json, Value};

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/cluster-snapshot.yaml");
const QUIET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/check-cluster/quiet.json");
const GIB: i64 = 1 << 30;

fn report_of(path: &Path, policy: &Policy) -> Report {
    let (inv, view) = load_snapshot(path).unwrap();
    Report::build(&inv, &view, policy, SystemTime::now())
}

/// The quiet snapshot after `edit`, written to a file and read back like any snapshot.
fn quiet_with(edit: impl FnOnce(&mut Value)) -> Report {
    quiet_with_policy(&Policy::default(), edit)
}

fn quiet_with_policy(policy: &Policy, edit: impl FnOnce(&mut Value)) -> Report {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(QUIET).unwrap()).unwrap();
    edit(&mut doc);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snap.json");
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    report_of(&path, policy)
}

/// The item of that kind and name.
fn item<'a>(doc: &'a mut Value, kind: &str, name: &str) -> &'a mut Value {
    doc["items"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|i| i["kind"] == kind && i["metadata"]["name"] == name && i["apiVersion"] != "v1")
        .unwrap_or_else(|| panic!("{kind} {name}"))
}

fn items(doc: &mut Value) -> &mut Vec<Value> {
    doc["items"].as_array_mut().unwrap()
}

/// `(severity, object, message)` of one check's findings.
fn of(r: &Report, check: Check) -> Vec<(Severity, String, String)> {
    r.findings
        .iter()
        .filter(|f| f.check == check)
        .map(|f| (f.severity, f.object.clone(), f.message.clone()))
        .collect()
}

fn one(sev: Severity, object: &str, message: &str) -> Vec<(Severity, String, String)> {
    vec![(sev, object.to_string(), message.to_string())]
}

#[test]
fn the_quiet_cluster_fires_nothing_but_drain_readiness_info() {
    let r = report_of(Path::new(QUIET), &Policy::default());
    let lines: Vec<(Check, Severity, String)> =
        r.findings.iter().map(|f| (f.check, f.severity, f.message.clone())).collect();
    assert_eq!(
        lines,
        ["n1", "n2", "n3"]
            .map(|n| (Check::DrainReadiness, Severity::Info, format!("{n}: can be drained now")))
            .to_vec()
    );
    assert_eq!(r.exit_code(), 0);
    assert_eq!(r.summary_line(), "check cluster: 0 errors, 0 warnings, 3 info (10 checks)");
}

#[test]
fn the_demo_snapshot_fires_every_check_with_exact_messages() {
    use Severity::*;
    let r = report_of(Path::new(DEMO), &Policy::default());
    let got: Vec<(&str, Severity, &str, &str)> = r
        .findings
        .iter()
        .map(|f| (f.check.id(), f.severity, f.object.as_str(), f.message.as_str()))
        .collect();
    let want = vec![
        ("node-conditions", Error, "node/node-3", "node-3: RequiredPackages is False (PackagesNotInstalled): Missing packages: [open-iscsi]"),
        ("disk-space", Warning, "node/node-2", "node-2 disk default-disk-2f4b6d8e0a1c3e5f: 28.0 GiB available of 100.0 GiB (28%), 3 points above storage-minimal-available-percentage=25%, where Longhorn stops scheduling replicas"),
        ("backup-target", Error, "backuptarget/default", "backup target default (s3://longhorn-backups@us-east-1/) is not available: failed to list objects: AccessDenied: Access Denied status code: 403"),
        ("recurring-jobs", Warning, "recurringjobs", "no recurring backup job: nothing is copied off-site on a schedule"),
        ("recurring-jobs", Error, "recurringjob/hourly-snapshot", "hourly-snapshot (snapshot) has retain 24 >= the limit of vol-healthy (5): its next snapshot fails before it prunes"),
        ("recurring-jobs", Warning, "volumes", "1 volume in no recurring snapshot or backup job: vol-detached"),
        ("snapshot-retention", Warning, "volume/vol-healthy", "vol-healthy has 4 snapshots (snapshotMaxCount=5), holding 1.9 GiB: 80% of the limit"),
        ("replica-count", Warning, "volume/vol-degraded", "volume vol-degraded: numberOfReplicas=2 tolerates 1 node failure; policy minimum is 3"),
        ("replica-count", Warning, "volume/vol-detached", "volume vol-detached: numberOfReplicas=1 has no redundancy; policy minimum is 3"),
        ("replica-count", Warning, "volume/vol-healthy", "volume vol-healthy: numberOfReplicas=3 > 2 schedulable nodes; a lost replica has no node to rebuild on"),
        ("replica-count", Warning, "volume/vol-v2", "volume vol-v2: numberOfReplicas=2 tolerates 1 node failure; policy minimum is 3"),
        ("volume-health", Warning, "volume/vol-degraded", "vol-degraded is degraded: fewer healthy replicas than numberOfReplicas=2"),
        ("volume-health", Error, "volume/vol-degraded", "vol-degraded: rebuild of replica vol-degraded-r-7d8e9f0a stuck at 0% since 2026-11-30T11:19:51Z"),
        ("settings", Info, "setting/node-drain-policy", "node-drain-policy=allow-if-replica-is-stopped: Longhorn lets drains take the last replica of detached volumes"),
        ("drain-readiness", Warning, "node/node-1", "node-1: a drain would wait for 2 volumes (vol-degraded, vol-v2)"),
        ("drain-readiness", Warning, "node/node-2", "node-2: a drain would wait for 2 volumes (vol-detached, vol-healthy)"),
        ("drain-readiness", Info, "node/node-3", "node-3: can be drained now"),
    ];
    assert_eq!(got, want);
    let fired: std::collections::BTreeSet<Check> = r.findings.iter().map(|f| f.check).collect();
    // All but `storage-network`, which needs the storage network set (the demo runs without
    // one): tests/check_cluster_network.rs fires it.
    let unfired: Vec<Check> = Check::ALL.into_iter().filter(|c| !fired.contains(c)).collect();
    assert_eq!(unfired, [Check::StorageNetwork], "every other check fires on the demo snapshot");
    assert_eq!(r.exit_code(), 1);
    let remedy = |obj: &str| {
        r.findings.iter().find(|f| f.check == Check::ReplicaCount && f.object == obj).unwrap().remedy.clone()
    };
    assert_eq!(
        remedy("volume/vol-healthy"),
        "make more nodes schedulable (uncordon, allow scheduling) or lower numberOfReplicas"
    );
    assert_eq!(
        remedy("volume/vol-detached"),
        "raise the replica count to 3 (the policy minimum) or accept the trade-off"
    );
}

#[test]
fn node_conditions_report_longhorns_own_message() {
    let r = quiet_with(|d| {
        let n = item(d, "Node", "n2");
        n["status"]["conditions"][5] = json!({"type": "Multipathd", "status": "False", "reason": "MultipathdIsRunning",
            "message": "multipathd is running with a known issue that affects Longhorn"});
        n["status"]["diskStatus"]["disk-1"]["conditions"][0] = json!({"type": "Ready", "status": "False", "reason": "DiskFilesystemChanged", "message": "disk has changed"});
        item(d, "Node", "n3")["status"]["conditions"][0] = json!({"type": "Ready", "status": "Unknown"});
    });
    assert_eq!(
        of(&r, Check::NodeConditions),
        vec![
            (Severity::Warning, "node/n2".into(), "n2: Multipathd is False (MultipathdIsRunning): multipathd is running with a known issue that affects Longhorn".into()),
            (Severity::Error, "node/n2".into(), "n2 disk disk-1: not ready (Ready is False) (DiskFilesystemChanged): disk has changed".into()),
            (Severity::Error, "node/n3".into(), "n3: Ready is Unknown".into()),
        ]
    );
}

#[test]
fn extreme_disk_numbers_never_overflow() {
    // i64 extremes in a malformed status: the arithmetic saturates instead of panicking
    // (debug) or wrapping (release) into a wrong answer.
    let r = quiet_with(|d| {
        let n = item(d, "Node", "n1");
        n["spec"]["disks"]["disk-1"]["storageReserved"] = json!(i64::MIN);
        n["status"]["diskStatus"]["disk-1"]["storageMaximum"] = json!(i64::MAX);
        n["status"]["diskStatus"]["disk-1"]["storageAvailable"] = json!(i64::MAX);
        n["status"]["diskStatus"]["disk-1"]["storageScheduled"] = json!(i64::MAX);
    });
    // The limit saturates at i64::MAX, and the use is all of it.
    let found = of(&r, Check::DiskSpace);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].2.contains("GiB limit (100%;"), "{found:?}");
    let r = quiet_with(|d| {
        let st = &mut item(d, "Node", "n1")["status"]["diskStatus"]["disk-1"];
        st["storageMaximum"] = json!(1);
        st["storageScheduled"] = json!(i64::MAX);
    });
    assert!(of(&r, Check::DiskSpace)
        .iter()
        .any(|(s, _, m)| *s == Severity::Error && m.contains("scheduled of a")));
}

#[test]
fn disk_space_warns_ten_points_before_the_limit_and_errs_at_it() {
    let disk = |avail: i64, sched: i64| {
        quiet_with(move |d| {
            let st = &mut item(d, "Node", "n1")["status"]["diskStatus"]["disk-1"];
            st["storageAvailable"] = json!(avail);
            st["storageScheduled"] = json!(sched);
        })
    };
    assert_eq!(of(&disk(35 * GIB, 30 * GIB), Check::DiskSpace), vec![], "10 points above: quiet");
    assert_eq!(
        of(&disk(34 * GIB, 30 * GIB), Check::DiskSpace),
        one(Severity::Warning, "node/n1", "n1 disk disk-1: 34.0 GiB available of 100.0 GiB (34%), 9 points above storage-minimal-available-percentage=25%, where Longhorn stops scheduling replicas")
    );
    assert_eq!(
        of(&disk(25 * GIB, 30 * GIB), Check::DiskSpace),
        one(Severity::Error, "node/n1", "n1 disk disk-1: 25.0 GiB available of 100.0 GiB (25%), at or below storage-minimal-available-percentage=25%: Longhorn schedules no new replica here")
    );
    assert_eq!(
        of(&disk(80 * GIB, 90 * GIB), Check::DiskSpace),
        one(Severity::Warning, "node/n1", "n1 disk disk-1: 90.0 GiB scheduled of a 100.0 GiB limit (90%; storage-over-provisioning-percentage=100% of maximum less 0.0 GiB reserved)")
    );
    assert_eq!(
        of(&disk(80 * GIB, 100 * GIB), Check::DiskSpace),
        one(Severity::Error, "node/n1", "n1 disk disk-1: 100.0 GiB scheduled of a 100.0 GiB limit (100%; storage-over-provisioning-percentage=100% of maximum less 0.0 GiB reserved): Longhorn schedules no new replica here")
    );
    // The settings' actual values are read: 200% over-provisioning doubles the limit.
    let r = quiet_with(|d| {
        item(d, "Setting", "storage-over-provisioning-percentage")["value"] = json!("200");
        item(d, "Node", "n1")["status"]["diskStatus"]["disk-1"]["storageScheduled"] = json!(100 * GIB);
    });
    assert_eq!(of(&r, Check::DiskSpace), vec![]);
    let r =
        quiet_with(|d| items(d).retain(|i| i["metadata"]["name"] != "storage-minimal-available-percentage"));
    let r2 = quiet_with(|d| {
        items(d).retain(|i| i["metadata"]["name"] != "storage-minimal-available-percentage");
        item(d, "Node", "n1")["status"]["diskStatus"]["disk-1"]["storageAvailable"] = json!(20 * GIB);
    });
    assert_eq!(of(&r, Check::DiskSpace), vec![]);
    assert_eq!(
        of(&r2, Check::DiskSpace),
        one(Severity::Error, "node/n1", "n1 disk disk-1: 20.0 GiB available of 100.0 GiB (20%), at or below storage-minimal-available-percentage=25% (Longhorn's default; the setting was not read): Longhorn schedules no new replica here")
    );
    let bad =
        quiet_with(|d| item(d, "Setting", "storage-minimal-available-percentage")["value"] = json!("lots"));
    assert_eq!(
        of(&bad, Check::DiskSpace),
        one(Severity::Error, "setting/storage-minimal-available-percentage", "setting storage-minimal-available-percentage=\"lots\" is not a whole number; disk space not checked")
    );
}

#[test]
fn backup_target_missing_unavailable_or_unknown() {
    let r = quiet_with(|d| {
        let t = item(d, "BackupTarget", "default");
        t["status"] = json!({"available": false, "conditions": [{"type": "Unavailable", "status": "True",
            "reason": "Unavailable", "message": "cannot reach nfs://10.0.0.9:/backups"}]});
    });
    assert_eq!(
        of(&r, Check::BackupTarget),
        one(Severity::Error, "backuptarget/default", "backup target default (s3://backups@us-east-1/) is not available: cannot reach nfs://10.0.0.9:/backups")
    );
    let r = quiet_with(|d| item(d, "BackupTarget", "default")["spec"]["backupTargetURL"] = json!(""));
    assert_eq!(
        of(&r, Check::BackupTarget),
        one(
            Severity::Error,
            "backuptargets",
            "no backup target is configured: no volume has an off-site copy"
        )
    );
    let r = quiet_with(|d| items(d).retain(|i| i["kind"] != "BackupTarget"));
    assert_eq!(
        of(&r, Check::BackupTarget),
        one(
            Severity::Info,
            "backuptargets",
            "not checked: no BackupTarget objects and no backup-target setting were read"
        )
    );
    let r = quiet_with(|d| {
        items(d).retain(|i| i["kind"] != "BackupTarget");
        items(d).push(json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Setting",
            "metadata": {"name": "backup-target", "namespace": "longhorn-system"}, "value": "nfs://store:/lh"}));
    });
    assert_eq!(
        of(&r, Check::BackupTarget),
        one(
            Severity::Info,
            "setting/backup-target",
            "backup target nfs://store:/lh is set; its availability is not reported (no BackupTarget object)"
        )
    );
}

#[test]
fn recurring_jobs_retention_and_coverage() {
    let r = quiet_with(|d| {
        item(d, "RecurringJob", "daily-snap")["spec"]["retain"] = json!(300);
        item(d, "RecurringJob", "daily-backup")["spec"]["retain"] = json!(0);
        item(d, "Volume", "data")["metadata"]["labels"]["recurring-job-group.longhorn.io/weekly"] =
            json!("enabled");
    });
    assert_eq!(
        of(&r, Check::RecurringJobs),
        vec![
            // It covers no volume now (data left the default group): nothing fails yet.
            (Severity::Warning, "recurringjob/daily-snap".into(), "daily-snap (snapshot) has retain 300 >= snapshot-max-count (250) and covers no volume now: snapshots of any volume added to it would fail".into()),
            (Severity::Warning, "recurringjob/daily-backup".into(), "daily-backup (backup) has retain 0: it keeps nothing it makes".into()),
            (Severity::Warning, "volumes".into(), "1 volume in no recurring snapshot or backup job: data".into()),
        ]
    );
    // Age-based retention does not read `retain`; a job label naming an existing job covers.
    let r = quiet_with(|d| {
        let b = item(d, "RecurringJob", "daily-backup");
        b["spec"]["retain"] = json!(0);
        b["spec"]["retentionPolicy"] = json!("age-based");
        item(d, "Volume", "data")["metadata"]["labels"]["recurring-job.longhorn.io/daily-snap"] =
            json!("enabled");
    });
    assert_eq!(of(&r, Check::RecurringJobs), vec![]);
    // A snapshot without the kind cannot tell "no jobs" from "not included".
    let r = quiet_with(|d| items(d).retain(|i| i["kind"] != "RecurringJob"));
    assert_eq!(
        of(&r, Check::RecurringJobs),
        one(Severity::Info, "recurringjobs", "not checked: no RecurringJob objects were read")
    );
    // Only snapshot and backup jobs make restore points: a trim job covers nothing.
    let r = quiet_with(|d| {
        for name in ["daily-snap", "daily-backup"] {
            item(d, "RecurringJob", name)["spec"]["groups"] = json!(["other"]);
        }
        let mut trim = item(d, "RecurringJob", "daily-snap").clone();
        trim["metadata"]["name"] = json!("trim");
        trim["spec"] = json!({"task": "filesystem-trim", "cron": "0 4 * * *", "retain": 0, "groups": ["default"], "concurrency": 1});
        items(d).push(trim);
    });
    assert_eq!(
        of(&r, Check::RecurringJobs),
        one(Severity::Warning, "volumes", "1 volume in no recurring snapshot or backup job: data")
    );
}

#[test]
fn snapshot_jobs_of_one_volume_add_up_against_its_limit() {
    // Each job prunes only its own snapshots: 150 + 150 reach a limit of 250.
    let r = quiet_with(|d| {
        item(d, "RecurringJob", "daily-snap")["spec"]["retain"] = json!(150);
        let mut hourly = item(d, "RecurringJob", "daily-snap").clone();
        hourly["metadata"]["name"] = json!("hourly-snap");
        items(d).push(hourly);
    });
    assert_eq!(
        of(&r, Check::RecurringJobs),
        one(
            Severity::Error,
            "volumes",
            "1 volume: snapshot jobs daily-snap (150) + hourly-snap (150) keep up to 300 snapshots together, >= the limit (250); each prunes only its own, so snapshots fail once they add up: data"
        )
    );
    // Under the limit together: nothing to say.
    let r = quiet_with(|d| {
        item(d, "RecurringJob", "daily-snap")["spec"]["retain"] = json!(100);
        let mut hourly = item(d, "RecurringJob", "daily-snap").clone();
        hourly["metadata"]["name"] = json!("hourly-snap");
        items(d).push(hourly);
    });
    assert_eq!(of(&r, Check::RecurringJobs), vec![]);
}

#[test]
fn retain_is_read_only_where_longhorn_reads_it() {
    // snapshot-delete with retain 0 deletes every snapshot; age-based policies (either
    // spelling) do not read retain.
    let r = quiet_with(|d| {
        let mut purge = item(d, "RecurringJob", "daily-snap").clone();
        purge["metadata"]["name"] = json!("purge");
        purge["spec"]["task"] = json!("snapshot-delete");
        purge["spec"]["retain"] = json!(0);
        items(d).push(purge);
        for (name, policy) in [("daily-snap", "age-base"), ("daily-backup", "age-based")] {
            let j = item(d, "RecurringJob", name);
            j["spec"]["retain"] = json!(0);
            j["spec"]["retentionPolicy"] = json!(policy);
        }
    });
    assert_eq!(
        of(&r, Check::RecurringJobs),
        one(
            Severity::Warning,
            "recurringjob/purge",
            "purge (snapshot-delete) has retain 0: it deletes every snapshot of its volumes"
        )
    );
}

#[test]
fn an_unreadable_snapshot_limit_is_reported_even_where_volumes_have_their_own() {
    let r = quiet_with(|d| {
        item(d, "Setting", "snapshot-max-count")["value"] = json!("abc");
        item(d, "Volume", "data")["spec"]["snapshotMaxCount"] = json!(10);
    });
    let findings = of(&r, Check::SnapshotRetention);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!((findings[0].0, findings[0].1.as_str()), (Severity::Error, "setting/snapshot-max-count"));
}

#[test]
fn an_empty_target_that_volumes_back_up_to_is_not_hidden_by_another() {
    // `default` has no URL, `offsite` is configured and available; `data` names no target, so
    // its backups go to `default`.
    let r = quiet_with(|d| {
        let mut offsite = item(d, "BackupTarget", "default").clone();
        offsite["metadata"]["name"] = json!("offsite");
        items(d).push(offsite);
        item(d, "BackupTarget", "default")["spec"]["backupTargetURL"] = json!("");
    });
    assert_eq!(
        of(&r, Check::BackupTarget),
        one(
            Severity::Error,
            "backuptarget/default",
            "backup target default has no URL, and 1 volume backs up to it: data"
        )
    );
    let r = quiet_with(|d| {
        let mut offsite = item(d, "BackupTarget", "default").clone();
        offsite["metadata"]["name"] = json!("offsite");
        items(d).push(offsite);
        item(d, "BackupTarget", "default")["spec"]["backupTargetURL"] = json!("");
        item(d, "Volume", "data")["spec"]["backupTargetName"] = json!("offsite");
    });
    assert_eq!(of(&r, Check::BackupTarget), vec![]);
}

#[test]
fn a_backup_target_without_status_is_not_yet_probed_not_down() {
    let r = quiet_with(|d| {
        item(d, "BackupTarget", "default").as_object_mut().unwrap().remove("status");
    });
    assert_eq!(
        of(&r, Check::BackupTarget),
        one(
            Severity::Info,
            "backuptarget/default",
            "backup target default (s3://backups@us-east-1/) has no status yet: Longhorn has not probed it"
        )
    );
}

#[test]
fn a_disk_where_no_replica_fits_is_an_error() {
    // Reserved at or above the maximum, or over-provisioning 0%: Longhorn places nothing.
    let r = quiet_with(|d| {
        let node = item(d, "Node", "n1");
        let max = node["status"]["diskStatus"]["disk-1"]["storageMaximum"].clone();
        node["spec"]["disks"]["disk-1"]["storageReserved"] = max;
    });
    let found = of(&r, Check::DiskSpace);
    assert!(
        found.iter().any(|(s, o, m)| *s == Severity::Error
            && o == "node/n1"
            && m.contains("reserved of a")
            && m.ends_with("leaves no room: Longhorn schedules no replica here")),
        "{found:?}"
    );
    let r = quiet_with(|d| item(d, "Setting", "storage-over-provisioning-percentage")["value"] = json!("0"));
    let found = of(&r, Check::DiskSpace);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found.iter().all(|(s, _, m)| *s == Severity::Error && m.contains("leaves no room")), "{found:?}");
}

#[test]
fn recurring_jobs_read_labels_and_limits_as_longhorn_does() {
    // A job label or group label counts only when it is `enabled`.
    let r = quiet_with(|d| {
        item(d, "Volume", "data")["metadata"]["labels"]["recurring-job-group.longhorn.io/default"] =
            json!("disabled");
    });
    assert!(
        of(&r, Check::RecurringJobs).contains(&(
            Severity::Warning,
            "volumes".into(),
            "1 volume in no recurring snapshot or backup job: data".into()
        )),
        "{:?}",
        of(&r, Check::RecurringJobs)
    );
    // retain equal to the volume's own limit: the job's next snapshot fails before it prunes.
    let r = quiet_with(|d| {
        item(d, "RecurringJob", "daily-snap")["spec"]["retain"] = json!(7);
        item(d, "Volume", "data")["spec"]["snapshotMaxCount"] = json!(7);
    });
    let found = of(&r, Check::RecurringJobs);
    assert!(
        found.iter().any(|(sev, obj, m)| *sev == Severity::Error
            && obj == "recurringjob/daily-snap"
            && m == "daily-snap (snapshot) has retain 7 >= the limit of data (7): its next snapshot fails before it prunes"),
        "{found:?}"
    );
    // A negative percentage setting is an error finding, not a crash.
    let r = quiet_with(|d| {
        item(d, "Setting", "storage-minimal-available-percentage")["value"] = json!("-9223372036854775808");
    });
    let found = of(&r, Check::DiskSpace);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].2.contains("is negative"), "{found:?}");
}

#[test]
fn snapshot_retention_warns_at_80_percent_and_errs_at_the_limit() {
    let max = |n: &str| quiet_with(move |d| item(d, "Setting", "snapshot-max-count")["value"] = json!(n));
    assert_eq!(of(&max("3"), Check::SnapshotRetention), vec![], "2 of 3 is 66%");
    assert_eq!(
        of(&max("2"), Check::SnapshotRetention),
        one(Severity::Error, "volume/data", "data has 2 snapshots (snapshot-max-count=2), holding 2.0 GiB: at the limit: new snapshots and backups of it fail")
    );
    let r = quiet_with(|d| {
        item(d, "Setting", "snapshot-max-count")["value"] = json!("2");
        item(d, "Snapshot", "data-snap-2")["status"]["markRemoved"] = json!(true);
    });
    assert_eq!(of(&r, Check::SnapshotRetention), vec![], "removed snapshots do not count");
}

#[test]
fn replica_count_volume_health_and_settings() {
    let r = quiet_with(|d| {
        let v = item(d, "Volume", "data");
        v["spec"]["numberOfReplicas"] = json!(2);
        v["status"]["robustness"] = json!("faulted");
        item(d, "Setting", "node-drain-policy")["value"] = json!("always-allow");
        item(d, "Setting", "storage-network")["value"] = json!("storage-net");
    });
    assert_eq!(
        of(&r, Check::ReplicaCount),
        one(
            Severity::Warning,
            "volume/data",
            "volume data: numberOfReplicas=2 tolerates 1 node failure; policy minimum is 3"
        )
    );
    assert_eq!(
        of(&r, Check::VolumeHealth),
        one(Severity::Error, "volume/data", "data is faulted: no healthy replica serves it (state detached)")
    );
    assert_eq!(
        of(&r, Check::Settings),
        vec![
            (Severity::Warning, "setting/node-drain-policy".into(), "node-drain-policy=always-allow: Longhorn lets drains take a volume's last replica; longhorn-guard (drain.action=enforce) is the only protection".into()),
            (Severity::Error, "setting/storage-network".into(), "storage-network=\"storage-net\" is not <namespace>/<name>".into()),
        ]
    );
    let deny: Policy = serde_saphyr::from_str("replicas:\n  action: deny\n").unwrap();
    let r = quiet_with_policy(&deny, |d| item(d, "Volume", "data")["spec"]["numberOfReplicas"] = json!(1));
    let f = of(&r, Check::ReplicaCount);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].0, Severity::Error, "deny mode makes a low count an error: {f:?}");
    assert!(f[0].2.contains("numberOfReplicas=1 has no redundancy"), "{f:?}");
}

#[test]
fn a_stalled_rebuild_without_the_storage_network_says_so() {
    let text = std::fs::read_to_string(DEMO).unwrap().replace(
        "  name: storage-network\n    namespace: longhorn-system\n    resourceVersion: \"344\"\n    uid: 94a3f55b-d4ad-4f7a-b6dc-33261cf92978\n  status:\n    applied: true\n  value: \"\"",
        "  name: storage-network\n    namespace: longhorn-system\n  value: kube-system/storage-net",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.yaml");
    std::fs::write(&path, text).unwrap();
    let r = report_of(&path, &Policy::default());
    let f =
        r.findings.iter().find(|f| f.check == Check::VolumeHealth && f.severity == Severity::Error).unwrap();
    assert_eq!(f.message, "vol-degraded: rebuild of replica vol-degraded-r-7d8e9f0a stuck at 0% since 2026-11-30T11:19:51Z; its storage IP is the pod IP, so its instance manager started without the storage network kube-system/storage-net");
    assert_eq!(
        f.remedy,
        "delete the instance-manager pod on node-2 so Longhorn recreates it with the storage network"
    );
}

#[test]
fn drain_readiness_counts_blocking_volumes() {
    let r = quiet_with(|d| {
        for n in ["n2", "n3"] {
            items(d).iter_mut().find(|i| i["apiVersion"] == "v1" && i["metadata"]["name"] == n).unwrap()
                ["spec"]["unschedulable"] = json!(true);
        }
    });
    assert_eq!(
        of(&r, Check::DrainReadiness),
        vec![
            (Severity::Warning, "node/n1".into(), "n1: a drain would wait for 1 volume (data)".into()),
            // The healthy replica on n1 (schedulable, instance manager running) vouches for n2
            // and n3; cordoned nodes never vouch, so n1 holds the last protectable copy.
            (Severity::Info, "node/n2".into(), "n2: can be drained now".into()),
            (Severity::Info, "node/n3".into(), "n3: can be drained now".into()),
        ]
    );
}

#[test]
fn drain_readiness_counts_entries_no_known_volume_owns() {
    let r = quiet_with(|d| {
        let im = item(d, "InstanceManager", "instance-manager-n3");
        im["status"]["instanceEngines"] = json!({"ghost-e-0": {}});
        im["status"]["instanceEngineFrontends"] = json!({"gone-ef-1": {}});
    });
    let n3 = of(&r, Check::DrainReadiness).into_iter().find(|(_, o, _)| o == "node/n3").unwrap();
    assert_eq!(
        n3,
        (
            Severity::Warning,
            "node/n3".into(),
            "n3: a drain would wait for 2 engine instances no known volume owns (ghost-e-0, gone-ef-1)"
                .into()
        )
    );
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
        .args(["check", "cluster"])
        .args(args)
        .env("LONGHORN_GUARD_LOG", "warn")
        .env_remove("LONGHORN_GUARD_POLICY")
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_command_prints_a_table_or_json_and_exits_by_severity() {
    let (code, out, err) = run(&["--state", DEMO]);
    assert_eq!(code, 1, "{err}");
    assert!(out.starts_with("== node-conditions\nerror    node/node-3 "), "{out}");
    assert!(out.contains("\n         "), "remedy lines are indented: {out}");
    assert!(out.ends_with("\ncheck cluster: 4 errors, 11 warnings, 2 info (10 checks)\n"), "{out}");
    let (code, out, _) = run(&["--state", DEMO, "--output", "json"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    let f = &v["findings"][0];
    assert_eq!(
        f.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["check", "message", "object", "remedy", "severity"]
    );
    assert_eq!(f["check"], "node-conditions");
    assert_eq!(v["summary"]["checks"].as_array().unwrap().len(), 10);
    let (code, out, _) = run(&["--state", QUIET]);
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = run(&["--state", "/nonexistent/snap.yaml"]);
    assert_eq!(code, 2);
    assert!(err.starts_with("longhorn-guard check cluster: /nonexistent/snap.yaml: cannot read"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: longhorn.io/v1beta2\nkind: Snapshot\nmetadata:\n  name: s\nstatus:\n  size: big\n",
    )
    .unwrap();
    let (code, out, err) = run(&["--state", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "a malformed object is an error finding, not a failed run: {err}");
    assert!(
        out.contains("== snapshot-retention\nerror    snapshots                                1 Snapshot could not be read and was left out of this check: s; s: invalid type: string \"big\", expected i64"),
        "{out}"
    );
    std::fs::write(&bad, "items: [\n").unwrap();
    let (code, _, err) = run(&["--state", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "a file that is no snapshot still cannot be checked");
    assert!(err.starts_with("longhorn-guard check cluster: "), "{err}");
}

#[test]
fn a_malformed_object_is_an_error_under_its_check_and_the_rest_is_checked() {
    let r = quiet_with(|d| {
        item(d, "Snapshot", "data-snap-2")["status"]["size"] = json!("big");
        item(d, "Volume", "data")["spec"]["numberOfReplicas"] = json!("three");
    });
    let retention = of(&r, Check::SnapshotRetention);
    assert_eq!(retention.len(), 1, "{retention:?}");
    assert_eq!((retention[0].0, retention[0].1.as_str()), (Severity::Error, "snapshots"));
    assert!(retention[0].2.starts_with("1 Snapshot could not be read and was left out of this check: data-snap-2; data-snap-2: invalid type"), "{}", retention[0].2);
    let health = of(&r, Check::VolumeHealth);
    assert!(
        health.iter().any(|(s, o, m)| *s == Severity::Error
            && o == "volumes"
            && m.starts_with("1 Volume could not be read")),
        "{health:?}"
    );
    assert_eq!(r.exit_code(), 1);
    assert_eq!(r.summary.errors, 2, "{:?}", r.findings);
    // The other checks still ran: every node is still reported for drain readiness.
    let quiet = quiet_with(|_| {});
    assert_eq!(of(&r, Check::DrainReadiness).len(), of(&quiet, Check::DrainReadiness).len());
}

/// Fields no check reads are still typed: a Longhorn Node or RecurringJob with a malformed one
/// is unreadable, as it is with a malformed field that a check reads.
#[test]
fn a_malformed_field_no_check_reads_still_makes_its_object_unreadable() {
    type Edit = fn(&mut Value);
    let cases: [(&str, &str, &str, Edit); 3] = [
        ("Node", "Longhorn Node", "n1", |i| i["spec"]["disks"]["disk-1"]["path"] = json!(5)),
        ("Node", "Longhorn Node", "n2", |i| i["spec"]["disks"]["disk-1"]["allowScheduling"] = json!("yes")),
        ("RecurringJob", "RecurringJob", "daily-snap", |i| i["spec"]["cron"] = json!(5)),
    ];
    for (kind, said, name, edit) in cases {
        let r = quiet_with(|d| edit(item(d, kind, name)));
        let unread = format!(
            "1 {said} could not be read and was left out of this check: {name}; {name}: invalid type"
        );
        assert!(r.findings.iter().any(|f| f.message.starts_with(&unread)), "{kind} {name}: {:?}", r.findings);
        assert_eq!(r.exit_code(), 1, "{kind} {name}");
    }
}

#[test]
fn an_empty_file_or_one_that_is_no_snapshot_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("snap.yaml");
    let policy = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/lint/policy-deny.yaml");
    for (text, why) in [
        ("".to_string(), "holds no object longhorn-guard reads"),
        ("apiVersion: v1\nkind: List\nitems: []\n".into(), "holds no object longhorn-guard reads"),
        ("foo: bar\n".into(), "missing apiVersion or kind"),
        ("42\n".into(), "expected an object, found a number"),
        (std::fs::read_to_string(policy).unwrap(), "missing apiVersion or kind"),
        (
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: node-1}\n".into(),
            "holds no Longhorn object",
        ),
    ] {
        std::fs::write(&f, &text).unwrap();
        let (code, out, err) = run(&["--state", f.to_str().unwrap()]);
        assert_eq!(code, 2, "{text:?}: {out}{err}");
        assert!(err.contains(why), "{text:?}: {err}");
    }
}

#[test]
fn a_kind_the_drain_reads_at_another_version_refuses_the_snapshot() {
    // Skipped, a replica at longhorn.io/v1beta1 would be missing and its node called drainable.
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(QUIET).unwrap()).unwrap();
    let replica = items(&mut doc).iter_mut().find(|o| o["kind"] == "Replica").expect("a replica");
    replica["apiVersion"] = json!("longhorn.io/v1beta1");
    let name = replica["metadata"]["name"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snap.json");
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let err = load_snapshot(&path).expect_err("refused").to_string();
    assert!(
        err.contains(&format!(
            "Replica {name} is longhorn.io/v1beta1; longhorn-guard reads Replica as longhorn.io/v1beta2"
        )),
        "{err}"
    );
}

/// A view that counts how often the checks take it.
struct Counting {
    view: longhorn_guard::cluster::ClusterView,
    holds: std::cell::Cell<usize>,
}

impl longhorn_guard::check::cluster::ViewAccess for Counting {
    fn with<R>(&self, f: impl FnOnce(&longhorn_guard::cluster::ClusterView) -> R) -> R {
        self.holds.set(self.holds.get() + 1);
        f(&self.view)
    }
}

#[test]
fn serves_refresh_takes_the_view_for_a_few_objects_at_a_time_and_finds_the_same() {
    // 10 nodes, 200 volumes: the replica rules decide 200 volumes, drain readiness 10 nodes.
    let s = longhorn_guard::synthetic::Synthetic::new(10, 200).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("snap.json");
    std::fs::write(&path, s.list().to_string()).unwrap();
    let (inv, view) = load_snapshot(&path).unwrap();
    let now = SystemTime::now();
    let whole = Report::build(&inv, &view, &Policy::default(), now);
    let counted = Counting { view, holds: std::cell::Cell::new(0) };
    assert_eq!(Report::build(&inv, &counted, &Policy::default(), now), whole);
    // At most 32 decisions per hold (a few milliseconds), one node's drain readiness per hold.
    let holds = counted.holds.get();
    assert!(holds >= 200 / 32 + 10, "the view was held {holds} times for the whole report");
}
