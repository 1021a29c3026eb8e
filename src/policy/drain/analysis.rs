//! The drain computation: what taking node N's instance managers away would do to each
//! volume that has a replica or an engine on N. Pure: `(view, node, policy, now)` in, a
//! [`NodeAnalysis`] out. The eviction rule, node deletion, cordon warnings and
//! `check drain` all read the same analysis, so they always say the same thing.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::cluster::{annotation, ClusterView, Engine, InstanceManager, Replica, Source, Volume};
use crate::policy::Policy;

/// Annotation on a Longhorn Volume (that volume) or a Kubernetes Node (every volume on it)
/// that lets a drain proceed although it would strand data. Its value is the reason; an
/// empty value does not count.
pub const ALLOW_DRAIN_ANNOTATION: &str = "longhorn-guard.io/allow-drain";

/// The Longhorn setting naming the storage network (`<ns>/<nad>` or empty).
const STORAGE_NETWORK_SETTING: &str = "storage-network";

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
    /// `reason; remedy` as one line.
    pub fn line(&self) -> String {
        if self.remedy.is_empty() {
            format!("{}: {}", self.volume, self.reason)
        } else {
            format!("{}: {}; {}", self.volume, self.reason, self.remedy)
        }
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

    /// True when a drain would have to wait.
    pub fn would_block(&self) -> bool {
        self.blocking().next().is_some()
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

/// The override reason in an object's annotations, if set and not blank.
pub fn override_reason(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<String> {
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
    for name in engines_in_instance_managers(view, node) {
        if let Some(v) = volume_of_engine(view, &name) {
            names.insert(v);
        }
    }
    let node_override =
        node_override.map(|r| format!("node {node} annotation {ALLOW_DRAIN_ANNOTATION}: {r}"));
    let volumes =
        names.iter().map(|v| analyze_volume(view, node, v, policy, now, node_override.as_deref())).collect();
    NodeAnalysis {
        node: node.to_string(),
        known: view.node(node).is_some() || view.longhorn_node(node).is_some(),
        node_override,
        volumes,
    }
}

/// Engine names that the instance managers on `node` report running
/// (`status.instanceEngines` and `status.instanceEngineFrontends`), as Longhorn's own
/// "all volumes detached from node" check reads them.
fn engines_in_instance_managers(view: &ClusterView, node: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for im in view.instance_managers_on_node(node) {
        if matches!(im.spec.type_.as_str(), "replica") {
            continue;
        }
        out.extend(im.status.instance_engines.keys().cloned());
        out.extend(im.status.instance_engine_frontends.keys().cloned());
    }
    out
}

/// The volume of an engine by name: from the Engine object, else from Longhorn's naming
/// `<volume>-e-<n>`.
fn volume_of_engine(view: &ClusterView, engine: &str) -> Option<String> {
    if let Some(v) = view.engine(engine).and_then(Engine::volume) {
        return Some(v.to_string());
    }
    let (vol, n) = engine.rsplit_once("-e-")?;
    (!vol.is_empty() && !n.is_empty()).then(|| vol.to_string())
}

fn is_attached_state(state: &str) -> bool {
    matches!(state, "attached" | "attaching" | "detaching")
}

/// True when an engine of `volume` runs on `node`.
fn attached_on(view: &ClusterView, node: &str, volume: &str, vol: Option<&Volume>) -> Option<String> {
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
    let in_im = engines_in_instance_managers(view, node);
    if in_im.iter().any(|e| volume_of_engine(view, e).as_deref() == Some(volume)) {
        return Some("engine running in its instance manager".to_string());
    }
    None
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
/// its node for its data engine.
fn instance_manager_of<'a>(view: &'a ClusterView, r: &Replica) -> Option<&'a InstanceManager> {
    if !r.status.instance_manager_name.is_empty() {
        if let Some(im) = view.instance_manager(&r.status.instance_manager_name) {
            return Some(im);
        }
    }
    let node = r.node()?;
    let engine = if r.spec.data_engine.is_empty() { "v1" } else { r.spec.data_engine.as_str() };
    view.instance_managers_on_node(node).find(|im| {
        let im_engine = if im.spec.data_engine.is_empty() { "v1" } else { im.spec.data_engine.as_str() };
        im_engine == engine && matches!(im.spec.type_.as_str(), "aio" | "replica" | "")
    })
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
    for engine in view.engines() {
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
                    engine: engine.metadata.name.clone().unwrap_or_default(),
                    replica,
                    progress: rs.progress,
                    since,
                });
            }
        }
    }
    out
}

/// Describes a rebuild: `rebuilding (37%)` or `rebuilding, stalled at 0% since T`.
fn rebuild_phrase(rb: &Rebuild) -> String {
    match rb.stalled_since {
        Some(t) => format!("is rebuilding, stalled at {}% since {}", rb.progress, format_time(t)),
        None => format!("is rebuilding ({}%)", rb.progress),
    }
}

/// The per-replica facts the verdict needs.
struct ReplicaFacts<'a> {
    replica: &'a Replica,
    node: String,
    rebuild: Option<Rebuild>,
    report: ReplicaReport,
}

