//! `admission.k8s.io/v1` AdmissionReview: parsing requests and writing responses.
//!
//! Own types rather than kube's: kube's response writes `patch` as an array of numbers
//! (kube-rs #1781), and parsing here reports a one-line reason for every malformed body.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// An object a request carries (`object`, `oldObject`), read into a [`Value`] with the
/// request. [`Embedded::read`] says why its text is not a value (past serde_json's nesting
/// limit, which the request's own parse does not apply to an embedded object); through `Deref`
/// such an object reads as `null`. It compares, prints and serialises as its value.
#[derive(Clone)]
pub struct Embedded(Result<Value, String>);

/// What an unreadable object reads as through `Deref`.
static UNREADABLE: Value = Value::Null;

impl Embedded {
    /// The value, or why the text is not a value.
    pub fn read(&self) -> Result<&Value, &str> {
        self.0.as_ref().map_err(String::as_str)
    }
}

impl From<Value> for Embedded {
    fn from(v: Value) -> Self {
        Self(Ok(v))
    }
}

impl std::ops::Deref for Embedded {
    type Target = Value;
    fn deref(&self) -> &Value {
        self.read().unwrap_or(&UNREADABLE)
    }
}

impl std::ops::DerefMut for Embedded {
    /// The value from now on (`null` for an unreadable text).
    fn deref_mut(&mut self) -> &mut Value {
        if self.0.is_err() {
            self.0 = Ok(Value::Null);
        }
        self.0.as_mut().expect("set just now")
    }
}

impl PartialEq for Embedded {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for Embedded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for Embedded {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Embedded {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        Ok(Self(serde_json::from_str(raw.get()).map_err(|e| e.to_string())))
    }
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
    pub object: Option<Embedded>,
    #[serde(default)]
    pub old_object: Option<Embedded>,
    /// Server-side dry run. longhorn-guard has no side effects, so dry runs are decided exactly
    /// like real requests (and the webhook configurations declare `sideEffects: None`).
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// The operation's options (`CreateOptions`, ...): no rule reads them, so they stay text.
    #[serde(default)]
    pub options: Option<Embedded>,
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

    /// A dry-run CREATE of `object` from `user` (`uid` names the caller): what `lint` and
    /// `check cluster` ask the webhook's rules about objects they read.
    pub fn dry_run_create(
        uid: &str,
        user: &str,
        resource: GroupVersionResource,
        kind: &str,
        object: Value,
    ) -> Self {
        let text = |p: &str| object.pointer(p).and_then(Value::as_str).map(str::to_string);
        let (name, namespace) = (text("/metadata/name"), text("/metadata/namespace"));
        Self {
            uid: uid.into(),
            kind: GroupVersionKind {
                group: resource.group.clone(),
                version: resource.version.clone(),
                kind: kind.into(),
            },
            resource,
            sub_resource: None,
            request_kind: None,
            request_resource: None,
            request_sub_resource: None,
            name,
            namespace,
            operation: Operation::Create,
            user_info: UserInfo { username: user.into(), ..UserInfo::default() },
            object: Some(object.into()),
            old_object: None,
            dry_run: Some(true),
            options: None,
        }
    }

    /// `resource[/subresource]` with its group, e.g. `pods/eviction` or `volumes.longhorn.io`.
    pub fn resource_label(&self) -> String {
        let group = match self.resource.group.as_str() {
            "" => String::new(),
            g => format!(".{g}"),
        };
        let sub = match self.sub_resource() {
            "" => String::new(),
            s => format!("/{s}"),
        };
        format!("{}{group}{sub}", self.resource.resource)
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

/// The envelope and its typed request read in one pass.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypedEnvelope<'a> {
    #[serde(borrow)]
    api_version: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    request: Option<AdmissionRequest>,
}

/// Parses an HTTP body into the request it carries.
pub fn parse_review(body: &[u8]) -> Result<AdmissionRequest, ReviewError> {
    fast_parse(body).map_or_else(|| parse_review_checked(body), Ok)
}

/// The common case in one pass straight into the typed request: a well-formed
/// `admission.k8s.io/v1` AdmissionReview. Anything else (`None`) goes through
/// [`parse_review_checked`], which says exactly what is wrong.
fn fast_parse(body: &[u8]) -> Option<AdmissionRequest> {
    // UTF-8 checked once for the whole body, not string by string.
    let env: TypedEnvelope = serde_json::from_str(std::str::from_utf8(body).ok()?).ok()?;
    if env.kind.as_deref() != Some("AdmissionReview") || env.api_version.as_deref() != Some(API_VERSION) {
        return None;
    }
    env.request.filter(|req| !req.uid.is_empty())
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

mod response;

pub use response::{response_review, ResponseReview};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn an_embedded_object_reads_as_its_value() {
        let fixture =
            concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/admission/eviction-create.json");
        let body = std::fs::read(fixture).unwrap();
        let mut req = parse_review(&body).unwrap();
        let object = req.object.as_ref().unwrap();
        let whole: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(**object, whole["request"]["object"]);
        assert_eq!(req.old_object, None, "null is no object");
        // Changed in place, it is the changed value that counts, also when written out.
        req.object.as_mut().unwrap()["kind"] = json!("Changed");
        let written: Value = serde_json::to_value(&req).unwrap();
        assert_eq!(written["object"]["kind"], "Changed");
        assert_eq!(written["object"]["metadata"], whole["request"]["object"]["metadata"]);
        // Read back through a Value (the step-by-step parse), it is the same request.
        assert_eq!(serde_json::from_value::<AdmissionRequest>(written).unwrap(), req);
    }
}
