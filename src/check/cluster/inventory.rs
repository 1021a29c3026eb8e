//! What `check cluster` reads besides the drain view, filled item by item from a snapshot or
//! paged live LISTs; drain-view kinds also go to the view, and snapshots are folded into
//! per-volume totals as they arrive.

use std::collections::{BTreeMap, BTreeSet};

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use super::network::NetworkInventory;
use super::unreadable::Unreadable;
use crate::cluster::meta::{kept_where, SmallMap};
use crate::cluster::{Condition, Name, Object, ObjectKind, LONGHORN_API_VERSION};

/// Labels Longhorn puts on a volume to select recurring jobs and job groups.
pub const JOB_LABEL_PREFIX: &str = "recurring-job.longhorn.io/";
pub const GROUP_LABEL_PREFIX: &str = "recurring-job-group.longhorn.io/";
/// The job group Longhorn puts a volume in when it names no job and no group.
pub const DEFAULT_GROUP: &str = "default";

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Meta {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// A Longhorn object as the checks read it: the parts of its metadata, spec and status they
/// keep (a status not read is skipped).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Item<Spec, Status = IgnoredAny, M = Meta> {
    pub metadata: M,
    pub spec: Spec,
    pub status: Status,
}

/// A Longhorn `Node` with its conditions and disks.
pub type NodeInfo = Item<NodeSpec, NodeStatus>;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeSpec {
    pub disks: BTreeMap<String, DiskSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DiskSpec {
    /// Not checked, read so that a disk with a malformed value makes its Node unreadable.
    pub allow_scheduling: bool,
    pub storage_reserved: i64,
    /// As `allow_scheduling`.
    pub path: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeStatus {
    pub conditions: Vec<Condition>,
    pub disk_status: BTreeMap<String, DiskStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DiskStatus {
    pub conditions: Vec<Condition>,
    pub storage_available: i64,
    pub storage_maximum: i64,
    pub storage_scheduled: i64,
}

/// A Longhorn `Volume`: what health, jobs and replica rules read. Interned strings and only
/// the recurring-job labels: the inventory holds one per volume (10,000 and more).
pub type VolumeInfo = Item<VolumeSpec, VolumeStatus, VolumeMeta>;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct VolumeMeta {
    pub name: Name,
    /// The `recurring-job.longhorn.io/*` and `recurring-job-group.longhorn.io/*` labels.
    #[serde(deserialize_with = "job_labels")]
    pub labels: SmallMap<Name>,
}

fn job_labels<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SmallMap<Name>, D::Error> {
    kept_where(d, |k| k.starts_with(JOB_LABEL_PREFIX) || k.starts_with(GROUP_LABEL_PREFIX))
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VolumeSpec {
    pub number_of_replicas: i64,
    pub data_engine: Name,
    pub data_locality: Name,
    /// The volume's own snapshot limit (Longhorn copies `snapshot-max-count` into it at
    /// creation and the engine enforces this one); 0 when absent (older Longhorn).
    pub snapshot_max_count: i64,
    /// The BackupTarget its backups go to; empty means `default`.
    pub backup_target_name: Name,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VolumeStatus {
    pub state: Name,
    pub robustness: Name,
    pub kubernetes_status: KubernetesStatus,
}

/// The PVC a volume backs, as far as the replica rules read it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct KubernetesStatus {
    pub namespace: Name,
}

/// A `BackupTarget` (Longhorn 1.2+; several per cluster since 1.8); its status is `None` until
/// Longhorn has reconciled the target.
pub type BackupTargetInfo = Item<BackupTargetSpec, Option<BackupTargetStatus>>;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BackupTargetSpec {
    #[serde(rename = "backupTargetURL")]
    pub backup_target_url: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BackupTargetStatus {
    pub available: bool,
    pub conditions: Vec<Condition>,
}

/// A `RecurringJob`.
pub type RecurringJobInfo = Item<RecurringJobSpec>;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RecurringJobSpec {
    pub task: String,
    pub groups: Vec<String>,
    /// Not checked, read so that a malformed value makes the job unreadable.
    pub cron: String,
    pub retain: i64,
    /// `count-based` (default) or `age-based`, where `retain` is not read. No release the guard
    /// supports has it (its CRD schema drops it, so it reads empty: count-based); Longhorn 1.13
    /// adds it (longhorn/longhorn#12060).
    pub retention_policy: String,
}

/// A `Snapshot`, as far as its volume's totals read it.
pub type SnapshotItem = Item<SnapshotSpec, SnapshotStatus>;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct SnapshotSpec {
    volume: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SnapshotStatus {
    size: i64,
    mark_removed: bool,
}

/// The snapshots of one volume, as totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotTotals {
    /// Snapshots not marked removed (what counts against `snapshot-max-count`).
    pub count: usize,
    /// Bytes their data holds, as Longhorn reports it (`status.size`).
    pub bytes: i64,
}

/// Everything `check cluster` reads that the drain view does not hold.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    pub nodes: Vec<NodeInfo>,
    /// Every Longhorn setting, name -> value.
    pub settings: BTreeMap<String, String>,
    pub volumes: Vec<VolumeInfo>,
    /// StorageClasses and Settings as read, for the replica rules (they take the raw object).
    pub storage_classes: Vec<Value>,
    pub setting_objects: Vec<Value>,
    pub backup_targets: Vec<BackupTargetInfo>,
    pub recurring_jobs: Vec<RecurringJobInfo>,
    /// Volume name -> its snapshot totals.
    pub snapshots: BTreeMap<String, SnapshotTotals>,
    /// Kinds that were read (a snapshot file may lack some; the live cluster may not serve one).
    pub read: BTreeSet<&'static str>,
    /// Objects that could not be read: left out, and reported as errors.
    pub unreadable: Unreadable,
    /// DaemonSet images and instance-manager pod annotations, for the `storage-network` check.
    pub network: NetworkInventory,
}

/// An item's `apiVersion`, `kind` and name, as messages name it.
fn identity(item: &Value) -> (String, String, String) {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    let name = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("<no name>").to_string();
    (text(item.get("apiVersion")), text(item.get("kind")), name)
}

impl Inventory {
    /// Takes one item of any kind: drain-view kinds are returned as view objects (and also
    /// read here when `check cluster` needs more of them); other kinds it reads are kept here;
    /// the rest are skipped. An item that cannot be read is recorded in
    /// [`Self::unreadable`] and left out.
    pub fn ingest(&mut self, item: Value) -> Option<Object> {
        let (api_version, kind, name) = identity(&item);
        let read = self.read_item(&item, (&api_version, &kind, &name)).and_then(|()| {
            ObjectKind::from_type(&api_version, &kind).map(|k| Object::from_value(k, item)).transpose()
        });
        read.unwrap_or_else(|e| {
            self.unreadable.add(&api_version, &kind, &name, e.to_string());
            None
        })
    }

    /// [`Self::ingest`] for a caller that keeps its own view: the item is only read here, in
    /// place (nothing is copied for the kinds this inventory does not keep).
    pub fn note(&mut self, item: &Value) {
        let (api_version, kind, name) = identity(item);
        if let Err(e) = self.read_item(item, (&api_version, &kind, &name)) {
            self.unreadable.add(&api_version, &kind, &name, e.to_string());
        }
    }

    /// Reads what the checks keep of one item (drain-view kinds become view objects elsewhere).
    fn read_item(
        &mut self,
        item: &Value,
        (api_version, kind, name): (&str, &str, &str),
    ) -> Result<(), serde_json::Error> {
        use serde::Deserialize as _;
        if api_version == LONGHORN_API_VERSION {
            match kind {
                "Node" => self.nodes.push(NodeInfo::deserialize(item)?),
                "Volume" => self.volumes.push(VolumeInfo::deserialize(item)?),
                "Setting" => {
                    let value = item.get("value").and_then(Value::as_str).unwrap_or_default();
                    self.settings.insert(name.to_string(), value.to_string());
                    self.setting_objects.push(item.clone());
                }
                "BackupTarget" => self.backup_targets.push(BackupTargetInfo::deserialize(item)?),
                "RecurringJob" => self.recurring_jobs.push(RecurringJobInfo::deserialize(item)?),
                "Snapshot" => self.add_snapshot(SnapshotItem::deserialize(item)?),
                _ => {}
            }
            if let Some(k) = ["BackupTarget", "RecurringJob", "Snapshot"].into_iter().find(|k| *k == kind) {
                self.read.insert(k);
            }
        } else if api_version == "storage.k8s.io/v1" && kind == "StorageClass" {
            self.storage_classes.push(item.clone());
        } else if api_version == "apps/v1" && kind == "DaemonSet" {
            self.network.add_daemonset(item)?;
        } else if api_version == "v1" && kind == "Pod" {
            self.network.add_pod(item)?;
        }
        Ok(())
    }

    fn add_snapshot(&mut self, s: SnapshotItem) {
        let volume = if s.spec.volume.is_empty() {
            s.metadata.labels.get("longhornvolume").cloned().unwrap_or_default()
        } else {
            s.spec.volume
        };
        if volume.is_empty() || s.metadata.name == "volume-head" {
            return;
        }
        let t = self.snapshots.entry(volume).or_default();
        if !s.status.mark_removed {
            t.count += 1;
        }
        t.bytes = t.bytes.saturating_add(s.status.size.max(0));
    }

    /// A setting's value as an integer: `Ok(None)` when absent.
    pub fn setting_int(&self, name: &str) -> Result<Option<i64>, String> {
        match self.settings.get(name).map(|v| v.trim()) {
            None | Some("") => Ok(None),
            Some(v) => {
                v.parse::<i64>().map(Some).map_err(|_| format!("setting {name}={v:?} is not a whole number"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn snapshots_fold_into_totals_per_volume() {
        let mut inv = Inventory::default();
        for (name, vol, size, removed) in [
            ("s1", "v", 10, false),
            ("s2", "v", 5, true),
            ("volume-head", "v", 7, false),
            ("s3", "w", 1, false),
        ] {
            let item = json!({"apiVersion": LONGHORN_API_VERSION, "kind": "Snapshot",
                "metadata": {"name": name}, "spec": {"volume": vol},
                "status": {"size": size, "markRemoved": removed}});
            assert!(inv.ingest(item).is_none());
        }
        assert_eq!(inv.snapshots["v"], SnapshotTotals { count: 1, bytes: 15 });
        assert_eq!(inv.snapshots["w"], SnapshotTotals { count: 1, bytes: 1 });
    }

    #[test]
    fn view_kinds_are_returned_and_bad_items_recorded() {
        let mut inv = Inventory::default();
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
        assert!(matches!(inv.ingest(node), Some(Object::Node(_))));
        let vol = json!({"apiVersion": LONGHORN_API_VERSION, "kind": "Volume", "metadata": {"name": "v"},
            "spec": {"numberOfReplicas": "three"}});
        assert!(inv.ingest(vol).is_none());
        let snap = json!({"apiVersion": LONGHORN_API_VERSION, "kind": "Snapshot", "metadata": {"name": "s"},
            "status": {"size": "big"}});
        inv.note(&snap);
        assert!(inv.snapshots.is_empty());
        let found = inv.unreadable.findings();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].message.contains("s: invalid type: string \"big\", expected i64"),
            "{}",
            found[0].message
        );
        assert!(found[1].message.contains("v: invalid type"), "{}", found[1].message);
        let job = json!({"apiVersion": LONGHORN_API_VERSION, "kind": "RecurringJob", "metadata": {"name": "j"},
            "spec": {"task": "backup", "retain": 7, "groups": ["default"]}});
        assert!(inv.ingest(job).is_none());
        assert_eq!(inv.recurring_jobs[0].spec.retain, 7);
        inv.settings.insert("snapshot-max-count".into(), "x".into());
        assert!(inv.setting_int("snapshot-max-count").is_err());
        assert_eq!(inv.setting_int("absent"), Ok(None));
    }
}
