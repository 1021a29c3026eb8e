//! The drain computation: what taking node N's instance managers away would do to each
//! volume that has a replica or an engine on N. Pure: `(view, node, policy, now)` in, a
//! [`NodeAnalysis`] out. The eviction rule, node deletion, cordon warnings and
//! `check drain` all read the same analysis, so they always say the same thing.

use std::collections::BTreeSet;
use std::time::SystemTime;

use crate::cluster::{annotation, ClusterView, Engine, InstanceManager, Replica, Volume};
use crate::policy::Policy;

use super::instances::{node_instances, InstanceKind, UnmappedInstance};

mod rebuild;
mod report;
mod wording;

use rebuild::{age, parse_time, rebuild_of, Rebuild};
pub use rebuild::{format_time, short_duration, stalled_rebuilds};
pub use report::{NodeAnalysis, ReplicaReport, StalledRebuild, Verdict, VolumeReport, WhyNot};
use wording::stranded_reason;

/// Annotation on a Longhorn Volume (that volume) or a Kubernetes Node (every volume on it)
/// that lets a drain proceed although it would strand data. Its value is the reason; an
/// empty value does not count.
pub const ALLOW_DRAIN_ANNOTATION: &str = "longhorn-guard.io/allow-drain";

use crate::cluster::readset::DEFAULT_INSTANCE_MANAGER_IMAGE_SETTING;

/// The override reason in an object's annotations, if set and not blank.
pub fn override_reason(meta: &crate::cluster::Meta) -> Option<String> {
    annotation(meta, ALLOW_DRAIN_ANNOTATION).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// Analyses draining `node` against the view.
pub fn analyze_node(view: &ClusterView, node: &str, policy: &Policy, now: SystemTime) -> NodeAnalysis {
    let node_override = view.node(node).and_then(|n| override_reason(&n.metadata));
    analyze_node_with(view, node, policy, now, node_override)
}

/// The volumes a drain of `node` looks at: those with a replica or engine there, or an engine
/// or engine frontend its instance managers run.
pub fn volumes_on_node(view: &ClusterView, node: &str) -> BTreeSet<String> {
    let mut names = volumes_with_objects_on(view, node);
    names.extend(node_instances(view, node).by_volume.into_keys());
    names
}

/// The volumes with a replica or engine object on `node`.
fn volumes_with_objects_on(view: &ClusterView, node: &str) -> BTreeSet<String> {
    let replicas = view.replicas_on_node(node).filter_map(Replica::volume);
    let engines = view.engines_on_node(node).filter_map(Engine::volume);
    replicas.chain(engines).map(str::to_string).collect()
}

/// [`analyze_node`] with the node override given by the caller (e.g. from the Node object
/// in an admission request, which may be newer than the view).
pub fn analyze_node_with(
    view: &ClusterView,
    node: &str,
    policy: &Policy,
    now: SystemTime,
    node_override: Option<String>,
) -> NodeAnalysis {
    let mut names = volumes_with_objects_on(view, node);
    let instances = node_instances(view, node);
    names.extend(instances.by_volume.keys().cloned());
    let volumes = names.into_iter().map(|v| {
        let kinds = instances.by_volume.get(&v).cloned().unwrap_or_default();
        (v, kinds)
    });
    analyze_volumes(view, node, volumes, instances.unmapped, policy, now, node_override)
}

/// [`analyze_node_with`] for the given volumes only (in the order given), each with the kinds
/// of entry the node's instance managers run for it, and the node's unmapped entries: the
/// drain index passes the volumes that do not come out safe, so the answer costs what it
/// prints.
pub fn analyze_volumes(
    view: &ClusterView,
    node: &str,
    volumes: impl IntoIterator<Item = (String, BTreeSet<InstanceKind>)>,
    unmapped: Vec<UnmappedInstance>,
    policy: &Policy,
    now: SystemTime,
    node_override: Option<String>,
) -> NodeAnalysis {
    let node_override =
        node_override.map(|r| format!("node {node} annotation {ALLOW_DRAIN_ANNOTATION}: {r}"));
    let volumes = volumes
        .into_iter()
        .map(|(v, kinds)| analyze_volume(view, node, &v, Some(&kinds), policy, now, node_override.as_deref()))
        .collect();
    let overridden = node_override.is_some();
    let unmapped_instances = unmapped.into_iter().map(|u| UnmappedInstance { overridden, ..u }).collect();
    NodeAnalysis {
        node: node.to_string(),
        known: view.node(node).is_some() || view.longhorn_node(node).is_some(),
        node_override,
        volumes,
        unmapped_instances,
    }
}

/// The verdict of draining `node` for `volume` (whose entries in the node's instance managers
/// are `in_ims`), without the node's override. Time never changes it: ages and stall detection
/// only change the wording (a stalled rebuild still keeps its replica from protecting, a failed
/// replica never protects however long ago it failed), so the drain index may keep it until an
/// object it reads changes.
pub fn volume_verdict(
    view: &ClusterView,
    node: &str,
    volume: &str,
    in_ims: &BTreeSet<InstanceKind>,
    policy: &Policy,
) -> Verdict {
    analyze_volume(view, node, volume, Some(in_ims), policy, SystemTime::UNIX_EPOCH, None).verdict
}

fn is_attached_state(state: &str) -> bool {
    matches!(state, "attached" | "attaching" | "detaching")
}

/// How an engine of `volume` runs on `node`, if it does; `in_ims` are the kinds of entry the
/// node's instance managers run for it.
fn attached_on(
    view: &ClusterView,
    node: &str,
    volume: &str,
    vol: Option<&Volume>,
    in_ims: Option<&BTreeSet<InstanceKind>>,
) -> Option<String> {
    if let Some(e) = view
        .engines_of_volume(volume)
        .find(|e| e.node() == Some(node) && matches!(e.status.current_state.as_str(), "running" | "starting"))
    {
        return Some(format!(
            "engine {} {}",
            e.metadata.name.as_deref().unwrap_or(""),
            e.status.current_state
        ));
    }
    if let Some(v) = vol {
        if v.status.current_node_id == node && is_attached_state(&v.status.state) {
            return Some(format!("volume {}", v.status.state));
        }
    }
    let kinds = in_ims.filter(|k| !k.is_empty())?;
    let what: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
    Some(format!("{} running in its instance manager", what.join(" and ")))
}

/// A replica "carries data" unless it was never healthy and never failed.
pub fn carries_data(r: &Replica) -> bool {
    ![&r.spec.healthy_at, &r.spec.failed_at, &r.spec.last_healthy_at, &r.spec.last_failed_at]
        .iter()
        .all(|s| s.is_empty())
}

fn is_available_healthy(r: &Replica) -> bool {
    !r.spec.healthy_at.is_empty() && r.spec.failed_at.is_empty() && !r.is_deleting()
}

/// The instance manager a replica runs in: `status.instanceManagerName`, else the one on
/// its node for its data engine. When several match (an upgrade leaves old and new instance
/// managers side by side), the one with Longhorn's `default-instance-manager-image` is
/// taken, as Longhorn does; without that setting a candidate that is not running is taken,
/// so that doubt never makes a replica count as protecting.
fn instance_manager_of<'a>(view: &'a ClusterView, r: &Replica) -> Option<&'a InstanceManager> {
    if !r.status.instance_manager_name.is_empty() {
        if let Some(im) = view.instance_manager(&r.status.instance_manager_name) {
            return Some(im);
        }
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

/// The per-replica facts the verdict needs.
struct ReplicaFacts<'a> {
    replica: &'a Replica,
    node: String,
    rebuild: Option<Rebuild>,
    /// Why it does not protect (`None`: it does, or it is on the node).
    why_not: Option<WhyNot>,
    report: ReplicaReport,
}

