//! Replica-count rules for Settings, Volumes and StorageClasses (`rule: replicas`).
//!
//! Below the policy minimum a rule warns (`replicas.action: warn`) or denies with 422
//! `Invalid` and a field cause (`replicas.action: deny`). A deny only applies to a count the
//! request lowers: a CREATE, or an UPDATE to a lower count than the old object's. An UPDATE
//! that keeps or raises an already-low count (a label, a finalizer, Longhorn's own
//! controllers, a step towards the minimum) is warned about, never denied, so existing
//! objects stay manageable. Values longhorn-guard cannot read are
//! Longhorn's to reject: they are allowed with a warning saying what could not be read.

mod default_count;
mod wording;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::admission::{AdmissionRequest, Operation};
use crate::cluster::{ClusterView, StorageClass, Volume};
use crate::decision::{Cause, Decision, Subject};
use crate::policy::{object, typed, Policy, ReplicaAction, RuleError};
use default_count::LONGHORN_RANGE;
pub use default_count::{parse_default_count, suggested_count, DefaultCount};
pub use wording::{about, clip_middle, trade_off};
use wording::{quoted, tolerates};

/// Who speaks, at the start of every warning and denial message.
pub const PREFIX: &str = "longhorn-guard: ";
/// The Longhorn setting holding the default replica count.
pub const DEFAULT_REPLICA_COUNT: &str = "default-replica-count";
/// The CSI provisioner name of Longhorn StorageClasses.
pub const LONGHORN_PROVISIONER: &str = "driver.longhorn.io";

/// One thing a rule found.
#[derive(Debug)]
struct Finding {
    /// The field a denial names (`value`, `spec.numberOfReplicas`, ...).
    field: &'static str,
    text: String,
    /// The same with the name unclipped, for a denial's message (no length limit there).
    full: String,
    /// A below-minimum count the request lowers (CREATE, or UPDATE below the old count): denied
    /// under `replicas.action: deny`. Every other finding stays a warning.
    deniable: bool,
}

impl Finding {
    fn new(field: &'static str, text: String, deniable: bool) -> Self {
        Self { field, full: text.clone(), text, deniable }
    }

    /// About a named object: the warning keeps the name whole and falls back to the `short`
    /// text to fit; the denial keeps both whole.
    fn about(
        field: &'static str,
        subject: &str,
        name: &str,
        text: &str,
        short: &str,
        deniable: bool,
    ) -> Self {
        Self {
            field,
            text: about(subject, name, text, short),
            full: format!("{PREFIX}{subject} {name}: {text}"),
            deniable,
        }
    }
}

/// Builds the decision: warnings, or under `deny` a 422 for the deniable findings (the
/// others ride along as warnings), naming the request's object (`name`) by its kind.
fn decide(findings: Vec<Finding>, policy: &Policy, req: &AdmissionRequest, name: &str) -> Decision {
    let deny = policy.replicas.action == ReplicaAction::Deny && findings.iter().any(|f| f.deniable);
    if !deny {
        return Decision::warn(findings.into_iter().map(|f| f.text).collect()).rule("replicas");
    }
    let (denied, warned): (Vec<Finding>, Vec<Finding>) = findings.into_iter().partition(|f| f.deniable);
    let message = denied.iter().map(|f| f.full.as_str()).collect::<Vec<_>>().join("; ");
    let mut d = Decision::invalid(denied[0].field, message);
    if let Some(st) = d.status.as_mut() {
        st.causes = denied
            .iter()
            .map(|f| Cause {
                type_: "FieldValueInvalid".into(),
                field: f.field.into(),
                message: f.full.clone(),
            })
            .collect();
        st.subject = Some(Subject {
            group: req.kind.group.clone(),
            kind: req.kind.kind.clone(),
            name: name.to_string(),
        });
    }
    d.warnings = warned.into_iter().map(|f| f.text).collect();
    d.rule("replicas")
}

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
    fn below<'a>(min: u32, mut overrides: impl Iterator<Item = &'a u32>) -> bool {
        overrides.any(|&l| l < min)
    }
    let (value, source, uncertain) = match (ns, r.namespace_minimums.get(ns)) {
        ("", _) => {
            let all = r.namespace_minimums.values().chain(r.storage_class_minimums.values());
            (
                r.minimum,
                "policy minimum".to_string(),
                below(r.minimum, all).then_some("namespace not known yet"),
            )
        }
        (ns, Some(&m)) => {
            let why =
                below(m, r.storage_class_minimums.values()).then_some("its StorageClass is not known here");
            (m, format!("namespace {ns} minimum"), why)
        }
        (_, None) => {
            let why = below(r.minimum, r.storage_class_minimums.values())
                .then_some("its StorageClass is not known here");
            (r.minimum, "policy minimum".to_string(), why)
        }
    };
    VolumeMinimum { value: i64::from(value), source, uncertain }
}

