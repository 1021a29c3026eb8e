//! Replica-count and settings rules for Settings, Volumes and StorageClasses.

use crate::admission::AdmissionRequest;
use crate::cluster::ClusterView;
use crate::decision::Decision;
use crate::policy::{Policy, RuleError};

/// `settings.longhorn.io` CREATE/UPDATE.
pub fn setting(
    _req: &AdmissionRequest,
    _view: &ClusterView,
    _policy: &Policy,
) -> Result<Decision, RuleError> {
    Ok(Decision::allow())
}

/// `volumes.longhorn.io` CREATE/UPDATE.
pub fn volume(_req: &AdmissionRequest, _view: &ClusterView, _policy: &Policy) -> Result<Decision, RuleError> {
    Ok(Decision::allow())
}

/// `storageclasses` CREATE.
pub fn storage_class(
    _req: &AdmissionRequest,
    _view: &ClusterView,
    _policy: &Policy,
) -> Result<Decision, RuleError> {
    Ok(Decision::allow())
}
