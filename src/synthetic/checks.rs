//! What `check cluster` reads besides the drain view, for a [`Synthetic`] cluster: a
//! BackupTarget (available), two RecurringJobs in group `default` (an hourly snapshot job and
//! a daily backup job) and any number of Snapshot objects spread evenly over the volumes, as
//! Longhorn writes them (a chain per volume: `parent`, `children`, `size`, the job that made
//! it). Within Longhorn's limits (`snapshot-max-count` 250) this adds no finding, so a healthy
//! synthetic cluster stays quiet and every check still reads every object.

use std::io::Write;

use serde_json::{json, Map, Value};

use super::{Group, Synthetic};
use crate::cluster::LONGHORN_API_VERSION;

/// Most Snapshot objects a synthetic cluster may have.
pub const MAX_SNAPSHOTS: usize = 10_000_000;
/// Name of the synthetic BackupTarget (Longhorn's default one).
pub const BACKUP_TARGET: &str = "default";
/// Names of the synthetic RecurringJobs: (name, task, cron, retain).
pub const RECURRING_JOBS: [(&str, &str, &str, i64); 2] =
    [("snapshot-hourly", "snapshot", "0 * * * *", 24), ("backup-daily", "backup", "0 2 * * *", 7)];

/// Why the extra objects cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChecksError {
    #[error("snapshots must be 0..={MAX_SNAPSHOTS}, got {0}")]
    Snapshots(usize),
}

/// The `check cluster` kinds of a synthetic cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckObjects {
    snapshots: usize,
}

impl CheckObjects {
    /// A BackupTarget, the RecurringJobs and `snapshots` Snapshots.
    pub fn new(snapshots: usize) -> Result<Self, ChecksError> {
        if snapshots > MAX_SNAPSHOTS {
            return Err(ChecksError::Snapshots(snapshots));
        }
        Ok(Self { snapshots })
    }

    pub fn snapshots(&self) -> usize {
        self.snapshots
    }

    /// How many objects [`CheckObjects::objects`] yields.
    pub fn count(&self) -> usize {
        1 + RECURRING_JOBS.len() + self.snapshots
    }

    /// Every object: the BackupTarget, the RecurringJobs, then the Snapshots.
    pub fn objects<'a>(&'a self, s: &'a Synthetic) -> impl Iterator<Item = Value> + 'a {
        std::iter::once(backup_target(s))
            .chain(RECURRING_JOBS.iter().map(move |j| recurring_job(s, *j)))
            .chain((0..self.snapshots).map(move |i| self.snapshot(s, i)))
    }

    /// How many snapshots volume `v` gets: `snapshots / volumes`, one more for the first
    /// `snapshots mod volumes` volumes.
    pub fn snapshots_of(&self, s: &Synthetic, v: usize) -> usize {
        self.snapshots / s.volumes() + usize::from(v < self.snapshots % s.volumes())
    }

    /// Snapshot `i`: volume `i mod volumes`, number `i / volumes` in that volume's chain.
    fn snapshot(&self, s: &Synthetic, i: usize) -> Value {
        let v = i % s.volumes();
        let k = i / s.volumes();
        let last = self.snapshots_of(s, v).saturating_sub(1);
        let volume = Synthetic::volume_name(v);
        let mut children = Map::new();
        if k < last {
            children.insert(snapshot_name(v, k + 1), json!(true));
        } else {
            children.insert("volume-head".to_string(), json!(true));
        }
        let parent = if k == 0 { String::new() } else { snapshot_name(v, k - 1) };
        json!({"apiVersion": LONGHORN_API_VERSION, "kind": "Snapshot",
               "metadata": Synthetic::meta(&snapshot_name(v, k), true, &[("longhornvolume", volume.clone())]),
               "spec": {"volume": volume, "createSnapshot": true, "labels": {}},
               "status": {"parent": parent, "children": children, "markRemoved": false, "userCreated": false,
                          "creationTime": s.timestamp, "size": 16_777_216 * (1 + (k % 8) as i64),
                          "restoreSize": 1_073_741_824, "readyToUse": true, "ownerID": "",
                          "labels": {"RecurringJob": RECURRING_JOBS[0].0}}})
    }
}