/// The minimum for a StorageClass: its override by name, else `replicas.minimum`.
/// With where it comes from, as messages name it (`storageclass fast minimum`, `policy minimum`).
fn storage_class_minimum(policy: &Policy, name: &str) -> (i64, String) {
    match policy.replicas.storage_class_minimums.get(name) {
        Some(&m) => (i64::from(m), format!("storageclass {name} minimum")),
        None => (i64::from(policy.replicas.minimum), "policy minimum".to_string()),
    }
}

/// The object's `metadata.name`, else the request's name.
pub(crate) fn object_name<'a>(req: &'a AdmissionRequest, obj: &'a Value) -> &'a str {
    obj.pointer("/metadata/name").and_then(Value::as_str).filter(|n| !n.is_empty()).unwrap_or(req.name())
}

/// `settings.longhorn.io` CREATE/UPDATE of `default-replica-count` ([`crate::policy::settings::setting`]
/// routes every Setting; another name is allowed here without a finding).
pub fn setting(req: &AdmissionRequest, _view: &ClusterView, policy: &Policy) -> Result<Decision, RuleError> {
    let obj = object(req)?;
    let name = object_name(req, obj);
    if name != DEFAULT_REPLICA_COUNT {
        return Ok(Decision::allow());
    }
    let value = setting_value(obj)?;
    // The old counts, for an UPDATE: `None` for a CREATE or an unreadable old value.
    let old = match (req.operation, req.old_object.as_ref().filter(|o| !o.is_null())) {
        (Operation::Update, Some(o)) => setting_value(o).ok().and_then(|v| parse_default_count(v).ok()),
        _ => None,
    };
    let findings = match parse_default_count(value) {
        Err(why) => vec![Finding::new(
            "value",
            format!("{PREFIX}cannot read {DEFAULT_REPLICA_COUNT} {why}; not checked"),
            false,
        )],
        Ok(count) => default_count_findings(&count, policy.replicas.minimum, old.as_ref()),
    };
    Ok(decide(findings, policy, req, name))
}

/// A boolean setting as Longhorn reads it (Go's `strconv.ParseBool`): `1`, `t`, `T`, `TRUE`,
/// `true`, `True` and their false twins; anything else is `None`.
pub fn go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// `value` of a Setting object: a string, or missing (`""`).
pub(crate) fn setting_value(obj: &Value) -> Result<&str, RuleError> {
    match obj.get("value") {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(RuleError::Malformed { field: "object.value", message: "must be a string".into() }),
    }
}

/// True when the request lowers a count to `new`: a CREATE, or an UPDATE whose old object's
/// count (`old_count(old)`, `None` when unreadable) is higher or unknown.
fn lowers(req: &AdmissionRequest, new: i64, old_count: impl Fn(&Value) -> Option<i64>) -> bool {
    match (req.operation, req.old_object.as_ref().filter(|o| !o.is_null())) {
        (Operation::Update, Some(old)) => old_count(old).is_none_or(|o| o <= 0 || o > new),
        _ => true,
    }
}

/// One finding per distinct low count, naming every engine that has it. A finding is
/// deniable when the request lowers the count of one of its engines (`old`: the previous
/// counts of an UPDATE, `None` for a CREATE or an unreadable old value).
fn default_count_findings(count: &DefaultCount, minimum: u32, old: Option<&DefaultCount>) -> Vec<Finding> {
    let min = i64::from(minimum);
    let lowered = |engines: &[&str], n: i64| match old {
        None => true,
        Some(DefaultCount::Plain(o)) => *o > n,
        Some(o @ DefaultCount::PerEngine(_)) => engines.iter().any(|e| o.for_engine(e).is_none_or(|o| o > n)),
    };
    let groups: Vec<(String, i64, bool)> = match count {
        DefaultCount::Plain(n) => {
            let lower = match old {
                None => true,
                Some(DefaultCount::Plain(o)) => *o > *n,
                Some(DefaultCount::PerEngine(m)) => m.values().any(|o| o > n),
            };
            vec![(format!("{DEFAULT_REPLICA_COUNT}={n} (all engines)"), *n, lower)]
        }
        DefaultCount::PerEngine(map) => {
            let mut by_count: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
            for (engine, n) in map {
                by_count.entry(*n).or_default().push(engine);
            }
            by_count
                .into_iter()
                .map(|(n, engines)| {
                    let label = engines.iter().map(|e| format!("{e}={n}")).collect::<Vec<_>>().join(", ");
                    (format!("{DEFAULT_REPLICA_COUNT} {label}"), n, lowered(&engines, n))
                })
                .collect()
        }
    };
    groups
        .into_iter()
        .filter(|(_, n, _)| *n < min)
        .map(|(label, n, deniable)| {
            Finding::new(
                "value",
                format!("{PREFIX}{label}: {}; policy minimum is {min}", trade_off(n)),
                deniable,
            )
        })
        .collect()
}

