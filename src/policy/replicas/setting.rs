//! The `default-replica-count` Setting rule: each engine's default count against the policy
//! minimum, deniable only where the request lowers it.

use std::collections::BTreeMap;

use serde_json::Value;

use super::wording::trade_off;
use super::{decide, object_name, parse_default_count, DefaultCount, Finding, DEFAULT_REPLICA_COUNT, PREFIX};
use crate::admission::{AdmissionRequest, Operation};
use crate::cluster::ClusterView;
use crate::decision::Decision;
use crate::policy::{object, Policy, RuleError};

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

/// `value` of a Setting object: a string, or missing (`""`).
pub(crate) fn setting_value(obj: &Value) -> Result<&str, RuleError> {
    match obj.get("value") {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(RuleError::Malformed { field: "object.value", message: "must be a string".into() }),
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
