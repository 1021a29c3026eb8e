//! `replica-count`, `volume-health`, `settings` and `drain-readiness`: the webhook's own rules
//! applied to what is already in the cluster.

use std::time::SystemTime;

use serde_json::{json, Value};

use super::super::finding::{some_names, Check, Finding, Severity};
use super::super::inventory::{Inventory, VolumeInfo};
use super::super::ViewAccess;
use crate::admission::{AdmissionRequest, GroupVersionResource};
use crate::cluster::{ClusterView, LONGHORN_NAMESPACE};
use crate::decision::Decision;
use crate::policy::drain::{override_reason, stalled_rebuilds, waits_for, Blockers, StalledRebuild};
use crate::policy::replicas::{self, PREFIX};
use crate::policy::{self, DrainAction, Policy};

/// Volumes named in one drain-readiness line before "and N more".
const SHOWN: usize = 3;

/// Objects decided per hold of the view ([`ViewAccess`]): a few milliseconds at most.
const DECIDED_AT_ONCE: usize = 32;

/// A dry-run CREATE of `object`, as `lint` builds them.
fn create(group: &str, version: &str, kind: &str, resource: &str, object: Value) -> AdmissionRequest {
    let resource =
        GroupVersionResource { group: group.into(), version: version.into(), resource: resource.into() };
    AdmissionRequest::dry_run_create("check-cluster", "longhorn-guard-check", resource, kind, object)
}

fn volume_object(v: &VolumeInfo) -> Value {
    json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
        "metadata": {"name": v.metadata.name, "namespace": LONGHORN_NAMESPACE},
        "spec": {"numberOfReplicas": v.spec.number_of_replicas, "dataEngine": v.spec.data_engine,
                 "dataLocality": v.spec.data_locality},
        "status": {"robustness": v.status.robustness,
                   "kubernetesStatus": {"namespace": v.status.kubernetes_status.namespace}}})
}

/// What to do about one replica-rule message, by what it says.
fn replica_remedy(message: &str, min: u32) -> String {
    if message.contains("schedulable nodes") {
        "make more nodes schedulable (uncordon, allow scheduling) or lower numberOfReplicas".into()
    } else if message.contains("strict-local") {
        "use dataLocality best-effort with 2 or more replicas, or accept that drains of its node block".into()
    } else if message.contains("not checked") || message.contains("cannot read") {
        "set a readable replica count (1..20)".into()
    } else {
        // The minimum the rule applied (an override's, where one applies).
        let stated = message
            .split_once("minimum is ")
            .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse::<u32>().ok());
        format!(
            "raise the replica count to {} (the policy minimum) or accept the trade-off",
            stated.unwrap_or(min)
        )
    }
}

/// Findings of one rule decision about `object`: a denial is an error, warnings are warnings.
fn from_decision(object: String, min: u32, d: Result<Decision, crate::policy::RuleError>) -> Vec<Finding> {
    let strip = |s: &str| s.strip_prefix(PREFIX).unwrap_or(s).to_string();
    let f = |severity, message: String| {
        let remedy = replica_remedy(&message, min);
        Check::ReplicaCount.finding(severity, object.clone(), message, remedy)
    };
    match d {
        Err(e) => vec![f(Severity::Error, format!("cannot be read: {e}"))],
        Ok(d) if !d.allowed => {
            let msg = d.status.as_ref().map(|s| s.message.as_str()).unwrap_or("denied by policy");
            vec![f(Severity::Error, strip(msg))]
        }
        Ok(d) => d.warnings.iter().map(|w| f(Severity::Warning, strip(w))).collect(),
    }
}

