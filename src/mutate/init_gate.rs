//! The init gate: instance-manager pods that request the Multus storage network get an init
//! container that waits for it (see `longhorn-guard gate`).

use crate::admission::AdmissionRequest;
use crate::cluster::ClusterView;
use crate::decision::Decision;
use crate::policy::{Policy, RuleError};

/// Decides the patch for one Pod CREATE.
pub fn mutate_pod(
    _req: &AdmissionRequest,
    _view: &ClusterView,
    _policy: &Policy,
) -> Result<Decision, RuleError> {
    // Filled in by the init-gate work (issue 5).
    Ok(Decision::allow())
}
