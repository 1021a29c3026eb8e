//! The drain guard: evictions of instance-manager pods, node deletions and cordons.

use std::time::SystemTime;

use crate::admission::AdmissionRequest;
use crate::cluster::ClusterView;
use crate::decision::Decision;
use crate::policy::{Policy, RuleError};

/// `pods/eviction` CREATE.
pub fn eviction(
    _req: &AdmissionRequest,
    _view: &ClusterView,
    _policy: &Policy,
    _now: SystemTime,
) -> Result<Decision, RuleError> {
    Ok(Decision::allow())
}

/// Core `nodes` DELETE.
pub fn node_delete(
    _req: &AdmissionRequest,
    _view: &ClusterView,
    _policy: &Policy,
    _now: SystemTime,
) -> Result<Decision, RuleError> {
    Ok(Decision::allow())
}

/// Core `nodes` UPDATE (cordon warnings).
pub fn node_update(
    _req: &AdmissionRequest,
    _view: &ClusterView,
    _policy: &Policy,
    _now: SystemTime,
) -> Result<Decision, RuleError> {
    Ok(Decision::allow())
}

/// The denial for an eviction whose allow could not be confirmed with fresh data.
pub fn unconfirmed(node: &str, why: &str, policy: &Policy) -> Decision {
    Decision::deny(
        policy.drain.deny_code,
        "TooManyRequests",
        format!("longhorn-guard: could not confirm that draining {node} is safe ({why}); retry later"),
    )
    .rule("drain")
}
