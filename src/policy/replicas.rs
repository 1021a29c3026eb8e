//! Replica-count rules for Settings, Volumes and StorageClasses (`rule: replicas`): below the
//! policy minimum a count the request lowers is warned about or denied with 422 `Invalid`
//! (docs/replicas.md). This file holds what the three rules share.

pub mod admission_policy;
mod default_count;
mod setting;
mod storage_class;
mod volume;
mod wording;

use crate::admission::AdmissionRequest;
use crate::cluster::{ClusterView, Meta};
use crate::decision::{Cause, Decision, Subject};
use crate::policy::{Policy, ReplicaAction};
pub use default_count::{parse_default_count, suggested_count, DefaultCount};
pub use setting::setting;
pub use storage_class::storage_class;
pub use volume::volume;
use wording::about;
pub use wording::clip_middle;

/// Who speaks, at the start of every warning and denial message.
pub const PREFIX: &str = "longhorn-guard: ";
/// The Longhorn setting holding the default replica count.
pub const DEFAULT_REPLICA_COUNT: &str = "default-replica-count";
/// The CSI provisioner name of Longhorn StorageClasses.
pub const LONGHORN_PROVISIONER: &str = "driver.longhorn.io";

/// One thing a rule found.
#[derive(Debug)]
struct Finding {
    /// The field a denial names (`value`, `spec.numberOfReplicas`, ...).
    field: &'static str,
    text: String,
    /// The same with the name unclipped, for a denial's message (no length limit there).
    full: String,
    /// A below-minimum count the request lowers (CREATE, or UPDATE below the old count): denied
    /// under `replicas.action: deny`. Every other finding stays a warning.
    deniable: bool,
}

impl Finding {
    fn new(field: &'static str, text: String, deniable: bool) -> Self {
        Self { field, full: text.clone(), text, deniable }
    }

    /// About a named object: the warning keeps the name whole and falls back to the `short`
    /// text to fit; the denial keeps both whole.
    fn about(
        field: &'static str,
        subject: &str,
        name: &str,
        text: &str,
        short: &str,
        deniable: bool,
    ) -> Self {
        Self {
            field,
            text: about(subject, name, text, short),
            full: format!("{PREFIX}{subject} {name}: {text}"),
            deniable,
        }
    }
}

/// True for an UPDATE by one of `drain.trustedUsers` (Longhorn's own controllers) that leaves
/// what the rule reads as it was (`unchanged`): such a request gets no finding. The count was
/// reviewed when it was set, and a warning to a controller lands only in its log (real
/// Longhorn v1.10.2's managers rewrite Volumes and log every warning: docs/replicas.md).
pub(crate) fn trusted_rewrite(req: &AdmissionRequest, policy: &Policy, unchanged: bool) -> bool {
    unchanged
        && req.operation == crate::admission::Operation::Update
        && policy.drain.trusts(&req.user_info.username)
}

/// Builds the decision: warnings, or under `deny` a 422 for the deniable findings (the
/// others ride along as warnings), naming the request's object (`name`) by its kind.
fn decide(findings: Vec<Finding>, policy: &Policy, req: &AdmissionRequest, name: &str) -> Decision {
    let deny = policy.replicas.action == ReplicaAction::Deny && findings.iter().any(|f| f.deniable);
    if !deny {
        return Decision::warn(findings.into_iter().map(|f| f.text).collect()).rule("replicas");
    }
    let (denied, warned): (Vec<Finding>, Vec<Finding>) = findings.into_iter().partition(|f| f.deniable);
    let message = denied.iter().map(|f| f.full.as_str()).collect::<Vec<_>>().join("; ");
    let mut d = Decision::deny(422, "Invalid", message);
    if let Some(st) = d.status.as_mut() {
        st.causes = denied
            .iter()
            .map(|f| Cause {
                type_: "FieldValueInvalid".into(),
                field: f.field.into(),
                message: f.full.clone(),
            })
            .collect();
        st.subject = Some(Subject {
            group: req.kind.group.clone(),
            kind: req.kind.kind.clone(),
            name: name.to_string(),
        });
    }
    d.warnings = warned.into_iter().map(|f| f.text).collect();
    d.rule("replicas")
}

/// The object's `metadata.name`, else the request's name.
pub(crate) fn object_name<'a>(req: &'a AdmissionRequest, meta: &'a Meta) -> &'a str {
    meta.name.as_deref().filter(|n| !n.is_empty()).unwrap_or(req.name())
}

/// A boolean setting as Longhorn reads it (Go's `strconv.ParseBool`): `1`, `t`, `T`, `TRUE`,
/// `true`, `True` and their false twins; anything else is `None`.
pub fn go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The `default-replica-count` the view holds for a data engine: `Ok(Some(n))`,
/// `Ok(None)` when the view has no such setting, `Err` when its value is unreadable.
fn view_default(view: &ClusterView, engine: &str) -> Result<Option<i64>, String> {
    match view.setting(DEFAULT_REPLICA_COUNT) {
        None => Ok(None),
        Some(v) => parse_default_count(v).map(|c| c.for_engine(engine)),
    }
}
