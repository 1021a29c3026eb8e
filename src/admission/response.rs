//! The response AdmissionReview: a typed value over the decision, written by its `Serialize`.

use base64::Engine as _;
use serde::Serialize;

use super::API_VERSION;
use crate::decision::Decision;

/// The response AdmissionReview for a decision, echoing the request uid: a typed value
/// written straight to bytes ([`ResponseReview::to_bytes`]), nothing built in between.
///
/// A patch is written as base64 of the RFC 6902 JSON array with `patchType: JSONPatch`;
/// `patchType` is only present with a non-empty patch. Fields are written in name order.
pub fn response_review<'a>(uid: &'a str, decision: &'a Decision) -> ResponseReview<'a> {
    let status = decision.status.as_ref().map(|status| {
        let subject = status.subject.as_ref().filter(|s| !s.kind.is_empty());
        let details = (subject.is_some() || !status.causes.is_empty()).then(|| StatusDetails {
            causes: status.causes.iter().map(CauseOut::from).collect(),
            group: subject.map(|s| s.group.as_str()).filter(|g| !g.is_empty()),
            kind: subject.map(|s| s.kind.as_str()),
            name: subject.map(|s| s.name.as_str()).filter(|n| !n.is_empty()),
        });
        Status {
            code: status.code,
            details,
            message: &status.message,
            reason: &status.reason,
            status: "Failure",
        }
    });
    let patch = decision.patch.as_ref().filter(|p| !p.0.is_empty()).map(|patch| {
        let bytes = serde_json::to_vec(patch).expect("a JSON patch always serialises");
        base64::engine::general_purpose::STANDARD.encode(bytes)
    });
    ResponseReview {
        api_version: API_VERSION,
        kind: "AdmissionReview",
        response: Response {
            allowed: decision.allowed,
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            patch,
            status,
            uid,
            warnings: &decision.warnings,
        },
    }
}

/// The response AdmissionReview ([`response_review`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseReview<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: Response<'a>,
}

impl ResponseReview<'_> {
    /// The JSON bytes sent to the API server.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a response review always serialises")
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status<'a>>,
    uid: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

#[derive(Debug, Serialize)]
struct Status<'a> {
    code: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<StatusDetails<'a>>,
    message: &'a str,
    reason: &'a str,
    status: &'static str,
}

#[derive(Debug, Serialize)]
struct StatusDetails<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    causes: Vec<CauseOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
}

/// A [`crate::decision::Cause`] as written.
#[derive(Debug, Serialize)]
struct CauseOut<'a> {
    field: &'a str,
    message: &'a str,
    #[serde(rename = "type")]
    type_: &'a str,
}

impl<'a> From<&'a crate::decision::Cause> for CauseOut<'a> {
    fn from(c: &'a crate::decision::Cause) -> Self {
        Self { field: &c.field, message: &c.message, type_: &c.type_ }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn patch_is_base64_of_the_json_array() {
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/metadata/labels", "value": {}}])).unwrap();
        let d = Decision::patched(patch);
        let r = serde_json::to_value(response_review("u-1", &d)).unwrap();
        assert_eq!(r["response"]["patchType"], "JSONPatch");
        // base64 of exactly `[{"op":"add","path":"/metadata/labels","value":{}}]`
        assert_eq!(
            r["response"]["patch"],
            "W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2xhYmVscyIsInZhbHVlIjp7fX1d"
        );
        assert_eq!(r["response"]["uid"], "u-1");
    }

    #[test]
    fn empty_patch_sets_no_patch_type() {
        let d = Decision::patched(json_patch::Patch(vec![]));
        let r = serde_json::to_value(response_review("u", &d)).unwrap();
        assert!(r["response"].get("patchType").is_none());
        assert!(r["response"].get("patch").is_none());
    }

    #[test]
    fn a_denial_is_written_with_its_status_details_and_warnings() {
        let mut d = Decision::invalid("spec.numberOfReplicas", "too few").with_warning("w1");
        if let Some(st) = d.status.as_mut() {
            st.subject = Some(crate::decision::Subject {
                group: "longhorn.io".into(),
                kind: "Volume".into(),
                name: String::new(),
            });
        }
        let bytes = response_review("u-2", &d).to_bytes();
        let want = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
            "uid": "u-2", "allowed": false, "warnings": ["w1"],
            "status": {"status": "Failure", "code": 422, "reason": "Invalid", "message": "too few",
                       "details": {"group": "longhorn.io", "kind": "Volume",
                                   "causes": [{"type": "FieldValueInvalid", "field": "spec.numberOfReplicas", "message": "too few"}]}}}});
        assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), want);
        // The bytes are the value's own compact form: keys in name order, nothing else.
        assert_eq!(bytes, serde_json::to_vec(&want).unwrap());
        let allow = response_review("u-3", &Decision::allow()).to_bytes();
        assert_eq!(
            String::from_utf8(allow).unwrap(),
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"allowed":true,"uid":"u-3"}}"#
        );
    }
}
