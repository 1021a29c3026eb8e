//! The policy core: pure functions `(admission request, cluster view, policy, now) -> decision`.
//!
//! Nothing here does I/O. The server, the `review`/`lint`/`check` commands and the tests all
//! call [`validate`] and [`mutate`](crate::mutate::mutate).

pub mod config;
pub mod drain;
mod handled;
pub mod replicas;
pub mod settings;

use std::time::SystemTime;

pub use config::*;
pub use handled::{Eviction, Handled};

use crate::admission::{AdmissionRequest, Embedded};
use crate::cluster::ClusterView;
use crate::decision::Decision;

/// Why a request's objects cannot be read. The edge answers these as a denial with code
/// 400 (never a silent allow).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuleError {
    #[error("request.{field} is missing")]
    Missing { field: &'static str },
    /// `field` is the path to what is wrong: `object`, `object.spec.numberOfReplicas`.
    #[error("request.{field} is malformed: {message}")]
    Malformed { field: String, message: String },
}

/// The validating webhook: converts the request's objects into its kind's types
/// ([`Handled::of`]) and asks the rule that owns it. Resources no rule handles are allowed with
/// no warnings; a handled one whose objects cannot be read is denied with 400.
pub fn validate(req: &AdmissionRequest, view: &ClusterView, policy: &Policy, now: SystemTime) -> Decision {
    finish(decide(req, view, policy, now))
}

/// [`validate`] before its rule errors are answered.
pub fn decide(
    req: &AdmissionRequest,
    view: &ClusterView,
    policy: &Policy,
    now: SystemTime,
) -> Result<Decision, RuleError> {
    match Handled::of(req)? {
        Some(handled) => handled.decide(req, view, policy, now),
        None => Ok(Decision::allow()),
    }
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
    embedded("object", req.object.as_ref())
}

/// The request's `oldObject`, or an error naming it.
pub fn old_object(req: &AdmissionRequest) -> Result<&serde_json::Value, RuleError> {
    embedded("oldObject", req.old_object.as_ref())
}

fn embedded<'a>(field: &'static str, e: Option<&'a Embedded>) -> Result<&'a serde_json::Value, RuleError> {
    let value = e
        .map(Embedded::read)
        .transpose()
        .map_err(|why| RuleError::Malformed { field: field.to_string(), message: why.to_string() })?;
    value.filter(|o| !o.is_null()).ok_or(RuleError::Missing { field })
}

/// Parses `value` (the request's object or oldObject) into a typed object, reading `null` as Go
/// decodes it into the API's types: a field set to `null` is unset (a manifest's `parameters:`
/// with every entry templated away is no parameters, not a malformed object), and a `null`
/// value in a string map ([`STRING_MAPS`]) is the empty string (`numberOfReplicas: ~` is `""`,
/// which Longhorn cannot read, not a missing parameter). The value must be a JSON object; an
/// error names the path to what is wrong under `field`.
pub fn typed<T: serde::de::DeserializeOwned>(
    field: &'static str,
    value: &serde_json::Value,
) -> Result<T, RuleError> {
    // A Kubernetes object is a JSON object (serde would read a struct from an array too).
    if !value.is_object() {
        let message = format!("expected a JSON object, found {}", crate::yaml::json_type(value));
        return Err(RuleError::Malformed { field: field.to_string(), message });
    }
    let malformed = |e: serde_path_to_error::Error<serde_json::Error>| {
        let field = match e.path().to_string() {
            root if root == "." => field.to_string(),
            path if path.starts_with('[') => format!("{field}{path}"),
            path => format!("{field}.{path}"),
        };
        RuleError::Malformed { field, message: e.into_inner().to_string() }
    };
    if has_null_field(value) {
        serde_path_to_error::deserialize(&without_null_fields(value)).map_err(malformed)
    } else {
        serde_path_to_error::deserialize(value).map_err(malformed)
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
