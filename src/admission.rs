//! `admission.k8s.io/v1` AdmissionReview: parsing requests and writing responses.
//!
//! Own types rather than kube's: kube's response writes `patch` as an array of numbers
//! (kube-rs #1781), and parsing here reports a one-line reason for every malformed body.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::decision::Decision;

/// The only AdmissionReview version longhorn-guard registers for.
pub const API_VERSION: &str = "admission.k8s.io/v1";

/// Why a body is not a usable AdmissionReview. Each message is one line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReviewError {
    #[error("request body is empty")]
    Empty,
    #[error("request body is not JSON: {0}")]
    NotJson(String),
    #[error("request body is not an AdmissionReview: {0}")]
    NotReview(String),
    #[error("AdmissionReview apiVersion {0:?} is not supported; use admission.k8s.io/v1")]
    WrongVersion(String),
    #[error("AdmissionReview has no request")]
    NoRequest,
    #[error("AdmissionReview request is malformed: {0}")]
    Malformed(String),
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct GroupVersionKind {
    pub group: String,
    pub version: String,
    pub kind: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct GroupVersionResource {
    pub group: String,
    pub version: String,
    pub resource: String,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// One admission request, as the API server sends it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    pub uid: String,
    pub kind: GroupVersionKind,
    pub resource: GroupVersionResource,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub request_kind: Option<GroupVersionKind>,
    #[serde(default)]
    pub request_resource: Option<GroupVersionResource>,
    #[serde(default)]
    pub request_sub_resource: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    pub operation: Operation,
    #[serde(default)]
    pub user_info: UserInfo,
    #[serde(default)]
    pub object: Option<Value>,
    #[serde(default)]
    pub old_object: Option<Value>,
    /// Server-side dry run. longhorn-guard has no side effects, so dry runs are decided exactly
    /// like real requests (and the webhook configurations declare `sideEffects: None`).
    #[serde(default)]
    pub dry_run: Option<bool>,
    #[serde(default)]
    pub options: Option<Value>,
}

impl AdmissionRequest {
    /// The object's name ("" when absent).
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    /// The namespace ("" for cluster-scoped objects).
    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }

    /// The subresource ("" for the main resource).
    pub fn sub_resource(&self) -> &str {
        self.sub_resource.as_deref().unwrap_or_default()
    }

    pub fn is_dry_run(&self) -> bool {
        self.dry_run.unwrap_or(false)
    }

    /// `resource[/subresource]` with its group, e.g. `pods/eviction` or `volumes.longhorn.io`.
    pub fn resource_label(&self) -> String {
        let mut s = self.resource.resource.clone();
        if !self.resource.group.is_empty() {
            s = format!("{s}.{}", self.resource.group);
        }
        if let Some(sub) = self.sub_resource.as_deref().filter(|s| !s.is_empty()) {
            s = format!("{s}/{sub}");
        }
        s
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewEnvelope {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    request: Option<Value>,
}

/// The envelope read in one pass, the request left as raw JSON text for its typed parse.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEnvelope<'a> {
    api_version: Option<&'a str>,
    kind: Option<&'a str>,
    #[serde(borrow)]
    request: Option<&'a serde_json::value::RawValue>,
}

/// Parses an HTTP body into the request it carries.
pub fn parse_review(body: &[u8]) -> Result<AdmissionRequest, ReviewError> {
    fast_parse(body).map_or_else(|| parse_review_checked(body), Ok)
}

/// The common case in one pass straight into the typed request: a well-formed
/// `admission.k8s.io/v1` AdmissionReview. Anything else (`None`) goes through
/// [`parse_review_checked`], which says exactly what is wrong.
fn fast_parse(body: &[u8]) -> Option<AdmissionRequest> {
    let env: RawEnvelope = serde_json::from_slice(body).ok()?;
    if env.kind != Some("AdmissionReview") || env.api_version != Some(API_VERSION) {
        return None;
    }
    let req: AdmissionRequest = serde_json::from_str(env.request?.get()).ok()?;
    (!req.uid.is_empty()).then_some(req)
}

/// [`parse_review`] step by step, each failure with its own error.
fn parse_review_checked(body: &[u8]) -> Result<AdmissionRequest, ReviewError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ReviewError::Empty);
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(e.to_string()))?;
    if !value.is_object() {
        return Err(ReviewError::NotReview(format!(
            "expected a JSON object, found {}",
            crate::yaml::json_type(&value)
        )));
    }
    let env: ReviewEnvelope =
        serde_json::from_value(value).map_err(|e| ReviewError::NotReview(e.to_string()))?;
    match env.kind.as_deref() {
        Some("AdmissionReview") => {}
        Some(other) => return Err(ReviewError::NotReview(format!("kind is {other:?}"))),
        None => return Err(ReviewError::NotReview("kind is missing".into())),
    }
    match env.api_version.as_deref() {
        Some(API_VERSION) => {}
        other => return Err(ReviewError::WrongVersion(other.unwrap_or_default().to_string())),
    }
    let request = match env.request {
        None | Some(Value::Null) => return Err(ReviewError::NoRequest),
        Some(r) => r,
    };
    let req: AdmissionRequest =
        serde_json::from_value(request).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    if req.uid.is_empty() {
        return Err(ReviewError::Malformed("uid is empty".into()));
    }
    Ok(req)
}

