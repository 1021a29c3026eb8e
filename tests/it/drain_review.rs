//! The captured eviction AdmissionReviews through `longhorn-guard review` (the same
//! Admitter code the server runs) against the shipped demo snapshot.

use crate::support::{self, run};

use std::process::Command;

use serde_json::{json, Value};

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/cluster-snapshot.yaml");

/// Runs `review --state DEMO [extra]` with `body` on stdin: (exit code, response, stderr).
fn review(body: &Value, extra: &[&str]) -> (i32, Value, String) {
    let out = run::with_stdin(
        Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
            .args(["review", "--state", DEMO])
            .args(extra)
            .env("LONGHORN_GUARD_LOG", "warn"),
        body.to_string().as_bytes(),
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let response = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap(), response, String::from_utf8(out.stderr).unwrap())
}

fn for_pod(name: &str, pod: &str) -> Value {
    let mut body = support::fixture_json(name);
    body["request"]["name"] = json!(pod);
    body
}

#[test]
fn captured_evictions_of_pods_the_snapshot_lacks_wait() {
    for name in
        ["eviction-create.json", "eviction-create-grace-period-0.json", "eviction-create-v1beta1.json"]
    {
        let (code, resp, err) = review(&support::fixture_json(name), &[]);
        assert_eq!(code, 1, "{name}: {err}");
        let r = &resp["response"];
        assert_eq!(r["allowed"], false, "{name}");
        assert_eq!(r["status"]["code"], 429, "{name}");
        assert_eq!(r["status"]["reason"], "TooManyRequests", "{name}");
        assert!(r["status"]["message"].as_str().unwrap().contains("it may be an instance manager"), "{name}");
        assert!(r["status"].get("details").is_none(), "no retryAfterSeconds");
        assert_eq!(r["uid"], support::fixture_json(name)["request"]["uid"]);
    }
}

#[test]
fn eviction_of_an_ordinary_pod_is_allowed() {
    let (code, resp, err) = review(&support::fixture_json("eviction-create-default-pod.json"), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(resp["response"]["allowed"], true);
    assert!(resp["response"].get("status").is_none());
}

#[test]
fn instance_manager_evictions_per_node() {
    // node-3: every replica there (v1 and v2) has a healthy copy on node-1/node-2.
    let node3 = for_pod("eviction-create.json", "instance-manager-e3a5c7b9d1f2406a8c0e2b4d6f8a1c3e");
    let (code, resp, err) = review(&node3, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(resp["response"]["allowed"], true);

    // node-1: vol-degraded is attached there and its only healthy replica lives there.
    let node1 =
        for_pod("eviction-create-grace-period-0.json", "instance-manager-5d1f0b6e2c9a47d38e4f7a1b0c2d3e4f");
    let (code, resp, _) = review(&node1, &[]);
    assert_eq!(code, 1);
    let msg = resp["response"]["status"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with(
            "longhorn-guard: draining node-1 would strand 2 volumes:\n- vol-degraded: attached to node-1"
        ),
        "{msg}"
    );
    // The v2 volume, through its SPDK instance manager's pod on node-1 as well.
    // Its other replica, on node-3, is healthy but on a cordoned node.
    let v2_line = "\n- vol-v2: attached to node-1 (engine and engine frontend running) and no other replica \
                   can protect it; move its workload (PVC default/data-kafka-0) off node-1 first";
    assert!(msg.ends_with(v2_line), "{msg}");
    let node1_v2 = for_pod("eviction-create.json", "instance-manager-7c2e9a4b1d0f43a68e5b9c1d2f3a4b5c");
    let (code, resp, _) = review(&node1_v2, &[]);
    assert_eq!(code, 1);
    assert_eq!(resp["response"]["status"]["message"].as_str().unwrap(), msg);

    // node-2 through the v1beta1-style body, with a fail-fast policy.
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "drain:\n  denyCode: 403\n").unwrap();
    let node2 = for_pod("eviction-create-v1beta1.json", "instance-manager-9b7e2d4c1a0f45e6b8c3d5f7e9a1b2c4");
    let (code, resp, _) = review(&node2, &["--policy", policy.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(resp["response"]["status"]["code"], 403);
    assert_eq!(resp["response"]["status"]["reason"], "Forbidden");
    let msg = resp["response"]["status"]["message"].as_str().unwrap();
    assert!(msg.contains("\n- vol-detached: 1 replica (numberOfReplicas=1)"), "{msg}");
    assert!(msg.contains("\n- vol-healthy: attached to node-2 (engine running)"), "{msg}");
}

#[test]
fn node_delete_and_cordon_fixtures() {
    let (code, resp, err) = review(&support::fixture_json("node-delete.json"), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(resp["response"]["allowed"], true);

    let (code, resp, err) = review(&support::fixture_json("node-update-cordon.json"), &[]);
    assert_eq!(code, 0, "{err}");
    let warnings = resp["response"]["warnings"].as_array().unwrap();
    assert!(warnings.len() >= 2);
    assert!(warnings.iter().all(|w| w.as_str().unwrap().chars().count() <= 120));
    assert!(warnings[1].as_str().unwrap().starts_with("vol-degraded: "));
}
