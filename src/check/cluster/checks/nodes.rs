//! `node-conditions` and `disk-space`: Longhorn's own node and disk conditions, and disk
//! space against the scheduling settings Longhorn applies.

use super::super::finding::{gib, Check, Finding, Severity};
use super::super::inventory::{DiskStatus, Inventory};
use crate::cluster::Condition;

/// Node conditions longhorn-guard reports when not `True`: severity and remedy.
const NODE_CONDITIONS: [(&str, Severity, &str); 6] = [
    ("Ready", Severity::Error, "check the node and the longhorn-manager pod on it"),
    (
        "RequiredPackages",
        Severity::Error,
        "install the missing host packages (open-iscsi, nfs-common, cryptsetup, dmsetup) and restart longhorn-manager on the node",
    ),
    (
        "KernelModulesLoaded",
        Severity::Error,
        "load the kernel modules Longhorn names (e.g. dm_crypt; nvme_tcp and vfio_pci for v2) on the host",
    ),
    (
        "MountPropagation",
        Severity::Error,
        "enable bidirectional mount propagation in the container runtime (MountFlags=shared)",
    ),
    ("Multipathd", Severity::Warning, "stop multipathd or blacklist Longhorn's devices in multipath.conf"),
    (
        "NFSClientInstalled",
        Severity::Warning,
        "install an NFS client (nfs-common / nfs-utils) for RWX volumes and NFS backup targets",
    ),
];

/// The setting that stops replica scheduling on a disk, and its Longhorn default.
pub const MINIMAL_AVAILABLE: (&str, i64) = ("storage-minimal-available-percentage", 25);
/// The setting that bounds scheduled space on a disk, and its Longhorn default.
pub const OVER_PROVISIONING: (&str, i64) = ("storage-over-provisioning-percentage", 100);
/// A disk within this many percentage points of `storage-minimal-available-percentage` is
/// reported as a warning.
pub const SPACE_WARN_POINTS: i64 = 10;
/// Scheduled space at this share (%) of the over-provisioning limit is reported as a warning.
pub const SCHEDULED_WARN_PERCENT: i64 = 90;

fn detail(c: &Condition) -> String {
    match (c.reason.is_empty(), c.message.is_empty()) {
        (true, true) => String::new(),
        (false, true) => format!(" ({})", c.reason),
        (true, false) => format!(": {}", c.message.trim()),
        (false, false) => format!(" ({}): {}", c.reason, c.message.trim()),
    }
}

fn status_of(c: &Condition) -> &str {
    if c.status.is_empty() {
        "Unknown"
    } else {
        &c.status
    }
}

/// `node-conditions`: node conditions not `True`, disks not ready or not schedulable.
pub fn node_conditions(inv: &Inventory) -> Vec<Finding> {
    let mut out = Vec::new();
    for node in &inv.nodes {
        let name = &node.metadata.name;
        for (type_, severity, remedy) in NODE_CONDITIONS {
            let Some(c) = node.status.conditions.iter().find(|c| c.type_ == type_) else { continue };
            if c.status == "True" {
                continue;
            }
            out.push(Check::NodeConditions.finding(
                severity,
                format!("node/{name}"),
                format!("{name}: {type_} is {}{}", status_of(c), detail(c)),
                remedy,
            ));
        }
        for (disk, status) in &node.status.disk_status {
            for (type_, severity, what, remedy) in [
                ("Ready", Severity::Error, "not ready", "check the disk's path and filesystem on the node"),
                (
                    "Schedulable",
                    Severity::Warning,
                    "not schedulable",
                    "free space or check the disk's settings; see disk-space",
                ),
            ] {
                if let Some(c) = status.conditions.iter().find(|c| c.type_ == type_ && c.status != "True") {
                    out.push(Check::NodeConditions.finding(
                        severity,
                        format!("node/{name}"),
                        format!("{name} disk {disk}: {what} ({type_} is {}){}", status_of(c), detail(c)),
                        remedy,
                    ));
                }
            }
        }
    }
    out
}

/// The percentage settings `disk-space` uses: the value read, or Longhorn's default when
/// the setting is absent (said in the message).
fn percent_setting(inv: &Inventory, (name, default): (&str, i64)) -> Result<(i64, String), Finding> {
    match inv.setting_int(name) {
        Ok(Some(v)) if v < 0 => Err(Check::DiskSpace.finding(
            Severity::Error,
            format!("setting/{name}"),
            format!("setting {name}={v} is negative; disk space not checked"),
            format!("set {name} to a percentage (0 or more)"),
        )),
        Ok(Some(v)) => Ok((v, format!("{name}={v}%"))),
        Ok(None) => {
            Ok((default, format!("{name}={default}% (Longhorn's default; the setting was not read)")))
        }
        Err(why) => Err(Check::DiskSpace.finding(
            Severity::Error,
            format!("setting/{name}"),
            format!("{why}; disk space not checked"),
            format!("set {name} to a whole number"),
        )),
    }
}