/// `replica-count`: the replica rules over every Volume, StorageClass and the
/// `default-replica-count` Setting, each asked as the webhook asks it.
pub fn replica_count(
    inv: &Inventory,
    view: &impl ViewAccess,
    policy: &Policy,
    now: SystemTime,
) -> Vec<Finding> {
    let settings = inv.setting_objects.iter().filter(|s| {
        s.pointer("/metadata/name").and_then(Value::as_str) == Some(replicas::DEFAULT_REPLICA_COUNT)
    });
    let settings = settings.map(|s| {
        let req = create("longhorn.io", "v1beta2", "Setting", "settings", s.clone());
        (format!("setting/{}", replicas::DEFAULT_REPLICA_COUNT), req)
    });
    let classes = inv.storage_classes.iter().map(|sc| {
        let name = sc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        let req = create("storage.k8s.io", "v1", "StorageClass", "storageclasses", sc.clone());
        (format!("storageclass/{name}"), req)
    });
    let volumes = inv.volumes.iter().map(|v| {
        let req = create("longhorn.io", "v1beta2", "Volume", "volumes", volume_object(v));
        (format!("volume/{}", v.metadata.name), req)
    });
    let min = policy.replicas.minimum;
    let mut requests = settings.chain(classes).chain(volumes).peekable();
    let mut out = Vec::new();
    while requests.peek().is_some() {
        // Built outside the view, decided under it a few at a time.
        let some: Vec<_> = requests.by_ref().take(DECIDED_AT_ONCE).collect();
        view.with(|view| {
            for (object, req) in some {
                out.extend(from_decision(object, min, policy::decide(&req, view, policy, now)));
            }
        });
    }
    out
}

/// `volume-health`: degraded and faulted volumes, and stalled rebuilds with the
/// storage-network hint when the rebuilding replica has no storage-network address.
pub fn volume_health(
    inv: &Inventory,
    view: &impl ViewAccess,
    policy: &Policy,
    now: SystemTime,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for v in &inv.volumes {
        let name = &v.metadata.name;
        let object = format!("volume/{name}");
        match v.status.robustness.as_str() {
            "faulted" => out.push(Check::VolumeHealth.finding(
                Severity::Error,
                object,
                format!(
                    "{name} is faulted: no healthy replica serves it (state {})",
                    or_unknown(&v.status.state)
                ),
                "salvage it from Longhorn's UI (Volume > Salvage) or restore it from a backup",
            )),
            "degraded" => out.push(Check::VolumeHealth.finding(
                Severity::Warning,
                object,
                format!(
                    "{name} is degraded: fewer healthy replicas than numberOfReplicas={}",
                    v.spec.number_of_replicas
                ),
                "wait for the rebuild; if it does not progress see the stalled-rebuild findings",
            )),
            _ => {}
        }
    }
    view.with(|view| {
        let network = view.setting("storage-network").unwrap_or("").trim().to_string();
        for s in stalled_rebuilds(view, policy, now) {
            out.push(stalled(view, &s, &network));
        }
    });
    out
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() {
        "unknown"
    } else {
        s
    }
}

fn stalled(view: &ClusterView, s: &StalledRebuild, network: &str) -> Finding {
    let since = crate::policy::drain::format_time(s.since);
    let replica = s.replica.as_deref().and_then(|n| view.replica(n));
    let who = s.replica.as_deref().map(|r| format!("replica {r}")).unwrap_or_else(|| "a replica".into());
    let node = replica.and_then(|r| r.node()).unwrap_or("");
    let no_network = !network.is_empty()
        && replica.is_some_and(|r| r.status.storage_ip.is_empty() || r.status.storage_ip == r.status.ip);
    let (hint, remedy) = if no_network {
        (
            format!("; its storage IP is the pod IP, so its instance manager started without the storage network {network}"),
            format!("delete the instance-manager pod on {} so Longhorn recreates it with the storage network", or_unknown(node)),
        )
    } else {
        (
            String::new(),
            "check the engine's and instance managers' logs; restart the rebuild if it stays".to_string(),
        )
    };
    Check::VolumeHealth.finding(
        Severity::Error,
        format!("volume/{}", s.volume),
        format!("{}: rebuild of {who} stuck at {}% since {since}{hint}", s.volume, s.progress),
        remedy,
    )
}

