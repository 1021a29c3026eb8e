//! A request of a kind a rule handles whose `object` or `oldObject` cannot be read into its
//! kind's type is denied with one 400 naming what is wrong, the same way every time, over the
//! real HTTPS server; a kind no rule handles is allowed without reading its object; a pod the
//! init gate cannot read is allowed with no patch and a warning naming what is wrong.

use crate::support;

use serde_json::Value;
use support::*;

/// A 200-deep array: past serde_json's nesting limit (128).
pub(crate) fn over_deep() -> String {
    format!("{}1{}", "[".repeat(200), "]".repeat(200))
}

/// The fixture `name` with its request's `field` replaced by the JSON text `text`.
pub(crate) fn with_object(name: &str, field: &str, text: &str) -> Vec<u8> {
    let mut body: Value = serde_json::from_slice(&fixture(name)).unwrap();
    body["request"][field] = Value::String("__OBJECT__".into());
    serde_json::to_string(&body).unwrap().replacen("\"__OBJECT__\"", text, 1).into_bytes()
}

/// The handled kinds: a fixture of each and an object field its rule reads.
const HANDLED: [(&str, &str); 10] = [
    ("eviction-create.json", "object"),
    ("node-delete.json", "oldObject"),
    ("node-update-cordon.json", "object"),
    ("node-update-cordon.json", "oldObject"),
    ("setting-update-plain.json", "object"),
    ("setting-update-plain.json", "oldObject"),
    ("setting-update-node-drain-policy.json", "object"),
    ("volume-create.json", "object"),
    ("volume-update-replicas.json", "oldObject"),
    ("storageclass-create-longhorn-1-replica.json", "object"),
];

/// The malformed forms of an object (an array, a string, a shallow nest, a number, a nest past
/// serde_json's recursion limit) and what is wrong with each, as answers say it.
pub(crate) fn malformed() -> Vec<(String, &'static str)> {
    vec![
        ("[1]".into(), "expected a JSON object, found an array"),
        ("\"x\"".into(), "expected a JSON object, found a string"),
        ("[[[1]]]".into(), "expected a JSON object, found an array"),
        ("5".into(), "expected a JSON object, found a number"),
        (over_deep(), "recursion limit exceeded at line 1 column 128"),
    ]
}

/// The response's status: (allowed, code, message).
fn answer(resp: &Value) -> (bool, u64, String) {
    let r = &resp["response"];
    (
        r["allowed"].as_bool().unwrap(),
        r["status"]["code"].as_u64().unwrap_or(0),
        r["status"]["message"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn every_handled_kind_denies_a_malformed_or_over_deep_object_with_one_400() {
    let s = TestServer::start(test_limits()).await;
    // Every case is asked before any is judged, so a failure lists each wrong answer.
    let mut wrong = Vec::new();
    for (name, field) in HANDLED {
        for (text, why) in malformed() {
            let what = format!("{name} {field}={}", &text[..text.len().min(12)]);
            let body = with_object(name, field, &text);
            let want = (false, 400, format!("longhorn-guard: request.{field} is malformed: {why}"));
            // The same answer each time.
            for _ in 0..2 {
                let r = request(s.addr, &s.client, "POST", "/validate", body.clone()).await.unwrap();
                assert_eq!(r.status, 200, "{what}: {}", r.text());
                let resp = r.json();
                assert_review(&resp, &uid_of(&fixture(name)), &what);
                let (got, warnings) = (answer(&resp), &resp["response"]["warnings"]);
                if got != want || resp["response"]["status"]["reason"] != "BadRequest" || !warnings.is_null()
                {
                    wrong.push(format!("{what}: {got:?} warnings {warnings}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{} wrong answers:\n{}", wrong.len(), wrong.join("\n"));
    s.handle.shutdown();
    assert!(s.handle.stopped().await);
}

#[tokio::test]
async fn a_wrong_field_type_is_named_by_its_path() {
    let s = TestServer::start(test_limits()).await;
    let cases = [
        ("setting-update-plain.json", "object", r#"{"value":5}"#, "object.value", "must be a string"),
        (
            "volume-create.json",
            "object",
            r#"{"metadata":{"name":"v"},"spec":{"numberOfReplicas":"three"}}"#,
            "object.spec.numberOfReplicas",
            "invalid type: string \"three\", expected i64",
        ),
        (
            "node-update-cordon.json",
            "oldObject",
            r#"{"spec":{"unschedulable":"yes"}}"#,
            "oldObject.spec.unschedulable",
            "invalid type: string \"yes\", expected a boolean",
        ),
        (
            "storageclass-create-longhorn-1-replica.json",
            "object",
            r#"{"provisioner":"driver.longhorn.io","parameters":{"numberOfReplicas":2}}"#,
            "object.parameters.numberOfReplicas",
            "invalid type: integer `2`, expected a string",
        ),
        (
            "eviction-create.json",
            "object",
            r#"{"metadata":{"name":["x"]}}"#,
            "object.metadata.name",
            "invalid type: sequence, expected a string",
        ),
    ];
    for (name, field, text, path, why) in cases {
        let body = with_object(name, field, text);
        let r = request(s.addr, &s.client, "POST", "/validate", body).await.unwrap();
        let want = (false, 400, format!("longhorn-guard: request.{path} is malformed: {why}"));
        assert_eq!(answer(&r.json()), want, "{name} {field}");
    }
    s.handle.shutdown();
    assert!(s.handle.stopped().await);
}

#[tokio::test]
async fn a_kind_no_rule_handles_is_allowed_without_reading_its_object() {
    let s = TestServer::start(test_limits()).await;
    for name in ["replica-create-node-1.json", "pod-create-default.json", "node-create.json"] {
        for text in ["[1]".to_string(), over_deep()] {
            let body = with_object(name, "object", &text);
            let r = request(s.addr, &s.client, "POST", "/validate", body).await.unwrap();
            assert_eq!(answer(&r.json()), (true, 0, String::new()), "{name}");
        }
    }
    s.handle.shutdown();
    assert!(s.handle.stopped().await);
}

/// The init gate never blocks a pod: a pod CREATE whose object is no pod (on an instance
/// manager's request or any other pod's) is allowed with no patch and a warning that names
/// `request.object` and what is wrong with it.
#[tokio::test]
async fn the_gate_allows_a_pod_it_cannot_read_with_a_warning_naming_the_object() {
    let s = TestServer::start(test_limits()).await;
    let mut wrong = Vec::new();
    for name in ["pod-create-instance-manager-storage-network-mutating.json", "pod-create-default.json"] {
        for (text, why) in malformed() {
            let what = format!("{name} object={}", &text[..text.len().min(12)]);
            let r = request(s.addr, &s.client, "POST", "/mutate", with_object(name, "object", &text))
                .await
                .unwrap();
            assert_eq!(r.status, 200, "{what}: {}", r.text());
            let resp = r.json();
            assert_review(&resp, &uid_of(&fixture(name)), &what);
            let r = &resp["response"];
            let want = [format!("longhorn-guard: no init gate added: request.object is malformed: {why}")];
            if r["allowed"] != true || !r["patch"].is_null() || r["warnings"] != serde_json::json!(want) {
                wrong.push(format!("{what}: {r}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{} wrong answers:\n{}", wrong.len(), wrong.join("\n"));
    s.handle.shutdown();
    assert!(s.handle.stopped().await);
}