fn analyze_volume(
    view: &ClusterView,
    node: &str,
    volume: &str,
    in_ims: Option<&BTreeSet<InstanceKind>>,
    policy: &Policy,
    now: SystemTime,
    node_override: Option<&str>,
) -> VolumeReport {
    let vol = view.volume(volume);
    let engine = view.engine_of(volume);
    let attached = vol.map(|v| is_attached_state(&v.status.state)).unwrap_or(false)
        || engine.is_some_and(|e| e.status.current_state == "running");
    let detached = vol.is_some_and(|v| v.status.state == "detached");
    let attached_here = attached_on(view, node, volume, vol, in_ims);

    let mut facts: Vec<ReplicaFacts> = view
        .replicas_of_volume(volume)
        .map(|r| replica_facts(view, node, r, engine, attached, policy, now))
        .collect();
    // Replicas on the node first, then by node and name.
    facts.sort_by(|a, b| {
        (!a.report.on_node, &a.node, &a.report.name).cmp(&(!b.report.on_node, &b.node, &b.report.name))
    });

    let protecting: Vec<String> =
        facts.iter().filter(|f| f.report.protecting).map(|f| f.report.name.clone()).collect();
    let here: Vec<&ReplicaFacts> = facts.iter().filter(|f| f.report.on_node).collect();
    let ignored_stopped = |f: &&ReplicaFacts| {
        !policy.drain.protect_stopped_replicas
            && detached
            && f.replica.spec.desire_state == "stopped"
            && f.replica.status.current_state == "stopped"
    };
    let at_risk: Vec<&&ReplicaFacts> =
        here.iter().filter(|f| f.report.carries_data && !ignored_stopped(f)).collect();
    let stranded = !at_risk.is_empty() && protecting.is_empty();

    let mut reason;
    let mut remedy = String::new();
    let mut verdict = Verdict::Block;
    if let Some(how) = &attached_here {
        let frontend_too = in_ims.is_some_and(|k| k.contains(&InstanceKind::EngineFrontend));
        let engine_phrase = match (how.starts_with("engine ") && how.ends_with(" running"), frontend_too) {
            (true, true) => "engine and engine frontend running".to_string(),
            (true, false) => "engine running".to_string(),
            _ => how.clone(),
        };
        reason = format!("attached to {node} ({engine_phrase})");
        if stranded {
            match at_risk.iter().filter(|f| is_available_healthy(f.replica)).count() {
                0 => reason.push_str(" and holds the only copy of its data"),
                1 => reason.push_str(" and holds its last healthy replica"),
                n => reason.push_str(&format!(" and holds all {n} of its healthy replicas")),
            }
        }
        let pvc = vol
            .map(|v| &v.status.kubernetes_status)
            .filter(|k| !k.pvc_name.is_empty())
            .map(|k| format!(" (PVC {}/{})", k.namespace, k.pvc_name))
            .unwrap_or_default();
        remedy = format!("move its workload{pvc} off {node} first");
    } else if stranded {
        let (r, m) = stranded_reason(node, vol, &facts, &at_risk);
        reason = r;
        remedy = m;
    } else {
        verdict = Verdict::Safe;
        reason = if !protecting.is_empty() {
            let nodes: BTreeSet<&str> =
                facts.iter().filter(|f| f.report.protecting).map(|f| f.node.as_str()).collect();
            let nodes = nodes.into_iter().collect::<Vec<_>>();
            let s = if nodes.len() == 1 { "" } else { "s" };
            format!("protected by healthy replica{s} on {}", nodes.join(", "))
        } else if here.is_empty() {
            format!("no replica on {node}")
        } else if here.iter().all(|f| !f.report.carries_data) {
            match here.len() {
                1 => format!("replica on {node} was never used"),
                n => format!("{n} replicas on {node} were never used"),
            }
        } else {
            let what = match here.len() {
                1 => format!("replica on {node} is stopped"),
                n => format!("{n} replicas on {node} are stopped or unused"),
            };
            format!("{what} and the volume detached (drain.protectStoppedReplicas: false)")
        };
    }

    let mut overridden = None;
    if verdict == Verdict::Block {
        let vol_override = vol.and_then(|v| override_reason(&v.metadata));
        let by = vol_override
            .map(|r| format!("volume {volume} annotation {ALLOW_DRAIN_ANNOTATION}: {r}"))
            .or_else(|| node_override.map(str::to_string));
        if let Some(by) = by {
            verdict = Verdict::Overridden;
            overridden = Some(by);
        }
    }

    VolumeReport {
        volume: volume.to_string(),
        number_of_replicas: vol.map(|v| v.spec.number_of_replicas),
        data_engine: data_engine_of(vol, &facts, engine),
        state: vol.map(|v| v.status.state.to_string()).unwrap_or_default(),
        attached_here: attached_here.is_some(),
        replicas: facts.into_iter().map(|f| f.report).collect(),
        protecting,
        verdict,
        reason,
        remedy,
        overridden,
    }
}