/// The response AdmissionReview for a decision, echoing the request uid.
///
/// A patch is written as base64 of the RFC 6902 JSON array with `patchType: JSONPatch`;
/// `patchType` is only present with a non-empty patch.
pub fn response_review(uid: &str, decision: &Decision) -> Value {
    let mut response = json!({ "uid": uid, "allowed": decision.allowed });
    let obj = response.as_object_mut().expect("json! object");
    if let Some(status) = &decision.status {
        let mut st = json!({
            "status": "Failure",
            "code": status.code,
            "reason": status.reason,
            "message": status.message,
        });
        let mut details = serde_json::Map::new();
        if let Some(subject) = status.subject.as_ref().filter(|s| !s.kind.is_empty()) {
            if !subject.group.is_empty() {
                details.insert("group".into(), json!(subject.group));
            }
            details.insert("kind".into(), json!(subject.kind));
            if !subject.name.is_empty() {
                details.insert("name".into(), json!(subject.name));
            }
        }
        if !status.causes.is_empty() {
            details.insert("causes".into(), json!(status.causes));
        }
        if !details.is_empty() {
            st["details"] = Value::Object(details);
        }
        obj.insert("status".into(), st);
    }
    if !decision.warnings.is_empty() {
        obj.insert("warnings".into(), json!(decision.warnings));
    }
    if let Some(patch) = decision.patch.as_ref().filter(|p| !p.0.is_empty()) {
        let bytes = serde_json::to_vec(patch).expect("a JSON patch always serialises");
        obj.insert("patchType".into(), json!("JSONPatch"));
        obj.insert("patch".into(), json!(base64::engine::general_purpose::STANDARD.encode(bytes)));
    }
    json!({ "apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_bodies_have_one_line_reasons() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "request body is empty"),
            (b"{\"kind\":", "request body is not JSON"),
            (b"[1,2]", "not an AdmissionReview: expected a JSON object, found an array"),
            (b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", "has no request"),
            (b"{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\",\"request\":{}}", "not supported"),
            (
                b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":5}}",
                "malformed: invalid type: integer `5`, expected a string",
            ),
        ];
        for (body, want) in cases {
            let err = parse_review(body).unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
            assert!(!err.contains('\n'), "{err:?}");
        }
    }

    #[test]
    fn patch_is_base64_of_the_json_array() {
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/metadata/labels", "value": {}}])).unwrap();
        let d = Decision::patched(patch);
        let r = response_review("u-1", &d);
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
        let r = response_review("u", &d);
        assert!(r["response"].get("patchType").is_none());
        assert!(r["response"].get("patch").is_none());
    }
}
