//! The Volume rule: `numberOfReplicas` (or the default it stands for) against the minimum
//! for the Volume's namespace, the nodes that can take its replicas, and strict-local data.

use super::default_count::LONGHORN_RANGE;
use super::wording::tolerates;
use super::{decide, go_bool, object_name, view_default, Finding, DEFAULT_REPLICA_COUNT};
use crate::admission::AdmissionRequest;
use crate::cluster::{ClusterView, Volume};
use crate::decision::Decision;
use crate::policy::Policy;

/// The minimum for a Volume: its PVC namespace's override, else `replicas.minimum`.
struct VolumeMinimum {
    value: i64,
    /// Where it comes from, as messages name it: `policy minimum`, `namespace prod minimum`.
    source: String,
    /// Why an override this Volume does not show might allow a lower count (then a count
    /// below the minimum is warned about, not denied); `None` when none can.
    uncertain: Option<&'static str>,
}

/// A Volume that Longhorn's CSI driver creates names no namespace until Longhorn fills in its
/// status, and never names its StorageClass (that is on its PersistentVolume): while an
/// override it cannot show could allow its count, the minimum is not certain (the
/// StorageClass was checked against its own minimum when it was created).
fn volume_minimum(policy: &Policy, volume: &Volume) -> VolumeMinimum {
    let r = &policy.replicas;
    let ns = volume.status.kubernetes_status.namespace.as_str();
    let (value, source) = match r.namespace_minimums.get(ns) {
        Some(&m) if !ns.is_empty() => (m, format!("namespace {ns} minimum")),
        _ => (r.minimum, "policy minimum".to_string()),
    };
    let below = |overrides: &std::collections::BTreeMap<String, u32>| overrides.values().any(|&l| l < value);
    let uncertain = if ns.is_empty() {
        (below(&r.namespace_minimums) || below(&r.storage_class_minimums))
            .then_some("namespace not known yet")
    } else {
        below(&r.storage_class_minimums).then_some("its StorageClass is not known here")
    };
    VolumeMinimum { value: i64::from(value), source, uncertain }
}

/// True when the request lowers a count to `new`: a CREATE, or an UPDATE whose old count
/// (`old`, `None` without an old object) is higher or unset.
fn lowers(new: i64, old: Option<i64>) -> bool {
    old.is_none_or(|o| o <= 0 || o > new)
}

/// `volumes.longhorn.io` CREATE/UPDATE of `vol` (`old`: an UPDATE's old object).
pub fn volume(
    req: &AdmissionRequest,
    vol: &Volume,
    old: Option<&Volume>,
    view: &ClusterView,
    policy: &Policy,
) -> Decision {
    let unchanged = old.is_some_and(|o| {
        (o.spec.number_of_replicas, &o.spec.data_engine, &o.spec.data_locality)
            == (vol.spec.number_of_replicas, &vol.spec.data_engine, &vol.spec.data_locality)
    });
    if super::trusted_rewrite(req, policy, unchanged) {
        return Decision::allow().rule("replicas");
    }
    let name = object_name(req, &vol.metadata).to_string();
    let minimum = volume_minimum(policy, vol);
    let (min, source) = (minimum.value, &minimum.source);
    let engine = if vol.spec.data_engine.is_empty() { "v1" } else { vol.spec.data_engine.as_str() };
    let set = vol.spec.number_of_replicas;
    let lowered = lowers(set, old.map(|o| o.spec.number_of_replicas));
    let mut findings = Vec::new();
    let mut say = |text: String, short: String, deniable: bool, field: &'static str| {
        findings.push(Finding::about(field, "volume", &name, &text, &short, deniable))
    };
    let count = if set == 0 {
        match view_default(view, engine) {
            Ok(Some(n)) => {
                if n < min {
                    say(
                        format!("numberOfReplicas=0 means {DEFAULT_REPLICA_COUNT} {engine}={n}; {source} is {min}"),
                        format!("numberOfReplicas=0 means {engine}={n}; minimum {min}"),
                        false,
                        "spec.numberOfReplicas",
                    );
                }
                Some(n)
            }
            Ok(None) | Err(_) => {
                say(
                    format!("numberOfReplicas=0 means {DEFAULT_REPLICA_COUNT}, not known here; not checked"),
                    "numberOfReplicas=0: default unknown, not checked".into(),
                    false,
                    "spec.numberOfReplicas",
                );
                None
            }
        }
    } else if !LONGHORN_RANGE.contains(&set) {
        say(
            format!("numberOfReplicas={set} is not a count in 1..20; not checked"),
            format!("numberOfReplicas={set} not in 1..20"),
            false,
            "spec.numberOfReplicas",
        );
        None
    } else {
        match minimum.uncertain {
            _ if set >= min => {}
            None => say(
                format!("numberOfReplicas={set} {}; {source} is {min}", tolerates(set)),
                format!("numberOfReplicas={set} {}; minimum {min}", tolerates(set)),
                lowered,
                "spec.numberOfReplicas",
            ),
            Some(why) => say(
                format!(
                    "numberOfReplicas={set} {}; {source} is {min} unless an override applies ({why})",
                    tolerates(set)
                ),
                format!("numberOfReplicas={set}; minimum {min} unless overridden"),
                false,
                "spec.numberOfReplicas",
            ),
        }
        Some(set)
    };
    if let Some(n) = count {
        let soft_anti_affinity = view.setting("replica-soft-anti-affinity").and_then(go_bool) == Some(true);
        if view.longhorn_nodes().next().is_some() && !soft_anti_affinity {
            let usable = view.longhorn_nodes().filter(|n| n.can_take_replica()).count() as i64;
            // A healthy volume has every replica placed already (on nodes that stopped taking
            // replicas since): the risk is the replacement of one it loses.
            if n > usable && vol.status.robustness == "healthy" {
                say(
                    format!(
                        "numberOfReplicas={n} > {usable} schedulable nodes; a lost replica has no node to rebuild on"
                    ),
                    format!("numberOfReplicas={n} > {usable} schedulable nodes: no spare node"),
                    false,
                    "spec.numberOfReplicas",
                );
            } else if n > usable {
                say(
                    format!(
                        "numberOfReplicas={n} > {usable} schedulable nodes; {} cannot be placed: degraded",
                        crate::decision::count(usize::try_from(n - usable).unwrap_or(0), "replica")
                    ),
                    format!("numberOfReplicas={n} > {usable} schedulable nodes: {} unplaceable", n - usable),
                    false,
                    "spec.numberOfReplicas",
                );
            }
        }
    }
    if vol.spec.data_locality == "strict-local" {
        say(
            "strict-local keeps 1 replica; every drain of its node will block".into(),
            "strict-local: every drain of its node will block".into(),
            false,
            "spec.dataLocality",
        );
    }
    decide(findings, policy, req, &name)
}
