//! The response AdmissionReview: the decision as the JSON value the API server reads.

use base64::Engine as _;
use serde::Serialize;

use super::API_VERSION;
use crate::decision::{Cause, Decision};

/// The response AdmissionReview for a decision, echoing the request uid. A patch is written as
/// base64 of the RFC 6902 JSON array with `patchType: JSONPatch`, only when it is not empty.
/// Fields are written in name order, borrowed from the decision.
pub fn response_review<'a>(uid: &'a str, decision: &'a Decision) -> ResponseReview<'a> {
    let patch = decision.patch.as_ref().filter(|p| !p.0.is_empty()).map(|p| {
        let bytes = serde_json::to_vec(p).expect("a JSON patch always serialises");
        base64::engine::general_purpose::STANDARD.encode(bytes)
    });
    let status = decision.status.as_ref().map(|st| {
        let (group, kind, name) = match st.subject.as_ref().filter(|s| !s.kind.is_empty()) {
            Some(s) => (s.group.as_str(), s.kind.as_str(), s.name.as_str()),
            None => ("", "", ""),
        };
        let details = (!st.causes.is_empty() || !kind.is_empty()).then_some(Details {
            causes: &st.causes,
            group,
            kind,
            name,
        });
        Status { code: st.code, details, message: &st.message, reason: &st.reason, status: "Failure" }
    });
    let response = Response {
        allowed: decision.allowed,
        patch_type: patch.as_ref().map(|_| "JSONPatch"),
        patch,
        status,
        uid,
        warnings: &decision.warnings,
    };
    ResponseReview { api_version: API_VERSION, kind: "AdmissionReview", response }
}

/// The response AdmissionReview ([`response_review`]).
#[derive(Debug, Serialize)]
pub struct ResponseReview<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    response: Response<'a>,
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
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    warnings: &'a [String],
}

#[derive(Debug, Serialize)]
struct Status<'a> {
    code: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Details<'a>>,
    message: &'a str,
    reason: &'a str,
    status: &'static str,
}

#[derive(Debug, Serialize)]
struct Details<'a> {
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    causes: &'a [Cause],
    #[serde(skip_serializing_if = "str::is_empty")]
    group: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    kind: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
}

impl ResponseReview<'_> {
    /// The JSON bytes sent to the API server.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a response review always serialises")
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
        let mut d = Decision::deny(422, "Invalid", "too few").with_warning("w1");
        if let Some(st) = d.status.as_mut() {
            st.causes.push(Cause {
                type_: "FieldValueInvalid".into(),
                field: "spec.numberOfReplicas".into(),
                message: "too few".into(),
            });
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