fn replica_facts<'a>(
    view: &ClusterView,
    drained: &str,
    r: &'a Replica,
    engine: Option<&Engine>,
    attached: bool,
    policy: &Policy,
    now: SystemTime,
) -> ReplicaFacts<'a> {
    let name = r.metadata.name.as_deref().unwrap_or_default().to_string();
    let node = r.node().unwrap_or("").to_string();
    let on_node = node == drained;
    let live_engine = engine.filter(|_| attached);
    let mode = live_engine.and_then(|e| e.status.replica_mode_map.get(&name).map(String::from));
    let rebuild = live_engine.and_then(|e| rebuild_of(view, e, r, policy, now));
    let data = carries_data(r);

    // The engine's replica set: a running engine with a non-empty mode map that does not
    // list this replica is not using it.
    let engine_dropped = live_engine.is_some_and(|e| {
        e.status.current_state == "running"
            && !e.status.replica_mode_map.is_empty()
            && !e.status.replica_mode_map.contains_key(&name)
    });

    // Why this replica cannot vouch for the volume (None = it protects).
    let why_not: Option<WhyNot> = if r.is_deleting() {
        Some(WhyNot::Deleting)
    } else if !r.spec.failed_at.is_empty() {
        Some(WhyNot::Failed {
            ago: parse_time(&r.spec.failed_at).map(|t| age(now, t)),
            at: r.spec.failed_at.to_string(),
        })
    } else if let Some(rb) =
        rebuild.as_ref().filter(|_| r.spec.healthy_at.is_empty() || mode.as_deref() == Some("WO"))
    {
        Some(WhyNot::Rebuilding { progress: rb.progress, stalled_for: rb.stalled_since.map(|t| age(now, t)) })
    } else if mode.as_deref() == Some("WO") {
        Some(WhyNot::RebuildingUnknown)
    } else if r.spec.healthy_at.is_empty() {
        Some(if data { WhyNot::NotYetHealthy } else { WhyNot::NeverHealthy })
    } else if mode.as_deref() == Some("ERR") {
        Some(WhyNot::ErrMode)
    } else if on_node {
        None
    } else if engine_dropped {
        Some(WhyNot::NotInEngine)
    } else if node.is_empty() {
        Some(WhyNot::NoNode)
    } else {
        match view.is_node_cordoned(&node) {
            None => Some(WhyNot::UnknownNode),
            Some(true) => Some(WhyNot::CordonedNode),
            Some(false) => match instance_manager_of(view, r) {
                None => Some(WhyNot::NoInstanceManager),
                Some(im) if im.status.current_state != "running" => {
                    Some(WhyNot::InstanceManagerNotRunning(im.status.current_state.to_string()))
                }
                Some(_) => None,
            },
        }
    };
    let protecting = !on_node && why_not.is_none();

    let state = if r.is_deleting() {
        "deleting".to_string()
    } else if let Some(m) = mode.as_deref() {
        match (m, rebuild.as_ref()) {
            ("WO", Some(rb)) if rb.stalled_since.is_some() => format!("WO({}%,stalled)", rb.progress),
            ("WO", Some(rb)) => format!("WO({}%)", rb.progress),
            _ => m.to_string(),
        }
    } else if !r.spec.failed_at.is_empty() {
        "failed".into()
    } else if !data {
        "unused".into()
    } else if r.spec.healthy_at.is_empty() {
        "not-healthy".into()
    } else if r.status.current_state == "stopped" {
        "stopped".into()
    } else {
        "healthy".into()
    };

    let report = ReplicaReport {
        name,
        node: node.clone(),
        state,
        mode,
        progress: rebuild.as_ref().map(|rb| rb.progress),
        stalled_since: rebuild.as_ref().and_then(|rb| rb.stalled_since).map(format_time),
        carries_data: data,
        on_node,
        protecting,
        why_not: if on_node { None } else { why_not.as_ref().map(ToString::to_string) },
    };
    let why_not = if on_node { None } else { why_not };
    ReplicaFacts { replica: r, node, rebuild, why_not, report }
}

