//! The served webhook (real TLS on 127.0.0.1:0) denies the eviction of an instance manager
//! whose only work for a v2 volume is an engine frontend, naming the volume, and one whose
//! engine no known volume owns, naming the entry.

use crate::support;

use std::path::Path;
use std::sync::Arc;

use longhorn_guard::admit::Admitter;
use longhorn_guard::cluster::{snapshot, SharedView};
use longhorn_guard::policy::Policy;
use serde_json::{json, Value};
use support::*;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/upstream");

/// POSTs the captured eviction, renamed to `pod`, to /validate of a server on `file`.
async fn validate(file: &str, pod: &str) -> Value {
    let view = SharedView::new(snapshot::load(Path::new(&format!("{DATA}/{file}"))).unwrap());
    let server = TestServer::with_admitter(Admitter::new(view, Arc::new(Policy::default()), None)).await;
    let mut body: Value = serde_json::from_slice(&fixture("eviction-create.json")).unwrap();
    body["request"]["name"] = json!(pod);
    let r = request(server.addr, &server.client, "POST", "/validate", body.to_string().into_bytes())
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_review(&v, body["request"]["uid"].as_str().unwrap(), file);
    v
}

#[tokio::test]
async fn an_engine_frontend_alone_blocks_over_https() {
    let v = validate("v2-engine-frontend-only.yaml", "instance-manager-v2-node-1").await;
    let r = &v["response"];
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["code"], 429);
    assert_eq!(
        r["status"]["message"],
        "longhorn-guard: draining node-1 would strand 1 volume:\n\
         - vol-v2: attached to node-1 (engine frontend running in its instance manager); move its workload off node-1 first"
    );
}

#[tokio::test]
async fn an_unmapped_engine_blocks_over_https() {
    let v = validate("unmapped-engine-entry.yaml", "instance-manager-v1-node-1").await;
    let r = &v["response"];
    assert_eq!(r["allowed"], false);
    let msg = r["status"]["message"].as_str().unwrap();
    assert!(
        msg.contains(
            "- engine pvc-0d1e-e-4 in instance manager instance-manager-v2-node-1: no known volume owns it"
        ),
        "{msg}"
    );
}
