//! The drain computation: what taking node N's instance managers away would do to each
//! volume that has a replica or an engine on N. Pure: `(view, node, policy, now)` in, a
//! [`NodeAnalysis`] out. The eviction rule, node deletion, cordon warnings and
//! `check drain` all read the same analysis, so they always say the same thing.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::cluster::{annotation, ClusterView, Engine, InstanceManager, Replica, Source, Volume};
use crate::policy::Policy;

use super::instances::{node_instances, InstanceKind, UnmappedInstance};

/// Annotation on a Longhorn Volume (that volume) or a Kubernetes Node (every volume on it)
/// that lets a drain proceed although it would strand data. Its value is the reason; an
/// empty value does not count.
pub const ALLOW_DRAIN_ANNOTATION: &str = "longhorn-guard.io/allow-drain";

use crate::cluster::readset::{DEFAULT_INSTANCE_MANAGER_IMAGE_SETTING, STORAGE_NETWORK_SETTING};

/// What draining the node means for one volume.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Draining the node does not endanger this volume.
    Safe,
    /// Draining the node would strand this volume: a drain must wait.
    Block,
    /// It would block, but an operator override lets the drain proceed.
    Overridden,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Safe => "safe",
            Self::Block => "block",
            Self::Overridden => "overridden",
        }
    }
}

/// One replica of a volume under analysis.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaReport {
    pub name: String,
    pub node: String,
    /// Short state for tables: `RW`, `WO(37%)`, `WO(0%,stalled)`, `ERR`, `failed`, `stopped`,
    /// `healthy`, `unused`, `not-healthy`, `deleting`.
    pub state: String,
    /// The engine's mode for it (`RW`, `WO`, `ERR`) when the volume is attached.
    pub mode: Option<String>,
    /// Rebuild progress (0-100) while it is rebuilding.
    pub progress: Option<i64>,
    /// RFC 3339 time since which its rebuild has not progressed, when stalled.
    pub stalled_since: Option<String>,
    /// False only for a replica that was never healthy and never failed.
    pub carries_data: bool,
    /// True when it lives on the node under analysis.
    pub on_node: bool,
    /// True when it is a protecting replica on another node.
    pub protecting: bool,
    /// For a replica elsewhere that does not protect: why, as a phrase that follows
    /// "its replica on NODE", e.g. `is rebuilding (37%)`.
    pub why_not: Option<String>,
}

/// The analysis of one volume.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeReport {
    pub volume: String,
    /// `spec.numberOfReplicas`, when the Volume is in the view.
    pub number_of_replicas: Option<i64>,
    /// `v1` or `v2`: the Volume's `spec.dataEngine`, else its replicas' or engine's ("" when
    /// none says).
    pub data_engine: String,
    /// `status.state` of the Volume ("" when unknown).
    pub state: String,
    /// An engine of the volume runs on the node.
    pub attached_here: bool,
    /// Every replica of the volume, those on the node first.
    pub replicas: Vec<ReplicaReport>,
    /// Names of the protecting replicas on other nodes.
    pub protecting: Vec<String>,
    pub verdict: Verdict,
    /// Why, in words (no volume name, no remedy).
    pub reason: String,
    /// What unblocks it ("" when safe).
    pub remedy: String,
    /// Set when an override annotation changed the verdict: which object and its reason.
    pub overridden: Option<String>,
}

impl VolumeReport {
    /// `reason; remedy` (or the reason alone when there is no remedy).
    pub fn explanation(&self) -> String {
        if self.remedy.is_empty() {
            self.reason.clone()
        } else {
            format!("{}; {}", self.reason, self.remedy)
        }
    }

    /// `volume: reason; remedy` as one line.
    pub fn line(&self) -> String {
        format!("{}: {}", self.volume, self.explanation())
    }
}

/// What draining one node means for every volume with a replica or an engine on it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodeAnalysis {
    pub node: String,
    /// The node is in the view (as a Kubernetes Node or a Longhorn Node).
    pub known: bool,
    /// The override on the Kubernetes Node, if set: `node N annotation ...: reason`.
    pub node_override: Option<String>,
    /// Volumes in name order.
    pub volumes: Vec<VolumeReport>,
    /// Engine and engine-frontend entries on the node that no known volume owns.
    pub unmapped_instances: Vec<UnmappedInstance>,
}

