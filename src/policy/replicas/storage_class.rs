//! The StorageClass rule: a Longhorn StorageClass's `numberOfReplicas` (or the default it
//! stands for) against the minimum for its name.

use super::default_count::LONGHORN_RANGE;
use super::wording::{quoted, tolerates};
use super::{decide, object_name, view_default, Finding, DEFAULT_REPLICA_COUNT, LONGHORN_PROVISIONER};
use crate::admission::AdmissionRequest;
use crate::cluster::{ClusterView, StorageClass};
use crate::decision::Decision;
use crate::policy::Policy;

/// The minimum for a StorageClass: its override by name, else `replicas.minimum`.
/// With where it comes from, as messages name it (`storageclass fast minimum`, `policy minimum`).
fn storage_class_minimum(policy: &Policy, name: &str) -> (i64, String) {
    match policy.replicas.storage_class_minimums.get(name) {
        Some(&m) => (i64::from(m), format!("storageclass {name} minimum")),
        None => (i64::from(policy.replicas.minimum), "policy minimum".to_string()),
    }
}

/// `storageclasses` CREATE of `sc` (StorageClass parameters are immutable).
pub fn storage_class(
    req: &AdmissionRequest,
    sc: &StorageClass,
    view: &ClusterView,
    policy: &Policy,
) -> Decision {
    // Another provisioner's parameters are its own business.
    if sc.provisioner != LONGHORN_PROVISIONER {
        return Decision::allow().rule("replicas");
    }
    let name = object_name(req, &sc.metadata).to_string();
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
    decide(findings, policy, req, &name)
}
