//! Every command that takes `--policy` reads `LONGHORN_GUARD_POLICY` when the flag is absent.

use crate::support::run;

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_longhorn-guard");
const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/upstream");
const EVICTION: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/admission/eviction-create.json");

/// Runs the binary with `LONGHORN_GUARD_POLICY=policy` and `stdin`: (exit code, stdout, stderr).
fn run(args: &[&str], policy: &std::path::Path, stdin: &[u8]) -> (i32, String, String) {
    let out = run::with_stdin(
        Command::new(BIN).args(args).env("LONGHORN_GUARD_POLICY", policy).env("LONGHORN_GUARD_LOG", "warn"),
        stdin,
    );
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn a_bad_policy_in_the_environment_stops_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "drain:\n  stallAfter: 8d\n").unwrap();
    let want = "drain.stallAfter must be at most 7d, got 8d";
    let state = format!("{DATA}/stopped-last-replica.yaml");
    let certs = dir.path().join("certs");
    let eviction = std::fs::read(EVICTION).unwrap();
    for (args, stdin, code) in [
        (vec!["review", "--state", &state], &eviction[..], 2),
        (vec!["lint", "-"], b"apiVersion: v1\nkind: List\nitems: []\n".as_slice(), 2),
        (vec!["check", "drain", "node-1", "--state", &state], b"".as_slice(), 2),
        (
            vec!["serve", "--listen", "127.0.0.1:0", "--state", &state, "--tls-dir", certs.to_str().unwrap()],
            b"".as_slice(),
            1,
        ),
    ] {
        let (got, out, err) = run(&args, &policy, stdin);
        assert_eq!(got, code, "{args:?}: {out}{err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn a_good_policy_in_the_environment_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "drain:\n  protectStoppedReplicas: false\n").unwrap();
    let state = format!("{DATA}/stopped-last-replica.yaml");
    // Without the policy node-1's stopped last replica blocks (tests/upstream.rs).
    let (code, out, err) = run(&["check", "drain", "node-1", "--state", &state], &policy, b"");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("(drain.protectStoppedReplicas: false)"), "{out}");
    // The flag wins over the environment.
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "").unwrap();
    let (code, out, _) = run(
        &["check", "drain", "node-1", "--state", &state, "--policy", empty.to_str().unwrap()],
        &policy,
        b"",
    );
    assert_eq!(code, 1, "{out}");
}

#[test]
fn a_blank_variable_counts_as_unset() {
    // A chart that renders `value: ""` for an option it leaves unset: the default applies.
    let state = format!("{DATA}/stopped-last-replica.yaml");
    for blank in ["", "  "] {
        let (code, out, err) =
            run(&["check", "drain", "node-1", "--state", &state], std::path::Path::new(blank), b"");
        assert_eq!(code, 1, "LONGHORN_GUARD_POLICY={blank:?}: the default policy blocks: {out}{err}");
        assert!(!err.contains("a value is required"), "{err}");
    }
}
