//! The mutating webhook: routes pod creations to the init gate.

pub mod gate_policy;
pub mod init_gate;

use crate::admission::{AdmissionRequest, Operation};
use crate::cluster::ClusterView;
use crate::decision::Decision;
use crate::policy::{finish, Policy};

/// The mutating webhook. Anything but a Pod CREATE is allowed with no patch. (The view is in
/// every decision's signature; the init gate reads none of it.)
pub fn mutate(req: &AdmissionRequest, _view: &ClusterView, policy: &Policy) -> Decision {
    let res = &req.resource;
    match (res.group.as_str(), res.resource.as_str(), req.sub_resource(), req.operation) {
        ("", "pods", "", Operation::Create) => finish(init_gate::mutate_pod(req, policy)),
        _ => Decision::allow(),
    }
}