/// The volume's data engine: the Volume's `spec.dataEngine`, else a replica's, else its
/// engine's.
fn data_engine_of(vol: Option<&Volume>, facts: &[ReplicaFacts], engine: Option<&Engine>) -> String {
    vol.map(|v| v.spec.data_engine.as_str())
        .into_iter()
        .chain(facts.iter().map(|f| f.replica.spec.data_engine.as_str()))
        .chain(engine.map(|e| e.spec.data_engine.as_str()))
        .find(|e| !e.is_empty())
        .unwrap_or("")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn why_not_reads_as_a_phrase_and_ages_are_coarse() {
        let m = |s| Duration::from_secs(s);
        for (why, text) in [
            (WhyNot::Failed { ago: Some(m(20 * 60)), at: String::new() }, "failed 20m ago"),
            (WhyNot::Failed { ago: None, at: "yesterday".into() }, "failed at yesterday"),
            (WhyNot::Rebuilding { progress: 37, stalled_for: None }, "is rebuilding (37%)"),
            (
                WhyNot::Rebuilding { progress: 0, stalled_for: Some(m(3 * 3600)) },
                "is stuck rebuilding at 0% for 3h",
            ),
            (WhyNot::NotInEngine, "is not in its engine's replica set"),
            (WhyNot::CordonedNode, "is on a cordoned node"),
            (
                WhyNot::InstanceManagerNotRunning(String::new()),
                "has no running instance manager (state unknown)",
            ),
        ] {
            assert_eq!(why.to_string(), text);
        }
        assert!(WhyNot::NoInstanceManager.is_instance_manager());
        assert!(WhyNot::InstanceManagerNotRunning("error".into()).is_instance_manager());
        assert!(!WhyNot::CordonedNode.is_instance_manager());
        for (secs, text) in
            [(0, "0s"), (119, "119s"), (120, "2m"), (7199, "119m"), (7200, "2h"), (172_800, "2d")]
        {
            assert_eq!(short_duration(m(secs)), text);
        }
    }
}
