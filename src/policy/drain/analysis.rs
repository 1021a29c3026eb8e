//! The drain computation: what taking node N's instance managers away would do to each
//! volume that has a replica or an engine on N. Pure: `(view, node, policy, now)` in, a
//! [`NodeAnalysis`] out. The eviction rule, node deletion, cordon warnings and
//! `check drain` all read the same analysis, so they always say the same thing.

use std::collections::BTreeSet;
use std::time::SystemTime;

use crate::cluster::{annotation, ClusterView, Engine, Replica};
use crate::policy::Policy;

use super::instances::{node_instances, InstanceKind, UnmappedInstance};

mod facts;
mod finding;
mod rebuild;
mod report;
mod volume;
mod wording;

pub use facts::{carries_data, is_available_healthy};
pub use finding::{Attachment, Clause, Holds, Lead, Override, Reason, Remedy, Rest};
pub use rebuild::{format_time, stalled_rebuilds};
pub use report::{Explained, NodeAnalysis, ReplicaReport, StalledRebuild, Verdict, VolumeReport, WhyNot};
use volume::Assessment;

/// Annotation on a Longhorn Volume (that volume) or a Kubernetes Node (every volume on it)
/// that lets a drain proceed although it would strand data. Its value is the reason; an
/// empty value does not count.
pub const ALLOW_DRAIN_ANNOTATION: &str = "longhorn-guard.io/allow-drain";

/// The override reason in an object's annotations, if set and not blank.
pub fn override_reason(meta: &crate::cluster::Meta) -> Option<String> {
    override_text(meta).map(str::to_string)
}

/// [`override_reason`], borrowed.
pub(super) fn override_text(meta: &crate::cluster::Meta) -> Option<&str> {
    annotation(meta, ALLOW_DRAIN_ANNOTATION).map(str::trim).filter(|s| !s.is_empty())
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
/// of entry the node's instance managers run for it, and the node's unmapped entries.
pub fn analyze_volumes(
    view: &ClusterView,
    node: &str,
    volumes: impl IntoIterator<Item = (String, BTreeSet<InstanceKind>)>,
    unmapped: Vec<UnmappedInstance>,
    policy: &Policy,
    now: SystemTime,
    node_override: Option<String>,
) -> NodeAnalysis {
    let node_override = node_override.map(|reason| Override::Node { node: node.to_string(), reason });
    let volumes = volumes
        .into_iter()
        .map(|(v, kinds)| {
            Assessment::new(view, node, &v, Some(&kinds), policy, now).report(policy, node_override.as_ref())
        })
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

/// The verdict, reason and remedy of `volume` for a drain of `node` (the node's instance
/// managers run `in_ims` for it), without the per-replica detail of its report: what an
/// admission answer prints of a volume it lists.
pub fn explain_volume(
    view: &ClusterView,
    node: &str,
    volume: &str,
    in_ims: Option<&BTreeSet<InstanceKind>>,
    policy: &Policy,
    now: SystemTime,
    node_override: Option<&Override>,
) -> Explained {
    Assessment::new(view, node, volume, in_ims, policy, now).explain(policy, node_override)
}

/// Whether `volume` (whose entries in the node's instance managers are `in_ims`) is not safe
/// for a drain of `node` with `drain.protectStoppedReplicas` true and false, in that order,
/// from one reading of its objects, without the node's override. Nothing else in the policy
/// changes a verdict, and time never does: ages and stall detection only change the wording (a
/// stalled rebuild still keeps its replica from protecting, a failed replica never protects
/// however long ago it failed), so the drain index may keep it until an object it reads
/// changes. No text is built.
pub fn volume_unsafe(
    view: &ClusterView,
    node: &str,
    volume: &str,
    in_ims: &BTreeSet<InstanceKind>,
) -> (bool, bool) {
    let a = Assessment::new(view, node, volume, Some(in_ims), &Policy::default(), SystemTime::UNIX_EPOCH);
    (a.verdict(true) != Verdict::Safe, a.verdict(false) != Verdict::Safe)
}