impl NodeAnalysis {
    /// Volumes that block the drain.
    pub fn blocking(&self) -> impl Iterator<Item = &VolumeReport> {
        self.volumes.iter().filter(|v| v.verdict == Verdict::Block)
    }

    /// Volumes that would block but are overridden.
    pub fn overridden(&self) -> impl Iterator<Item = &VolumeReport> {
        self.volumes.iter().filter(|v| v.verdict == Verdict::Overridden)
    }

    /// Unmapped instance-manager entries that block the drain.
    pub fn blocking_unmapped(&self) -> impl Iterator<Item = &UnmappedInstance> {
        self.unmapped_instances.iter().filter(|u| !u.overridden)
    }

    /// Unmapped instance-manager entries let through by the node override.
    pub fn overridden_unmapped(&self) -> impl Iterator<Item = &UnmappedInstance> {
        self.unmapped_instances.iter().filter(|u| u.overridden)
    }

    /// True when a drain would have to wait.
    pub fn would_block(&self) -> bool {
        self.blocking().next().is_some() || self.blocking_unmapped().next().is_some()
    }
}

/// A rebuild whose progress has not moved for longer than `drain.stallAfter`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StalledRebuild {
    pub volume: String,
    pub engine: String,
    /// The rebuilding replica's name, when its address maps to one.
    pub replica: Option<String>,
    pub progress: i64,
    /// Since when the progress has not moved.
    pub since: SystemTime,
}

/// Why a replica on another node cannot vouch for its volume. Remedies are chosen from
/// this, never from its wording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WhyNot {
    Deleting,
    /// `spec.failedAt`: how long ago, or the raw value when it is not a time.
    Failed {
        ago: Option<Duration>,
        at: String,
    },
    /// A rebuild the engine reports: progress, and how long it has not moved when stalled.
    Rebuilding {
        progress: i64,
        stalled_for: Option<Duration>,
    },
    /// `WO` in the engine without a rebuild status.
    RebuildingUnknown,
    /// Carries data but has no `healthyAt`.
    NotYetHealthy,
    NeverHealthy,
    ErrMode,
    /// The volume's running engine has a replica set that does not list it: the engine does
    /// not use it, so its `healthyAt` is history.
    NotInEngine,
    NoNode,
    UnknownNode,
    CordonedNode,
    NoInstanceManager,
    /// The instance manager's `status.currentState`.
    InstanceManagerNotRunning(String),
}

impl WhyNot {
    /// True when the replica's instance manager is the problem.
    pub fn is_instance_manager(&self) -> bool {
        matches!(self, Self::NoInstanceManager | Self::InstanceManagerNotRunning(_))
    }
}

impl std::fmt::Display for WhyNot {
    /// A phrase that follows "its replica on NODE".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Deleting => f.write_str("is being deleted"),
            Self::Failed { ago: Some(d), .. } => write!(f, "failed {} ago", short_duration(*d)),
            Self::Failed { ago: None, at } => write!(f, "failed at {}", crate::decision::clip(at, 25)),
            Self::Rebuilding { progress, stalled_for: None } => write!(f, "is rebuilding ({progress}%)"),
            Self::Rebuilding { progress, stalled_for: Some(d) } => {
                write!(f, "is stuck rebuilding at {progress}% for {}", short_duration(*d))
            }
            Self::RebuildingUnknown => f.write_str("is rebuilding"),
            Self::NotYetHealthy => f.write_str("is being rebuilt and not yet healthy"),
            Self::NeverHealthy => f.write_str("has never been healthy"),
            Self::ErrMode => f.write_str("is in ERR mode"),
            Self::NotInEngine => f.write_str("is not in its engine's replica set"),
            Self::NoNode => f.write_str("has no node"),
            Self::UnknownNode => f.write_str("is on a node longhorn-guard does not see"),
            Self::CordonedNode => f.write_str("is on a cordoned node"),
            Self::NoInstanceManager => f.write_str("has no instance manager"),
            Self::InstanceManagerNotRunning(state) => write!(
                f,
                "has no running instance manager (state {})",
                if state.is_empty() { "unknown" } else { state.as_str() }
            ),
        }
    }
}

