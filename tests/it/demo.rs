//! The README's demo requests decide as the README says, against the shipped demo snapshot.

use crate::support::run;

use std::process::Command;

use serde_json::Value;

fn review(request: &str) -> (i32, Value) {
    let root = env!("CARGO_MANIFEST_DIR");
    let body = std::fs::read(format!("{root}/demo/{request}")).unwrap();
    let out = run::with_stdin(
        Command::new(env!("CARGO_BIN_EXE_longhorn-guard")).args([
            "review",
            "--state",
            &format!("{root}/demo/cluster-snapshot.yaml"),
        ]),
        &body,
    );
    (out.status.code().unwrap(), serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn draining_node_2_is_denied_naming_both_volumes() {
    let (code, r) = review("eviction-node-2.json");
    assert_eq!(code, 1);
    let status = &r["response"]["status"];
    assert_eq!(status["code"], 429);
    assert_eq!(status["reason"], "TooManyRequests");
    let msg = status["message"].as_str().unwrap();
    assert!(msg.starts_with("longhorn-guard: draining node-2 would strand 2 volumes:"), "{msg}");
    assert!(msg.contains("\n- vol-detached: 1 replica (numberOfReplicas=1)"), "{msg}");
    assert!(msg.contains("\n- vol-healthy: attached to node-2"), "{msg}");
}

#[test]
fn draining_node_3_is_allowed() {
    let (code, r) = review("eviction-node-3.json");
    assert_eq!(code, 0);
    assert_eq!(r["response"]["allowed"], true);
    assert!(r["response"].get("warnings").is_none());
}

#[test]
fn lowering_default_replica_count_warns() {
    let (code, r) = review("setting-update.json");
    assert_eq!(code, 0);
    assert_eq!(
        r["response"]["warnings"],
        serde_json::json!([
            "longhorn-guard: default-replica-count v1=2, v2=2: 2 replicas tolerate 1 node failure; policy minimum is 3"
        ])
    );
}