/// Writes the cluster (and `extra`, if any) as one JSON `kind: List`, the snapshot format of
/// `serve --state` and `check cluster --state`, item by item: memory stays flat at any size.
pub fn write_list(s: &Synthetic, extra: Option<&CheckObjects>, out: &mut dyn Write) -> std::io::Result<()> {
    out.write_all(br#"{"apiVersion":"v1","kind":"List","items":["#)?;
    let mut first = true;
    let view_objects = Group::ALL.into_iter().flat_map(|g| s.objects(g));
    for object in view_objects.chain(extra.into_iter().flat_map(|e| e.objects(s))) {
        if !first {
            out.write_all(b",\n")?;
        }
        first = false;
        serde_json::to_writer(&mut *out, &object)?;
    }
    out.write_all(b"]}\n")?;
    out.flush()
}

/// Longhorn names snapshots by UUID; these are stable ones per (volume, number).
fn snapshot_name(v: usize, k: usize) -> String {
    format!("5ca1e5a9-{:04x}-4000-8000-{v:012x}", k % 0x1_0000)
}

fn backup_target(s: &Synthetic) -> Value {
    json!({"apiVersion": LONGHORN_API_VERSION, "kind": "BackupTarget",
           "metadata": Synthetic::meta(BACKUP_TARGET, true, &[]),
           "spec": {"backupTargetURL": "s3://longhorn-scale@us-east-1/", "credentialSecret": "longhorn-scale-s3",
                    "pollInterval": "5m0s"},
           "status": {"available": true, "ownerID": Synthetic::node_name(0), "lastSyncedAt": s.timestamp,
                      "conditions": [s.condition("Unavailable", "False")]}})
}

fn recurring_job(s: &Synthetic, (name, task, cron, retain): (&str, &str, &str, i64)) -> Value {
    json!({"apiVersion": LONGHORN_API_VERSION, "kind": "RecurringJob",
           "metadata": Synthetic::meta(name, true, &[]),
           "spec": {"name": name, "task": task, "cron": cron, "groups": ["default"], "retain": retain,
                    "concurrency": 4, "labels": {}},
           "status": {"ownerID": Synthetic::node_name(0), "executionCount": 1, "lastSyncedAt": s.timestamp}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn snapshots_spread_evenly_and_chain_per_volume() {
        let s = Synthetic::new(3, 7).unwrap();
        let c = CheckObjects::new(30).unwrap();
        let all: Vec<Value> = c.objects(&s).collect();
        assert_eq!(all.len(), c.count());
        let mut per_volume: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
        for o in all.iter().filter(|o| o["kind"] == "Snapshot") {
            per_volume.entry(o["spec"]["volume"].as_str().unwrap().to_string()).or_default().push(o);
        }
        assert_eq!(per_volume.len(), 7);
        for (v, snaps) in &per_volume {
            let n: usize = v.trim_start_matches("pvc-scale-").parse().unwrap();
            assert_eq!(snaps.len(), c.snapshots_of(&s, n), "{v}");
            assert_eq!(snaps[0]["status"]["parent"], "", "{v}");
            let last = snaps.last().unwrap();
            assert!(last["status"]["children"].get("volume-head").is_some(), "{v}");
            for w in snaps.windows(2) {
                assert_eq!(w[1]["status"]["parent"], w[0]["metadata"]["name"], "{v}");
            }
        }
        assert_eq!(c.snapshots_of(&s, 0), 5, "30 = 7 x 4 + 2: the first two volumes get 5");
        assert_eq!(c.snapshots_of(&s, 2), 4);
        assert_eq!(CheckObjects::new(MAX_SNAPSHOTS + 1), Err(ChecksError::Snapshots(MAX_SNAPSHOTS + 1)));
    }
}
