//! The drain computation: what taking node N's instance managers away would do to each
//! volume that has a replica or an engine on N. Pure: `(view, node, policy, now)` in, a
//! [`NodeAnalysis`] out. The eviction rule, node deletion, cordon warnings and
//! `check drain` all read the same analysis, so they always say the same thing.

use std::collections::BTreeSet;
use std::time::SystemTime;

use crate::cluster::{annotation, lists_no_pod, ClusterView, Engine, Replica, Volume};
use crate::policy::Policy;

use super::instances::{node_instances, InstanceKind, UnmappedInstance};

mod facts;
mod rebuild;
mod report;
mod wording;

pub use facts::carries_data;
use facts::{data_engine_of, is_available_healthy, replica_facts, ReplicaFacts};
pub use rebuild::{format_time, short_duration, stalled_rebuilds};
pub use report::{NodeAnalysis, ReplicaReport, StalledRebuild, Verdict, VolumeReport, WhyNot};
use wording::stranded_reason;

/// Annotation on a Longhorn Volume (that volume) or a Kubernetes Node (every volume on it)
/// that lets a drain proceed although it would strand data. Its value is the reason; an
/// empty value does not count.
pub const ALLOW_DRAIN_ANNOTATION: &str = "longhorn-guard.io/allow-drain";

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
        // A v2 engine placed here by `spec.engineNodeID` serves a workload on another node:
        // moving the workload does not move the engine.
        let serves = vol
            .filter(|v| v.spec.data_engine == "v2" && v.spec.engine_node_id == node)
            .map(|v| {
                if v.status.current_node_id.is_empty() {
                    &v.spec.node_id
                } else {
                    &v.status.current_node_id
                }
            })
            .filter(|front| !front.is_empty() && front.as_str() != node);
        reason = match serves {
            Some(front) => {
                format!("its engine runs on {node} (spec.engineNodeID) for its workload on {front}")
            }
            None => format!("attached to {node} ({engine_phrase})"),
        };
        if stranded {
            let others: Vec<&ReplicaFacts> = facts.iter().filter(|f| !f.report.on_node).collect();
            match at_risk.iter().filter(|f| is_available_healthy(f.replica)).count() {
                _ if wording::healthy_on_draining_node(&others) => {
                    reason.push_str(" and no other replica can protect it")
                }
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
        remedy = if let Some(front) = serves {
            let _ = front;
            "set its spec.engineNodeID to another node first; Longhorn moves the engine there and the workload stays"
                .to_string()
        } else if wording::is_strict_local(vol) {
            wording::strict_local_remedy(node)
        } else if vol.is_some_and(|v| {
            let k = &v.status.kubernetes_status;
            lists_no_pod(k.workloads, k.pods_gone)
        }) {
            wording::no_pod_remedy(node)
        } else {
            format!("move its workload{pvc} off {node} first")
        };
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