/// The override reason in an object's annotations, if set and not blank.
pub fn override_reason(meta: &crate::cluster::Meta) -> Option<String> {
    annotation(meta, ALLOW_DRAIN_ANNOTATION).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// Analyses draining `node` against the view.
pub fn analyze_node(view: &ClusterView, node: &str, policy: &Policy, now: SystemTime) -> NodeAnalysis {
    let node_override = view.node(node).and_then(|n| override_reason(&n.metadata));
    analyze_node_with(view, node, policy, now, node_override)
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
    let mut names: BTreeSet<String> = BTreeSet::new();
    for r in view.replicas_on_node(node) {
        if let Some(v) = r.volume() {
            names.insert(v.to_string());
        }
    }
    for e in view.engines_on_node(node) {
        if let Some(v) = e.volume() {
            names.insert(v.to_string());
        }
    }
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
    let candidates: Vec<&InstanceManager> = view
        .instance_managers_on_node(node)
        .filter(|im| {
            let im_engine = if im.spec.data_engine.is_empty() { "v1" } else { im.spec.data_engine.as_str() };
            im_engine == engine && matches!(im.spec.type_.as_str(), "aio" | "replica" | "")
        })
        .collect();
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

/// What a rebuild of one replica looks like.
#[derive(Clone, Debug)]
struct Rebuild {
    progress: i64,
    stalled_since: Option<SystemTime>,
    /// The storage network is set but the replica's storage IP is its pod IP.
    no_storage_network: bool,
}

/// The address an engine uses for a replica (`ip:port`).
fn replica_address(engine: &Engine, r: &Replica) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(name) = r.metadata.name.as_deref() {
        if let Some(a) = engine.status.current_replica_address_map.get(name) {
            out.push(a.trim_start_matches("tcp://").to_string());
        }
    }
    if r.status.port > 0 {
        for ip in [&r.status.storage_ip, &r.status.ip] {
            if !ip.is_empty() {
                out.push(format!("{ip}:{}", r.status.port));
            }
        }
    }
    out
}

fn parse_time(s: &str) -> Option<SystemTime> {
    s.parse::<jiff::Timestamp>().ok().map(SystemTime::from)
}

/// A coarse duration for messages: `45s`, `37m`, `5h`, `3d` (rounded down).
pub fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// How long before `now` a time was (zero when it is in the future).
fn age(now: SystemTime, t: SystemTime) -> Duration {
    now.duration_since(t).unwrap_or(Duration::ZERO)
}

/// Formats a time as RFC 3339 UTC to the second.
pub fn format_time(t: SystemTime) -> String {
    match jiff::Timestamp::try_from(t) {
        Ok(ts) => ts.round(jiff::Unit::Second).map(|t| t.to_string()).unwrap_or_else(|_| ts.to_string()),
        Err(_) => "an unknown time".to_string(),
    }
}

/// Since when a rebuild has not progressed, if that is longer than `stall_after`.
/// Watch views date each progress value as they see it change; for progress 0 the time the
/// replica entered `WO` (the engine's `replicaTransitionTimeMap`) bounds it too, which is
/// all a snapshot has.
fn stall_since(
    view: &ClusterView,
    engine: &Engine,
    address_key: &str,
    replica: Option<&str>,
    progress: i64,
    stall_after: Duration,
    now: SystemTime,
) -> Option<SystemTime> {
    let mut since: Option<SystemTime> = None;
    if view.freshness().source == Source::Watch {
        if let Some(mark) = view.rebuild_mark(engine.metadata.name.as_deref().unwrap_or(""), address_key) {
            if mark.progress == progress {
                since = Some(mark.since);
            }
        }
    }
    if progress == 0 {
        if let Some(name) = replica {
            let in_wo = engine.status.replica_mode_map.get(name).is_some_and(|m| m == "WO");
            if in_wo {
                if let Some(t) =
                    engine.status.replica_transition_time_map.get(name).and_then(|s| parse_time(s))
                {
                    since = Some(since.map_or(t, |s| s.min(t)));
                }
            }
        }
    }
    let since = since?;
    let age = now.duration_since(since).unwrap_or(Duration::ZERO);
    (age > stall_after).then_some(since)
}

fn rebuild_of(
    view: &ClusterView,
    engine: &Engine,
    r: &Replica,
    policy: &Policy,
    now: SystemTime,
) -> Option<Rebuild> {
    let addrs = replica_address(engine, r);
    let (key, rs) = engine
        .status
        .rebuild_status
        .iter()
        .find(|(k, rs)| rs.is_rebuilding && addrs.iter().any(|a| k.trim_start_matches("tcp://") == a))?;
    let stalled_since = stall_since(
        view,
        engine,
        key,
        r.metadata.name.as_deref(),
        rs.progress,
        policy.drain.stall_after,
        now,
    );
    let storage_net = view.setting(STORAGE_NETWORK_SETTING).is_some_and(|s| !s.trim().is_empty());
    let no_storage_network =
        storage_net && !r.status.storage_ip.is_empty() && r.status.storage_ip == r.status.ip;
    Some(Rebuild { progress: rs.progress, stalled_since, no_storage_network })
}

/// Every rebuild in the view stalled longer than `drain.stallAfter`, for the metric.
pub fn stalled_rebuilds(view: &ClusterView, policy: &Policy, now: SystemTime) -> Vec<StalledRebuild> {
    let mut out = Vec::new();
    for engine in view.engines_rebuilding() {
        let volume = engine.volume().unwrap_or("").to_string();
        for (key, rs) in &engine.status.rebuild_status {
            if !rs.is_rebuilding {
                continue;
            }
            let addr = key.trim_start_matches("tcp://");
            let replica = view
                .replicas_of_volume(&volume)
                .find(|r| replica_address(engine, r).iter().any(|a| a == addr))
                .and_then(|r| r.metadata.name.clone())
                .or_else(|| {
                    engine
                        .status
                        .current_replica_address_map
                        .iter()
                        .find(|(_, a)| a.trim_start_matches("tcp://") == addr)
                        .map(|(n, _)| n.clone())
                });
            if let Some(since) =
                stall_since(view, engine, key, replica.as_deref(), rs.progress, policy.drain.stall_after, now)
            {
                out.push(StalledRebuild {
                    volume: volume.clone(),
                    engine: engine.metadata.name.as_deref().unwrap_or_default().to_string(),
                    replica: replica.map(String::from),
                    progress: rs.progress,
                    since,
                });
            }
        }
    }
    out
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

/// The reason and remedy for a volume whose data on `node` has no protecting copy elsewhere.
fn stranded_reason(
    node: &str,
    vol: Option<&Volume>,
    facts: &[ReplicaFacts],
    at_risk: &[&&ReplicaFacts],
) -> (String, String) {
    let others: Vec<&ReplicaFacts> = facts.iter().filter(|f| !f.report.on_node).collect();
    let number = vol.map(|v| v.spec.number_of_replicas);
    let detached = vol.is_some_and(|v| v.status.state == "detached");
    let healthy_here = at_risk.iter().filter(|f| is_available_healthy(f.replica)).count();
    let lead = match (healthy_here, at_risk) {
        (1, _) => format!("last healthy replica is on {node}"),
        (h, _) if h > 1 => format!("all {h} healthy replicas are on {node}"),
        (_, [one]) => format!("only copy of its data is on {node} (replica {})", one.report.state),
        (_, many) => format!("only copies of its data are on {node} ({} replicas, none healthy)", many.len()),
    };

    if others.is_empty() {
        let n = facts.len();
        let reason = match number {
            Some(1) if n == 1 => "1 replica (numberOfReplicas=1)".to_string(),
            Some(nr) if n == 1 => format!("{lead}; no other replica exists (numberOfReplicas={nr})"),
            None if n == 1 => format!("{lead}; no other replica exists"),
            Some(nr) => format!("{lead}; all {n} of its replicas are on {node} (numberOfReplicas={nr})"),
            None => format!("{lead}; all {n} of its replicas are on {node}"),
        };
        let remedy = match number {
            _ if n > 1 => {
                format!("evict the replicas on {node} in Longhorn (node or disk eviction) and wait for the rebuild elsewhere")
            }
            Some(nr) if nr <= 1 && detached => {
                "raise numberOfReplicas to 2 or more and attach it until the rebuild is done".to_string()
            }
            Some(nr) if nr <= 1 => "raise numberOfReplicas to 2 or more and wait for the rebuild".to_string(),
            _ if detached => "attach it so Longhorn rebuilds the missing replicas, then wait".to_string(),
            _ => "wait for Longhorn to rebuild the missing replicas".to_string(),
        };
        return (reason, remedy);
    }

    // Other replicas with the same reason share one clause: "its replicas on a, b each ...".
    // Replicas without a node form their own clause, so no node name is ever empty.
    let mut groups: Vec<(bool, WhyNotText, Vec<&str>)> = Vec::new();
    for f in &others {
        let why = WhyNotText::of(f.why_not.as_ref());
        let unplaced = f.node.is_empty();
        match groups.iter_mut().find(|(u, w, _)| *u == unplaced && *w == why) {
            Some((_, _, nodes)) => nodes.push(f.node.as_str()),
            None => groups.push((unplaced, why, vec![f.node.as_str()])),
        }
    }
    let mut parts = vec![lead];
    const SHOWN: usize = 2;
    for (unplaced, why, nodes) in groups.iter().take(SHOWN) {
        parts.push(replica_clause(*unplaced, why, nodes));
    }
    let hidden: usize = groups.iter().skip(SHOWN).map(|(_, _, n)| n.len()).sum();
    if hidden > 0 {
        parts.push(format!("and {hidden} more replica{}", if hidden == 1 { "" } else { "s" }));
    }
    // The remedy follows the most hopeful other replica.
    let remedy = if others.iter().any(|f| f.rebuild.as_ref().is_some_and(|rb| rb.stalled_since.is_none())) {
        "wait for the rebuild".to_string()
    } else if let Some(f) =
        others.iter().find(|f| f.rebuild.as_ref().is_some_and(|rb| rb.stalled_since.is_some()))
    {
        if f.rebuild.as_ref().is_some_and(|rb| rb.no_storage_network) {
            "restart its instance manager (no storage network)".to_string()
        } else {
            "check its engine and instance manager".to_string()
        }
    } else if let Some(f) = others.iter().find(|f| f.why_not == Some(WhyNot::CordonedNode)) {
        format!("uncordon {} or wait for a rebuild on a schedulable node", f.node)
    } else if let Some(f) =
        others.iter().find(|f| f.why_not.as_ref().is_some_and(WhyNot::is_instance_manager))
    {
        format!("wait until the instance manager on {} is running", f.node)
    } else if detached {
        "attach the volume so Longhorn rebuilds a healthy replica elsewhere, then wait".to_string()
    } else {
        "wait for Longhorn to rebuild a healthy replica elsewhere".to_string()
    };
    (parts.join("; "), remedy)
}

/// A [`WhyNot`] as grouped in a sentence ("does not protect it" when there is none).
#[derive(Clone, Debug, PartialEq, Eq)]
struct WhyNotText {
    no_node: bool,
    text: String,
}

impl WhyNotText {
    fn of(why: Option<&WhyNot>) -> Self {
        Self {
            no_node: why == Some(&WhyNot::NoNode),
            text: why.map_or_else(|| "does not protect it".to_string(), ToString::to_string),
        }
    }
}

/// One clause about replicas elsewhere that share a reason: `its replica on a failed 2m ago`,
/// `its replicas on a, b each ...`, `its 3 replicas on a, b each ...` (several on one node),
/// `its replica with no node ...`, `its 2 replicas have no node`.
fn replica_clause(unplaced: bool, why: &WhyNotText, nodes: &[&str]) -> String {
    let n = nodes.len();
    if unplaced {
        return match (n, why.no_node) {
            (1, true) => "its replica has no node".to_string(),
            (_, true) => format!("its {n} replicas have no node"),
            (1, false) => format!("its replica with no node {}", why.text),
            _ => format!("its {n} replicas with no node each {}", why.text),
        };
    }
    let distinct: Vec<&str> = nodes.iter().copied().collect::<BTreeSet<&str>>().into_iter().collect();
    match (n, distinct.len()) {
        (1, _) => format!("its replica on {} {}", distinct.join(", "), why.text),
        (_, d) if d == n => format!("its replicas on {} each {}", distinct.join(", "), why.text),
        _ => format!("its {n} replicas on {} each {}", distinct.join(", "), why.text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
