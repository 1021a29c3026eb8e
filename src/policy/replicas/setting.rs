//! The `default-replica-count` Setting rule: each engine's default count against the policy
//! minimum, deniable only where the request lowers it.

use std::collections::BTreeMap;

use super::wording::trade_off;
use super::{decide, parse_default_count, DefaultCount, Finding, DEFAULT_REPLICA_COUNT, PREFIX};
use crate::admission::AdmissionRequest;
use crate::cluster::Setting;
use crate::decision::Decision;
use crate::policy::Policy;

/// `settings.longhorn.io` CREATE/UPDATE of `default-replica-count` to `new` (`old`: an
/// UPDATE's old object), routed here by [`crate::policy::settings::setting`].
pub fn setting(req: &AdmissionRequest, new: &Setting, old: Option<&Setting>, policy: &Policy) -> Decision {
    // The old counts, for an UPDATE: `None` for a CREATE or an unreadable old value.
    let old = old.and_then(|o| parse_default_count(&o.value).ok());
    let findings = match parse_default_count(&new.value) {
        Err(why) => vec![Finding::new(
            "value",
            format!("{PREFIX}cannot read {DEFAULT_REPLICA_COUNT} {why}; not checked"),
            false,
        )],
        Ok(count) => default_count_findings(&count, policy.replicas.minimum, old.as_ref()),
    };
    decide(findings, policy, req, DEFAULT_REPLICA_COUNT)
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
