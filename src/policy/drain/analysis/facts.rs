//! What the verdict needs to know of each replica of a volume: where it runs, whether it is
//! healthy and in the data path, whether it rebuilds, and why it does not protect the volume.

use std::time::SystemTime;

use crate::cluster::readset::DEFAULT_INSTANCE_MANAGER_IMAGE_SETTING;
use crate::cluster::{
    ClusterView, Draining, Engine, InstanceManager, Node, Replica, Volume, LONGHORN_NAMESPACE,
};
use crate::policy::Policy;

use super::rebuild::{age, format_time, parse_time, rebuild_of, Rebuild};
use super::{ReplicaReport, WhyNot};

/// A replica "carries data" unless it was never healthy and never failed.
pub fn carries_data(r: &Replica) -> bool {
    !(r.spec.healthy_at.is_empty()
        && r.spec.failed_at.is_empty()
        && r.spec.last_healthy_at.is_empty()
        && r.spec.last_failed_at.is_empty())
}

pub fn is_available_healthy(r: &Replica) -> bool {
    !r.spec.healthy_at.is_empty() && r.spec.failed_at.is_empty() && !r.is_deleting()
}

/// Why the pod of a `running` instance manager `im` (same name, in Longhorn's namespace) takes
/// its replicas down, if it does: it is being deleted (evicted by a drain, or by hand), or it is
/// gone while the view holds other instance-manager pods (force-deleted, before Longhorn marks
/// the instance manager `error`; Longhorn's own PDB check trusts the state in that window). A
/// view without any instance-manager pod (a snapshot of Longhorn objects only) says nothing.
/// Only instance-manager pods count, so the watch view, a snapshot and a confirmation (which
/// reads only those) agree.
fn instance_manager_pod_down(view: &ClusterView, im: &InstanceManager) -> Option<WhyNot> {
    let name = im.metadata.name.as_deref().unwrap_or_default();
    match view.pod(LONGHORN_NAMESPACE, name).filter(|p| p.is_instance_manager()) {
        Some(p) if p.metadata.deletion_timestamp.is_some() => {
            Some(WhyNot::InstanceManagerNotRunning("terminating".into()))
        }
        Some(_) => None,
        None if view.instance_manager_pod_count() > 0 => Some(WhyNot::InstanceManagerPodGone),
        None => None,
    }
}

/// The instance manager a replica runs in: `status.instanceManagerName` (none when it names one
/// that is gone: the replica's process is gone too), else the one on its node for its data
/// engine; of several, the one with `default-instance-manager-image`, as Longhorn picks, else
/// one that is not running, so that doubt never makes a replica count as protecting.
pub(super) fn instance_manager_of<'a>(view: &'a ClusterView, r: &Replica) -> Option<&'a InstanceManager> {
    if !r.status.instance_manager_name.is_empty() {
        return view.instance_manager(&r.status.instance_manager_name);
    }
    let node = r.node()?;
    let engine = if r.spec.data_engine.is_empty() { "v1" } else { r.spec.data_engine.as_str() };
    let candidates: Vec<&InstanceManager> =
        view.instance_managers_on_node(node).filter(|im| im.replica_engine() == Some(engine)).collect();
    if candidates.len() <= 1 {
        return candidates.first().copied();
    }
    if let Some(image) = view.setting(DEFAULT_INSTANCE_MANAGER_IMAGE_SETTING).filter(|i| !i.is_empty()) {
        if let Some(im) = candidates.iter().find(|im| im.spec.image == image) {
            return Some(im);
        }
    }
    candidates.iter().find(|im| im.status.current_state != "running").or(candidates.first()).copied()
}

/// The per-replica facts the verdict needs (no text: [`ReplicaFacts::report`] writes it).
pub(super) struct ReplicaFacts<'a> {
    pub(super) replica: &'a Replica,
    pub(super) name: &'a str,
    pub(super) node: &'a str,
    pub(super) on_node: bool,
    pub(super) carries_data: bool,
    /// A protecting replica on another node.
    pub(super) protecting: bool,
    /// The engine's mode for it when the volume is attached.
    pub(super) mode: Option<&'a str>,
    pub(super) rebuild: Option<Rebuild>,
    /// Why it does not protect (`None`: it does, or it is on the node).
    pub(super) why_not: Option<WhyNot>,
}

