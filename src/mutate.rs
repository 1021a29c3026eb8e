//! The mutating webhook: routes pod creations to the init gate.

pub mod gate_policy;
pub mod init_gate;
pub mod pod;

use crate::admission::{AdmissionRequest, Operation};
use crate::cluster::ClusterView;
use crate::decision::Decision;
use crate::policy::{finish, Policy};
use pod::Pod;

/// The mutating webhook. A Pod CREATE's object is converted here, once, into the gate's [`Pod`]
/// for the init gate; one that cannot be read is allowed all the same, with no patch and a
/// warning that says why ([`init_gate::unreadable`]): the gate never blocks a pod. Anything
/// else, and every pod while `gate.enabled` is false, is allowed with no patch. (The view is in
/// every decision's signature; the init gate reads none of it.)
pub fn mutate(req: &AdmissionRequest, _view: &ClusterView, policy: &Policy) -> Decision {
    let res = &req.resource;
    let decision = match (res.group.as_str(), res.resource.as_str(), req.sub_resource(), req.operation) {
        ("", "pods", "", Operation::Create) if policy.gate.enabled => match Pod::of(req) {
            Ok(pod) => init_gate::mutate_pod(req, &pod, policy),
            Err(why) => init_gate::unreadable(&why),
        },
        _ => Decision::allow(),
    };
    finish(Ok(decision))
}