/// `settings`: Longhorn settings that weaken protection.
pub fn settings(inv: &Inventory, policy: &Policy) -> Vec<Finding> {
    let mut out = Vec::new();
    let get = |n: &str| inv.settings.get(n).map(|v| v.trim());
    match get("node-drain-policy") {
        Some("always-allow") => {
            let ours = match policy.drain.action {
                DrainAction::Enforce => "longhorn-guard (drain.action=enforce) is the only protection",
                _ => "and longhorn-guard's drain.action is not enforce: nothing blocks them",
            };
            out.push(Check::Settings.finding(
                if policy.drain.action == DrainAction::Enforce { Severity::Warning } else { Severity::Error },
                "setting/node-drain-policy",
                format!("node-drain-policy=always-allow: Longhorn lets drains take a volume's last replica; {ours}"),
                "set node-drain-policy to block-if-contains-last-replica",
            ));
        }
        Some("allow-if-replica-is-stopped") => out.push(Check::Settings.finding(
            Severity::Info,
            "setting/node-drain-policy",
            "node-drain-policy=allow-if-replica-is-stopped: Longhorn lets drains take the last replica of detached volumes",
            "keep drain.protectStoppedReplicas=true so longhorn-guard still protects them",
        )),
        _ => {}
    }
    if let Some(net) = get("storage-network").filter(|v| !v.is_empty()) {
        let valid =
            net.split_once('/').is_some_and(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'));
        if !valid {
            out.push(Check::Settings.finding(
                Severity::Error,
                "setting/storage-network",
                format!("storage-network={net:?} is not <namespace>/<name>"),
                "set it to the NetworkAttachmentDefinition as <namespace>/<name>, or empty",
            ));
        } else if !policy.gate.enabled {
            out.push(Check::Settings.finding(
                Severity::Warning,
                "setting/storage-network",
                format!("storage-network={net} and gate.enabled=false: an instance manager that starts before Multus falls back to the pod IP"),
                "enable the init gate (gate.enabled: true)",
            ));
        }
    }
    let soft = get("replica-soft-anti-affinity");
    if let Some(v) = soft.filter(|v| crate::policy::replicas::go_bool(v) == Some(true)) {
        out.push(Check::Settings.finding(
            Severity::Warning,
            "setting/replica-soft-anti-affinity",
            format!("replica-soft-anti-affinity={v}: replicas of a volume may share a node, and one drain takes them together"),
            "set it to false unless there are fewer nodes than replicas",
        ));
    }
    out
}

/// How many volumes a drain of one node would wait for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReadiness {
    pub node: String,
    pub blocking: usize,
}

/// `drain-readiness`: one line per Longhorn node, and the counts behind them.
pub fn drain_readiness(
    inv: &Inventory,
    view: &impl ViewAccess,
    policy: &Policy,
) -> (Vec<Finding>, Vec<NodeReadiness>) {
    let mut nodes: Vec<&str> = inv.nodes.iter().map(|n| n.metadata.name.as_str()).collect();
    nodes.sort_unstable();
    let mut findings = Vec::new();
    let mut counts = Vec::new();
    for node in nodes {
        // One node at a time under the view.
        let (volumes, entries, blocking) = view.with(|view| {
            let node_override = view.node(node).and_then(|n| override_reason(&n.metadata));
            let b = Blockers::of(view, node, policy, node_override);
            let blocking: Vec<String> = b
                .blocking
                .iter()
                .map(|v| v.to_string())
                .chain(b.blocking_unmapped().map(|u| u.name.to_string()))
                .collect();
            (b.blocking.len(), b.blocking_unmapped().count(), blocking)
        });
        let blocking: Vec<&str> = blocking.iter().map(String::as_str).collect();
        counts.push(NodeReadiness { node: node.to_string(), blocking: blocking.len() });
        findings.push(if blocking.is_empty() {
            Check::DrainReadiness.finding(
                Severity::Info,
                format!("node/{node}"),
                format!("{node}: can be drained now"),
                "",
            )
        } else {
            Check::DrainReadiness.finding(
                Severity::Warning,
                format!("node/{node}"),
                format!(
                    "{node}: a drain would wait for {} ({})",
                    waits_for(volumes, entries),
                    some_names(&blocking, SHOWN)
                ),
                format!("longhorn-guard check drain {node} shows each volume and its remedy"),
            )
        });
    }
    (findings, counts)
}
