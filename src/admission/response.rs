//! The response AdmissionReview: the decision as the JSON value the API server reads.

use base64::Engine as _;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::API_VERSION;
use crate::decision::Decision;

/// The response AdmissionReview for a decision, echoing the request uid. A patch is written as
/// base64 of the RFC 6902 JSON array with `patchType: JSONPatch`, only when it is not empty.
/// Fields are written in name order.
pub fn response_review(uid: &str, decision: &Decision) -> ResponseReview {
    let mut response = json!({"allowed": decision.allowed, "uid": uid});
    if !decision.warnings.is_empty() {
        response["warnings"] = json!(decision.warnings);
    }
    if let Some(patch) = decision.patch.as_ref().filter(|p| !p.0.is_empty()) {
        let bytes = serde_json::to_vec(patch).expect("a JSON patch always serialises");
        response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
        response["patchType"] = json!("JSONPatch");
    }
    if let Some(st) = &decision.status {
        let mut details = Map::new();
        if !st.causes.is_empty() {
            details.insert("causes".into(), json!(st.causes));
        }
        if let Some(s) = st.subject.as_ref().filter(|s| !s.kind.is_empty()) {
            details.insert("kind".into(), json!(s.kind));
            for (key, v) in
                [("group", &s.group), ("name", &s.name)].into_iter().filter(|(_, v)| !v.is_empty())
            {
                details.insert(key.into(), json!(v));
            }
        }
        let mut status =
            json!({"code": st.code, "message": st.message, "reason": st.reason, "status": "Failure"});
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        response["status"] = status;
    }
    ResponseReview(json!({"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}))
}

/// The response AdmissionReview ([`response_review`]).
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct ResponseReview(Value);

impl ResponseReview {
    /// The JSON bytes sent to the API server.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.0).expect("a response review always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