/// `disk-space`: per disk, available space against `storage-minimal-available-percentage`
/// (Longhorn stops scheduling replicas there) and scheduled space against
/// `storage-over-provisioning-percentage` of (maximum - reserved).
pub fn disk_space(inv: &Inventory) -> Vec<Finding> {
    let ((min_pct, min_text), (over_pct, over_text)) =
        match (percent_setting(inv, MINIMAL_AVAILABLE), percent_setting(inv, OVER_PROVISIONING)) {
            (Ok(min), Ok(over)) => (min, over),
            (Err(f), _) | (_, Err(f)) => return vec![f],
        };
    let mut out = Vec::new();
    for node in &inv.nodes {
        let name = &node.metadata.name;
        for (disk, status) in &node.status.disk_status {
            let reserved = node.spec.disks.get(disk).map_or(0, |d| d.storage_reserved);
            out.extend(one_disk(name, disk, status, reserved, (min_pct, &min_text), (over_pct, &over_text)));
        }
    }
    out
}

fn one_disk(
    node: &str,
    disk: &str,
    st: &DiskStatus,
    reserved: i64,
    (min_pct, min_text): (i64, &str),
    (over_pct, over_text): (i64, &str),
) -> Vec<Finding> {
    let mut out = Vec::new();
    if st.storage_maximum <= 0 {
        return out;
    }
    let object = format!("node/{node}");
    let max = st.storage_maximum as i128;
    let avail_pct = i64::try_from(st.storage_available as i128 * 100 / max).unwrap_or(i64::MAX);
    // Longhorn schedules only while available > maximum * minimal% / 100.
    let floor = max * min_pct as i128 / 100;
    let above = avail_pct.saturating_sub(min_pct);
    let what = format!(
        "{node} disk {disk}: {} available of {} ({avail_pct}%)",
        gib(st.storage_available),
        gib(st.storage_maximum)
    );
    let remedy = "free space (delete snapshots, move replicas off with disk eviction) or add a disk";
    if (st.storage_available as i128) <= floor {
        out.push(Check::DiskSpace.finding(
            Severity::Error,
            object.clone(),
            format!("{what}, at or below {min_text}: Longhorn schedules no new replica here"),
            remedy,
        ));
    } else if above < SPACE_WARN_POINTS {
        out.push(Check::DiskSpace.finding(
            Severity::Warning,
            object.clone(),
            format!(
                "{what}, {above} point{} above {min_text}, where Longhorn stops scheduling replicas",
                if above == 1 { "" } else { "s" }
            ),
            remedy,
        ));
    }
    // In i128: any i64 values (a malformed status may hold i64::MIN) neither overflow nor wrap.
    let limit = (st.storage_maximum as i128 - reserved as i128).max(0) * over_pct as i128 / 100;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    if limit <= 0 {
        // Longhorn places a replica only where size + scheduled <= limit: never here.
        let why = if over_pct <= 0 {
            format!("{over_text} leaves no room")
        } else {
            format!("{} reserved of a {} maximum leaves no room", gib(reserved), gib(st.storage_maximum))
        };
        out.push(Check::DiskSpace.finding(
            Severity::Error,
            object,
            format!("{node} disk {disk}: {why}: Longhorn schedules no replica here"),
            "lower the disk's storageReserved below its maximum, or raise storage-over-provisioning-percentage above 0",
        ));
        return out;
    }
    let used_pct = i64::try_from(st.storage_scheduled as i128 * 100 / limit as i128).unwrap_or(i64::MAX);
    let sched = format!(
        "{node} disk {disk}: {} scheduled of a {} limit ({used_pct}%; {over_text} of maximum less {} reserved)",
        gib(st.storage_scheduled),
        gib(limit),
        gib(reserved)
    );
    let remedy = "add capacity, or raise storage-over-provisioning-percentage only if actual usage allows";
    if st.storage_scheduled >= limit {
        out.push(Check::DiskSpace.finding(
            Severity::Error,
            object,
            format!("{sched}: Longhorn schedules no new replica here"),
            remedy,
        ));
    } else if used_pct >= SCHEDULED_WARN_PERCENT {
        out.push(Check::DiskSpace.finding(Severity::Warning, object, sched, remedy));
    }
    out
}