fn analyze_volume(
    view: &ClusterView,
    node: &str,
    volume: &str,
    policy: &Policy,
    now: SystemTime,
    node_override: Option<&str>,
) -> VolumeReport {
    let vol = view.volume(volume);
    let engine = view.engine_of(volume);
    let attached = vol.map(|v| is_attached_state(&v.status.state)).unwrap_or(false)
        || engine.is_some_and(|e| e.status.current_state == "running");
    let detached = vol.is_some_and(|v| v.status.state == "detached");
    let attached_here = attached_on(view, node, volume, vol);

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
        let engine_phrase = if how.starts_with("engine ") && how.ends_with(" running") {
            "engine running".to_string()
        } else {
            how.clone()
        };
        reason = format!("attached to {node} ({engine_phrase})");
        if stranded {
            reason.push_str(" and holds its last healthy replica");
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
            format!("replica on {node} was never used")
        } else {
            format!(
                "replica on {node} is stopped and the volume detached (drain.protectStoppedReplicas: false)"
            )
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
        state: vol.map(|v| v.status.state.clone()).unwrap_or_default(),
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
    let name = r.metadata.name.clone().unwrap_or_default();
    let node = r.node().unwrap_or("").to_string();
    let on_node = node == drained;
    let live_engine = engine.filter(|_| attached);
    let mode = live_engine.and_then(|e| e.status.replica_mode_map.get(&name).cloned());
    let rebuild = live_engine.and_then(|e| rebuild_of(view, e, r, policy, now));
    let data = carries_data(r);

    // Why this replica cannot vouch for the volume (None = it protects).
    let why_not: Option<String> = if r.is_deleting() {
        Some("is being deleted".into())
    } else if !r.spec.failed_at.is_empty() {
        Some(format!("failed at {}", r.spec.failed_at))
    } else if let Some(rb) =
        rebuild.as_ref().filter(|_| r.spec.healthy_at.is_empty() || mode.as_deref() == Some("WO"))
    {
        Some(rebuild_phrase(rb))
    } else if mode.as_deref() == Some("WO") {
        Some("is rebuilding".into())
    } else if r.spec.healthy_at.is_empty() {
        Some(if data {
            "is being rebuilt and not yet healthy".into()
        } else {
            "has never been healthy".into()
        })
    } else if mode.as_deref() == Some("ERR") {
        Some("is in ERR mode".into())
    } else if on_node {
        None
    } else if node.is_empty() {
        Some("has no node".into())
    } else {
        match view.is_node_cordoned(&node) {
            None => Some("is on a node longhorn-guard does not see".into()),
            Some(true) => Some("is on a cordoned node".into()),
            Some(false) => match instance_manager_of(view, r) {
                None => Some("has no instance manager".into()),
                Some(im) if im.status.current_state != "running" => Some(format!(
                    "has no running instance manager (state {})",
                    if im.status.current_state.is_empty() {
                        "unknown"
                    } else {
                        im.status.current_state.as_str()
                    }
                )),
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
        why_not: if on_node { None } else { why_not },
    };
    ReplicaFacts { replica: r, node, rebuild, report }
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
    let healthy_here = at_risk.iter().any(|f| is_available_healthy(f.replica));
    let lead = if healthy_here {
        format!("last healthy replica is on {node}")
    } else {
        let state = at_risk.first().map(|f| f.report.state.as_str()).unwrap_or("unknown");
        format!("only copy of its data is on {node} (replica {state})")
    };

    if others.is_empty() {
        let n = facts.len();
        let reason = match number {
            Some(1) if n == 1 => "1 replica (numberOfReplicas=1)".to_string(),
            Some(nr) => format!("{lead}; no other replica exists (numberOfReplicas={nr})"),
            None => format!("{lead}; no other replica exists"),
        };
        let remedy = match number {
            Some(nr) if nr <= 1 && detached => {
                "raise numberOfReplicas to 2 or more and attach it until the rebuild is done".to_string()
            }
            Some(nr) if nr <= 1 => "raise numberOfReplicas to 2 or more and wait for the rebuild".to_string(),
            _ if detached => "attach it so Longhorn rebuilds the missing replicas, then wait".to_string(),
            _ => "wait for Longhorn to rebuild the missing replicas".to_string(),
        };
        return (reason, remedy);
    }

    let mut parts = vec![lead];
    const SHOWN: usize = 2;
    for f in others.iter().take(SHOWN) {
        let why = f.report.why_not.as_deref().unwrap_or("does not protect it");
        parts.push(format!("its replica on {} {why}", f.node));
    }
    if others.len() > SHOWN {
        parts.push(format!("and {} more replicas", others.len() - SHOWN));
    }
    // The remedy follows the most hopeful other replica.
    let remedy = if others.iter().any(|f| f.rebuild.as_ref().is_some_and(|rb| rb.stalled_since.is_none())) {
        "wait for the rebuild".to_string()
    } else if let Some(f) =
        others.iter().find(|f| f.rebuild.as_ref().is_some_and(|rb| rb.stalled_since.is_some()))
    {
        if f.rebuild.as_ref().is_some_and(|rb| rb.no_storage_network) {
            format!(
                "the instance manager on {} started without the storage network; restart it once Multus is ready",
                f.node
            )
        } else {
            format!("the rebuild on {} is stalled; check its engine and instance manager", f.node)
        }
    } else if let Some(f) =
        others.iter().find(|f| f.report.why_not.as_deref() == Some("is on a cordoned node"))
    {
        format!("uncordon {} or wait for a rebuild on a schedulable node", f.node)
    } else if let Some(f) =
        others.iter().find(|f| f.report.why_not.as_deref().is_some_and(|w| w.contains("instance manager")))
    {
        format!("wait until the instance manager on {} is running", f.node)
    } else if detached {
        "attach the volume so Longhorn rebuilds a healthy replica elsewhere, then wait".to_string()
    } else {
        "wait for Longhorn to rebuild a healthy replica on another node".to_string()
    };
    (parts.join("; "), remedy)
}
