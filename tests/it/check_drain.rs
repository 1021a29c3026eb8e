//! `longhorn-guard check drain` against the shipped demo snapshot (the content of
//! `shared/fixtures/cluster/snapshot-three-nodes.json` plus a v2 volume, vol-v2, with SPDK
//! instance managers).

use crate::support;

use std::process::Command;

use serde_json::Value;
use support::check_drain as check;

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/cluster-snapshot.yaml");
const FIXTURE_JSON: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/cluster/snapshot-three-nodes.json");

#[test]
fn node_3_would_drain() {
    let (code, out, err) = check(&["node-3", "--state", DEMO]);
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert!(lines[0].starts_with("VOLUME       REPLICAS"), "{out}");
    for col in ["VOLUME", "REPLICAS", "PROTECTING", "VERDICT", "REASON"] {
        assert!(lines[0].contains(col), "{out}");
    }
    assert!(
        lines[1].starts_with("vol-healthy  node-3:RW,node-1:RW,node-2:RW  node-1:RW,node-2:RW  safe"),
        "{out}"
    );
    assert_eq!(
        lines[2],
        "vol-v2       node-3:RW,node-1:RW            node-1:RW            safe     protected by healthy replica on node-1"
    );
    // The doctor's part (tests/drain_doctor.rs): the demo holds no disruption budget. Then one
    // verdict line, and the command since the drain can go.
    assert_eq!(
        lines[3..],
        [
            "node-3: beyond longhorn-guard's verdicts (2 pods on node-3, 0 PodDisruptionBudgets read): no disruption \
             budget refuses a pod on the node, kubectl drain refuses no pod",
            "node-3: a drain would proceed (2 volumes checked, none blocking)",
            "node-3: drain with: kubectl drain node-3",
        ]
    );
}

