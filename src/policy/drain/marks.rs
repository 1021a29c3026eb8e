//! When a watch view first saw each rebuild at its current progress: the drain rule's stall
//! detection ([`super::analysis`]) reads it, the view keeps it current ([`Derived`]).

use std::collections::HashMap;
use std::time::SystemTime;

use crate::cluster::{Change, ClusterView, Derived};

/// Progress of one rebuild as first seen at a given value, for stall detection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgressMark {
    pub progress: i64,
    /// When the view first saw the rebuild at this progress value.
    pub since: SystemTime,
}

/// (engine name, rebuild address) -> when its progress value was first seen.
#[derive(Clone, Debug, Default)]
pub struct RebuildMarks(HashMap<(String, String), ProgressMark>);

impl RebuildMarks {
    /// When the view first saw this rebuild (engine, `tcp://ip:port`) at its current progress.
    pub fn get(&self, engine: &str, address: &str) -> Option<ProgressMark> {
        self.0.get(&(engine.to_string(), address.to_string())).copied()
    }
}

impl Derived for RebuildMarks {
    fn apply(&mut self, _view: &ClusterView, change: Change<'_>, now: SystemTime) {
        let Change::Engine(diff) = change else { return };
        let engine = diff.name;
        let Some(new) = diff.new else {
            self.0.retain(|(e, _), _| e != engine);
            return;
        };
        self.0.retain(|(e, addr), _| e != engine || new.status.rebuild_status.contains_key(addr));
        for (addr, rs) in &new.status.rebuild_status {
            let key = (engine.to_string(), addr.to_string());
            if self.0.get(&key).is_none_or(|mark| mark.progress != rs.progress) {
                self.0.insert(key, ProgressMark { progress: rs.progress, since: now });
            }
        }
    }

    fn flush(&mut self, _view: &ClusterView) {}

    fn clone_box(&self) -> Box<dyn Derived> {
        Box::new(self.clone())
    }
}
