//! The policy core: pure functions `(admission request, cluster view, policy, now) -> decision`.
//!
//! Nothing here does I/O. The server, the `review`/`lint`/`check` commands and the tests all
//! call [`validate`] and [`mutate`](crate::mutate::mutate).

pub mod config;
pub mod drain;
pub mod replicas;
pub mod settings;

use std::time::SystemTime;

pub use config::*;

use crate::admission::{AdmissionRequest, Operation};
use crate::cluster::ClusterView;
use crate::decision::Decision;

/// Why a rule could not read the request it was given. The edge answers these as a denial
/// with code 400 (never a silent allow).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuleError {
    #[error("request.{field} is missing")]
    Missing { field: &'static str },
    #[error("request.{field} is malformed: {message}")]
    Malformed { field: &'static str, message: String },
}

/// The validating webhook: routes the request to the rule that owns it.
/// Resources no rule handles are allowed with no warnings.
pub fn validate(req: &AdmissionRequest, view: &ClusterView, policy: &Policy, now: SystemTime) -> Decision {
    let res = &req.resource;
    let result = match (res.group.as_str(), res.resource.as_str(), req.sub_resource(), req.operation) {
        ("", "pods", "eviction", Operation::Create) => drain::eviction(req, view, policy, now),
        ("", "nodes", "", Operation::Delete) => drain::node_delete(req, view, policy, now),
        ("", "nodes", "", Operation::Update) => drain::node_update(req, view, policy, now),
        ("longhorn.io", "settings", "", Operation::Create | Operation::Update) => {
            settings::setting(req, view, policy)
        }
        ("longhorn.io", "volumes", "", Operation::Create | Operation::Update) => {
            replicas::volume(req, view, policy)
        }
        ("storage.k8s.io", "storageclasses", "", Operation::Create) => {
            replicas::storage_class(req, view, policy)
        }
        _ => Ok(Decision::allow()),
    };
    finish(result)
}

/// Turns a rule result into the final decision: rule errors become a 400 denial, and the
/// warning limits are enforced.
pub fn finish(result: Result<Decision, RuleError>) -> Decision {
    let mut d = match result {
        Ok(d) => d,
        Err(e) => Decision::deny(400, "BadRequest", format!("longhorn-guard: {e}")).rule("bad-request"),
    };
    d.finalize_warnings();
    d
}

/// The request's `object`, or an error naming it.
pub fn object(req: &AdmissionRequest) -> Result<&serde_json::Value, RuleError> {
    req.object.as_deref().filter(|o| !o.is_null()).ok_or(RuleError::Missing { field: "object" })
}

/// The request's `oldObject`, or an error naming it.
pub fn old_object(req: &AdmissionRequest) -> Result<&serde_json::Value, RuleError> {
    req.old_object.as_deref().filter(|o| !o.is_null()).ok_or(RuleError::Missing { field: "oldObject" })
}

/// Parses `value` (the request's object or oldObject) into a typed object, reading `null` as Go
/// decodes it into the API's types: a field set to `null` is unset (a manifest's `parameters:`
/// with every entry templated away is no parameters, not a malformed object), and a `null`
/// value in a string map ([`STRING_MAPS`]) is the empty string (`numberOfReplicas: ~` is `""`,
/// which Longhorn cannot read, not a missing parameter).
pub fn typed<T: serde::de::DeserializeOwned>(
    field: &'static str,
    value: &serde_json::Value,
) -> Result<T, RuleError> {
    let malformed = |e: serde_json::Error| RuleError::Malformed { field, message: e.to_string() };
    if has_null_field(value) {
        T::deserialize(without_null_fields(value)).map_err(malformed)
    } else {
        T::deserialize(value).map_err(malformed)
    }
}

/// True when some object inside `v` has a field whose value is `null`.
fn has_null_field(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Object(m) => m.values().any(|x| x.is_null() || has_null_field(x)),
        serde_json::Value::Array(a) => a.iter().any(has_null_field),
        _ => false,
    }
}

/// Fields the rules read that are maps of strings (`map[string]string` in Go).
pub const STRING_MAPS: [&str; 3] = ["parameters", "labels", "annotations"];

/// `v` without its `null` fields, at every depth; inside a [`STRING_MAPS`] field a `null`
/// value becomes `""`.
fn without_null_fields(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| match x {
                    Value::Object(entries) if STRING_MAPS.contains(&k.as_str()) => {
                        let entries = entries
                            .iter()
                            .map(|(ek, ev)| {
                                let ev = if ev.is_null() { Value::String(String::new()) } else { ev.clone() };
                                (ek.clone(), ev)
                            })
                            .collect();
                        (k.clone(), Value::Object(entries))
                    }
                    _ => (k.clone(), without_null_fields(x)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_null_fields).collect()),
        other => other.clone(),
    }
}