pub(super) fn replica_facts<'a>(
    view: &ClusterView,
    drained: &str,
    r: &'a Replica,
    engine: Option<&'a Engine>,
    attached: bool,
    policy: &Policy,
    now: SystemTime,
) -> ReplicaFacts<'a> {
    let name = r.metadata.name.as_deref().unwrap_or_default();
    let node = r.node().unwrap_or("");
    let on_node = node == drained;
    let live_engine = engine.filter(|_| attached);
    let mode = live_engine.and_then(|e| e.status.replica_mode_map.get(name).map(|m| m.as_str()));
    let rebuild = live_engine.and_then(|e| rebuild_of(view, e, r, policy, now));
    let data = carries_data(r);

    // The engine's replica set: a running engine with a non-empty mode map that does not
    // list this replica is not using it.
    let engine_dropped = mode.is_none()
        && live_engine
            .is_some_and(|e| e.status.current_state == "running" && !e.status.replica_mode_map.is_empty());

    // Why this replica cannot vouch for the volume (None = it protects).
    let why_not: Option<WhyNot> = if r.is_deleting() {
        Some(WhyNot::Deleting)
    } else if !r.spec.failed_at.is_empty() {
        Some(WhyNot::Failed {
            ago: parse_time(&r.spec.failed_at).map(|t| age(now, t)),
            at: r.spec.failed_at.to_string(),
        })
    } else if let Some(rb) = rebuild.as_ref().filter(|_| r.spec.healthy_at.is_empty() || mode == Some("WO")) {
        Some(WhyNot::Rebuilding { progress: rb.progress, stalled_for: rb.stalled_since.map(|t| age(now, t)) })
    } else if mode == Some("WO") {
        Some(WhyNot::RebuildingUnknown)
    } else if r.spec.healthy_at.is_empty() {
        Some(if data { WhyNot::NotYetHealthy } else { WhyNot::NeverHealthy })
    } else if mode == Some("ERR") {
        Some(WhyNot::ErrMode)
    } else if on_node {
        None
    } else if engine_dropped {
        Some(WhyNot::NotInEngine)
    } else if node.is_empty() {
        Some(WhyNot::NoNode)
    } else {
        match view.node(node).map(Node::draining) {
            None => Some(WhyNot::UnknownNode),
            Some(Some(Draining::Cordoned)) => Some(WhyNot::CordonedNode),
            Some(Some(Draining::Tainted(taint))) => Some(WhyNot::TaintedNode(taint.to_string())),
            Some(Some(Draining::Deleting)) => Some(WhyNot::DeletedNode),
            Some(None) => match instance_manager_of(view, r) {
                None => Some(WhyNot::NoInstanceManager),
                Some(im) if im.status.current_state != "running" => {
                    Some(WhyNot::InstanceManagerNotRunning(im.status.current_state.to_string()))
                }
                // Its pod is being evicted, deleted or gone: the replica goes with it.
                Some(im) => instance_manager_pod_down(view, im),
            },
        }
    };
    let protecting = !on_node && why_not.is_none();
    let why_not = if on_node { None } else { why_not };
    ReplicaFacts { replica: r, name, node, on_node, carries_data: data, protecting, mode, rebuild, why_not }
}

impl ReplicaFacts<'_> {
    /// The short state for tables: `RW`, `WO(37%)`, `WO(0%,stalled)`, `failed`, `stopped`, ...
    pub(super) fn state(&self) -> String {
        let r = self.replica;
        if r.is_deleting() {
            "deleting".to_string()
        } else if let Some(m) = self.mode {
            match (m, self.rebuild.as_ref()) {
                ("WO", Some(rb)) if rb.stalled_since.is_some() => format!("WO({}%,stalled)", rb.progress),
                ("WO", Some(rb)) => format!("WO({}%)", rb.progress),
                _ => m.to_string(),
            }
        } else if !r.spec.failed_at.is_empty() {
            "failed".into()
        } else if !self.carries_data {
            "unused".into()
        } else if r.spec.healthy_at.is_empty() {
            "not-healthy".into()
        } else if r.status.current_state == "stopped" {
            "stopped".into()
        } else {
            "healthy".into()
        }
    }

    /// The replica's line in the report.
    pub(super) fn report(&self) -> ReplicaReport {
        ReplicaReport {
            name: self.name.to_string(),
            node: self.node.to_string(),
            state: self.state(),
            mode: self.mode.map(str::to_string),
            progress: self.rebuild.as_ref().map(|rb| rb.progress),
            stalled_since: self.rebuild.as_ref().and_then(|rb| rb.stalled_since).map(format_time),
            carries_data: self.carries_data,
            on_node: self.on_node,
            protecting: self.protecting,
            why_not: self.why_not.clone(),
        }
    }
}

/// The volume's data engine: the Volume's `spec.dataEngine`, else a replica's, else its
/// engine's.
pub(super) fn data_engine_of(
    vol: Option<&Volume>,
    facts: &[ReplicaFacts],
    engine: Option<&Engine>,
) -> String {
    vol.map(|v| v.spec.data_engine.as_str())
        .into_iter()
        .chain(facts.iter().map(|f| f.replica.spec.data_engine.as_str()))
        .chain(engine.map(|e| e.spec.data_engine.as_str()))
        .find(|e| !e.is_empty())
        .unwrap_or("")
        .to_string()
}