/// The `default-replica-count` the view holds for a data engine: `Ok(Some(n))`,
/// `Ok(None)` when the view has no such setting, `Err` when its value is unreadable.
fn view_default(view: &ClusterView, engine: &str) -> Result<Option<i64>, String> {
    match view.setting(DEFAULT_REPLICA_COUNT) {
        None => Ok(None),
        Some(v) => parse_default_count(v).map(|c| c.for_engine(engine)),
    }
}

/// `volumes.longhorn.io` CREATE/UPDATE.
pub fn volume(req: &AdmissionRequest, view: &ClusterView, policy: &Policy) -> Result<Decision, RuleError> {
    let obj = object(req)?;
    let vol: Volume = typed("object", obj)?;
    let name = object_name(req, obj).to_string();
    let minimum = volume_minimum(policy, &vol);
    let (min, source) = (minimum.value, &minimum.source);
    let engine = if vol.spec.data_engine.is_empty() { "v1" } else { vol.spec.data_engine.as_str() };
    let set = vol.spec.number_of_replicas;
    let lowered = lowers(req, set, |old| old.pointer("/spec/numberOfReplicas").and_then(Value::as_i64));
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
    Ok(decide(findings, policy, req, &name))
}

/// `storageclasses` CREATE (StorageClass parameters are immutable).
pub fn storage_class(
    req: &AdmissionRequest,
    view: &ClusterView,
    policy: &Policy,
) -> Result<Decision, RuleError> {
    let obj = object(req)?;
    // Another provisioner's parameters are its own business.
    if obj.get("provisioner").and_then(Value::as_str) != Some(LONGHORN_PROVISIONER) {
        return Ok(Decision::allow().rule("replicas"));
    }
    let sc: StorageClass = typed("object", obj)?;
    let name = object_name(req, obj).to_string();
    let (min, source) = storage_class_minimum(policy, &name);
    let field = "parameters.numberOfReplicas";
    let mut findings = Vec::new();
    // As Longhorn's CSI driver reads it (Go's strconv.Atoi: no spaces, a sign and leading
    // zeros allowed); 0 (`"0"`, `"00"`, `"-0"`) means the default.
    match sc.parameters.get("numberOfReplicas").map(String::as_str).filter(|raw| raw.parse::<i64>() != Ok(0))
    {
        Some(raw) => match raw.parse::<i64>() {
            Ok(n) if LONGHORN_RANGE.contains(&n) => {
                if n < min {
                    let text = format!("numberOfReplicas={n} {}; {source} is {min}", tolerates(n));
                    let short = format!("numberOfReplicas={n} {}; minimum {min}", tolerates(n));
                    findings.push(Finding::about(field, "storageclass", &name, &text, &short, true));
                }
            }
            _ => {
                let text = format!(
                    "cannot read numberOfReplicas {}: not a count in 1..20; not checked",
                    quoted(raw)
                );
                let short = format!("numberOfReplicas {} not in 1..20", quoted(raw));
                findings.push(Finding::about(field, "storageclass", &name, &text, &short, false));
            }
        },
        None => {
            let engine = sc.parameters.get("dataEngine").map(String::as_str).unwrap_or("v1");
            let given = if sc.parameters.contains_key("numberOfReplicas") {
                "numberOfReplicas=0"
            } else {
                "no numberOfReplicas"
            };
            if let Ok(Some(n)) = view_default(view, engine) {
                if n < min {
                    let text = format!("{given}, so {DEFAULT_REPLICA_COUNT} {engine}={n}; {source} is {min}");
                    let short = format!("{given}, so {engine}={n}; minimum {min}");
                    findings.push(Finding::about(field, "storageclass", &name, &text, &short, false));
                }
            }
        }
    }
    Ok(decide(findings, policy, req, &name))
}