/// A drain that blocks ends with its verdict: no `drain with:` line to read as advice to drain
/// now, and nothing saying twice that nothing else blocks.
#[test]
fn a_blocked_drain_ends_with_one_verdict_line_and_no_command() {
    let (code, out, err) = check(&["node-2", "--state", DEMO]);
    assert_eq!(code, 1, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert_eq!(
        lines[4..],
        [
            "node-2: beyond longhorn-guard's verdicts (2 pods on node-2, 0 PodDisruptionBudgets read): no disruption \
             budget refuses a pod on the node, kubectl drain refuses no pod",
            "node-2: a drain would BLOCK on 2 of 3 volumes",
        ]
    );
    assert!(!out.contains("drain with"), "{out}");
}

#[test]
fn node_1_and_node_2_would_block() {
    let (code, out, _) = check(&["node-1", "--state", DEMO]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("vol-degraded  node-1:RW,node-2:WO(0%,stalled)  -"), "{out}");
    assert!(out.contains("vol-v2        node-1:RW,node-3:RW              -           block    attached to node-1 (engine and engine frontend running)"), "{out}");
    assert!(out.contains("\nnode-1: a drain would BLOCK on 2 of 3 volumes\n"), "{out}");

    let (code, out, _) = check(&["node-2", "--state", FIXTURE_JSON]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("vol-detached  node-2:stopped"), "{out}");
    assert!(out.contains("block    1 replica (numberOfReplicas=1)"), "{out}");
    assert!(out.contains("\nnode-2: a drain would BLOCK on 2 of 3 volumes\n"), "{out}");
}

#[test]
fn json_output_for_scripts() {
    let (code, out, _) = check(&["node-2", "--state", DEMO, "--output", "json"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["node"], "node-2");
    assert_eq!(v["drain"], "block");
    let vols = v["volumes"].as_array().unwrap();
    let verdicts: Vec<(&str, &str)> =
        vols.iter().map(|v| (v["volume"].as_str().unwrap(), v["verdict"].as_str().unwrap())).collect();
    assert_eq!(verdicts, vec![("vol-degraded", "safe"), ("vol-detached", "block"), ("vol-healthy", "block")]);
    assert_eq!(vols[0]["protecting"][0], "vol-degraded-r-3f4a5b6c");
    assert_eq!(vols[0]["replicas"][0]["state"], "WO(0%,stalled)");
    assert_eq!(vols[0]["replicas"][0]["progress"], 0);

    let (code, out, _) = check(&["node-3", "--state", DEMO, "--output", "json"]);
    assert_eq!(code, 0);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["drain"], "proceed");
}

#[test]
fn bad_input_exits_2_with_a_clear_reason() {
    let (code, out, err) = check(&["node-9", "--state", DEMO]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(err.contains("node node-9 is not in the snapshot"), "{err}");
    assert!(err.contains("(known nodes: node-1, node-2, node-3)"), "{err}");

    let (code, _, err) = check(&["node-1", "--state", "/nonexistent/snapshot.yaml"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/snapshot.yaml: cannot read"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("policy.yaml");
    std::fs::write(&bad, "drain:\n  acton: warn\n").unwrap();
    let (code, _, err) = check(&["node-1", "--state", DEMO, "--policy", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown field"), "{err}");

    // A file that is empty or no snapshot is refused: an empty view would let every drain through.
    let admission_review =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/admission/eviction-create.json");
    for (text, why) in [
        ("", "holds no object longhorn-guard reads"),
        ("# kubectl get failed\n", "holds no object longhorn-guard reads"),
        ("apiVersion: v1\nkind: List\nitems: []\n", "holds no object longhorn-guard reads"),
        (&std::fs::read_to_string(admission_review).unwrap(), "holds no object longhorn-guard reads"),
        ("foo: bar\n", "missing apiVersion or kind"),
        ("42\n", "expected an object, found a number"),
        // Core objects only (the longhorn-system half of a snapshot recipe failed): every
        // drain would look safe.
        (
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: node-1}\n",
            "holds no Longhorn object",
        ),
    ] {
        let f = dir.path().join("snap.yaml");
        std::fs::write(&f, text).unwrap();
        let (code, out, err) = check(&["node-1", "--state", f.to_str().unwrap()]);
        assert_eq!(code, 2, "{text:?}: {out}{err}");
        assert!(err.contains(why), "{text:?}: {err}");
    }
}

#[test]
fn a_yaml_snapshot_past_the_yaml_parser_default_limits_is_read() {
    // 30,000 more core Nodes (about 500,000 YAML nodes: twice serde-saphyr's default budget);
    // they hold no volume, so node-2's answer is the demo's.
    let mut text = std::fs::read_to_string(DEMO).unwrap();
    text.push_str("\n---\napiVersion: v1\nkind: List\nitems:\n");
    for i in 0..30_000 {
        text.push_str(&format!(
            "- apiVersion: v1\n  kind: Node\n  metadata:\n    name: extra-{i}\n    labels: {{a: b, c: d, e: f}}\n"
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.yaml");
    std::fs::write(&big, text).unwrap();
    let (code, out, err) = check(&["node-2", "--state", big.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(out, check(&["node-2", "--state", DEMO]).1);
}

#[test]
fn policy_relaxes_stopped_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("policy.yaml");
    std::fs::write(&p, "drain:\n  protectStoppedReplicas: false\n").unwrap();
    let (code, out, _) = check(&["node-2", "--state", DEMO, "--policy", p.to_str().unwrap()]);
    assert_eq!(code, 1, "vol-healthy is still attached to node-2");
    let line = out.lines().find(|l| l.starts_with("vol-detached ")).unwrap();
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols[..4], ["vol-detached", "node-2:stopped", "-", "safe"], "{out}");
    assert!(line.ends_with(
        "replica on node-2 is stopped and the volume detached (drain.protectStoppedReplicas: false)"
    ));
    assert!(out.contains("\nnode-2: a drain would BLOCK on 1 of 3 volumes\n"), "{out}");
}

#[test]
fn a_reader_that_goes_away_ends_the_output_without_a_panic() {
    // `check drain ... | head -1`: the pipe's reader is gone before the table is written.
    for args in [&["node-1", "--state", DEMO][..], &["node-3", "--state", DEMO, "--output", "json"]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
            .args(["check", "drain"])
            .args(args)
            .env("LONGHORN_GUARD_LOG", "warn")
            .stdout(writer)
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(out.status.code(), Some(if args[0] == "node-1" { 1 } else { 0 }), "{err}");
    }
}

#[test]
fn output_that_cannot_be_written_is_an_error() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
        .args(["check", "drain", "node-3", "--state", DEMO])
        .env("LONGHORN_GUARD_LOG", "warn")
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("longhorn-guard check drain: cannot write to standard output: "), "{err}");
}

#[test]
fn standard_error_that_cannot_be_written_never_changes_the_exit_status() {
    // Standard error closed (its reader gone) or full: the messages and log lines are lost,
    // the exit status is still the command's answer, never a panic's 101.
    let eviction = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/eviction-node-2.json");
    let lint_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/lint/manifests");
    let cases: [(&[&str], i32); 5] = [
        (&["review", "--state", DEMO], 1),
        (&["check", "drain", "node-9", "--state", DEMO], 2),
        (&["check", "cluster", "--state", "/nonexistent.yaml"], 2),
        (&["lint", lint_dir], 0),
        (&["check", "drain", "node-1", "--state", DEMO], 1),
    ];
    for (args, code) in cases {
        for closed in [true, false] {
            let stderr: std::process::Stdio = if closed {
                let (reader, writer) = std::io::pipe().unwrap();
                drop(reader);
                writer.into()
            } else {
                std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap().into()
            };
            let out = Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
                .args(args)
                .env("LONGHORN_GUARD_LOG", "debug")
                .env_remove("LONGHORN_GUARD_POLICY")
                .stdin(std::fs::File::open(eviction).unwrap())
                .stderr(stderr)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(code), "{args:?} (stderr closed: {closed})");
        }
    }
}
