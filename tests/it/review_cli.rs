//! `longhorn-guard review` as a process: exit 0 allowed, 1 denied, 2 bad input with a
//! one-line reason on stderr; `--webhook mutate` answers with a base64 JSONPatch, and allows a
//! pod it cannot read with a warning and a WARN line.

use crate::support::{self, run, FIXTURES};

use std::process::{Command, Output};

use base64::Engine as _;
use serde_json::Value;

fn snapshot() -> String {
    format!("{FIXTURES}/cluster/snapshot-three-nodes.yaml")
}

/// Runs `longhorn-guard review ARGS` with `stdin`, no policy/state from the environment and the
/// default log level, so stderr holds exactly what a user sees.
fn review(args: &[&str], stdin: &[u8]) -> Output {
    run::with_stdin(
        Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
            .arg("review")
            .args(args)
            .env_remove("LONGHORN_GUARD_STATE")
            .env_remove("LONGHORN_GUARD_POLICY")
            .env_remove("LONGHORN_GUARD_LOG_FORMAT")
            .env_remove("LONGHORN_GUARD_LOG"),
        stdin,
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit 2, nothing on stdout, exactly one stderr line naming the command and `want`.
fn assert_bad_input(out: &Output, want: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("longhorn-guard review: "), "{err}");
    assert!(err.contains(want), "want {want:?} in {err}");
}

fn response(out: &Output) -> Value {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "AdmissionReview");
    v["response"].clone()
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let state = snapshot();
    let eviction = support::shared_fixture("admission/eviction-create-default-pod.json");

    assert_bad_input(&review(&["--state", &state], b""), "request body is empty");
    assert_bad_input(&review(&["--state", &state], b"{}"), "request body is not an AdmissionReview");
    assert_bad_input(&review(&["--state", &state], b"not json"), "request body is not JSON");

    let missing = dir.path().join("no-such-snapshot.yaml");
    assert_bad_input(
        &review(&["--state", missing.to_str().unwrap()], &eviction),
        "no-such-snapshot.yaml: cannot read",
    );

    let malformed = dir.path().join("malformed.yaml");
    std::fs::write(&malformed, "a: [b").unwrap();
    assert_bad_input(&review(&["--state", malformed.to_str().unwrap()], &eviction), "not valid JSON or YAML");

    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "drain:\n  denyCode: 200\n").unwrap();
    assert_bad_input(
        &review(&["--state", &state, "--policy", policy.to_str().unwrap()], &eviction),
        "denyCode must be 400..599",
    );
    std::fs::write(&policy, "drain:\n  acton: warn\n").unwrap();
    assert_bad_input(
        &review(&["--state", &state, "--policy", policy.to_str().unwrap()], &eviction),
        "unknown field `acton`",
    );
}

#[test]
fn allowed_exits_0_and_denied_exits_1() {
    let state = snapshot();
    let out =
        review(&["--state", &state], &support::shared_fixture("admission/eviction-create-default-pod.json"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(response(&out)["allowed"], true);

    // The captured eviction names an instance-manager pod the snapshot lacks: refused.
    let out = review(&["--state", &state], &support::shared_fixture("admission/eviction-create.json"));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let r = response(&out);
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["code"], 429);
    assert!(r["status"]["message"].as_str().unwrap().contains("is not in the snapshot"), "{r}");
}

#[test]
fn mutate_returns_a_base64_json_patch() {
    let state = snapshot();
    let out = review(
        &["--state", &state, "--webhook", "mutate"],
        &support::shared_fixture("admission/pod-create-instance-manager-storage-network-mutating.json"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = response(&out);
    assert_eq!(r["allowed"], true);
    assert_eq!(r["patchType"], "JSONPatch");
    let patch = base64::engine::general_purpose::STANDARD.decode(r["patch"].as_str().unwrap()).unwrap();
    let ops: Value = serde_json::from_slice(&patch).unwrap();
    let ops = ops.as_array().unwrap();
    assert!(!ops.is_empty());
    assert!(ops.iter().all(|op| op["op"].is_string() && op["path"].is_string()), "{ops:?}");
    assert!(
        ops.iter().any(|op| op["path"].as_str().unwrap().contains("initContainers")),
        "the gate is injected: {ops:?}"
    );
}

/// `review --webhook mutate` on a pod CREATE whose object is no pod, in each malformed form:
/// allowed, no patch, a warning naming the unreadable object, and one WARN log line with the
/// reason, as a new user sees them (default log level).
#[test]
fn mutate_allows_an_unreadable_pod_with_a_warning_and_a_warn_line() {
    let name = "pod-create-instance-manager-storage-network-mutating.json";
    for (text, why) in crate::malformed_objects::malformed() {
        let what = &text[..text.len().min(12)];
        let body = crate::malformed_objects::with_object(name, "object", &text);
        let out = review(&["--state", &snapshot(), "--webhook", "mutate"], &body);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
        let r = response(&out);
        assert_eq!(r["allowed"], true, "{what}: {r}");
        assert!(r["patch"].is_null() && r["patchType"].is_null(), "{what}: {r}");
        let reason = format!("request.object is malformed: {why}");
        assert_eq!(
            r["warnings"],
            serde_json::json!([format!("longhorn-guard: no init gate added: {reason}")]),
            "{what}"
        );
        let err = stderr(&out);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{what}: {err}");
        assert!(
            lines[0].contains(" WARN longhorn_guard::admit: admission allowed with an unreadable object ")
                && lines[0].contains(" webhook=\"mutate\" ")
                && lines[0].ends_with(&format!(" reason={reason}")),
            "{what}: {err}"
        );
    }
}

/// The log contract: a denial is one WARN line, `admission denied`, with its fields and
/// reason, request-supplied text escaped so it cannot start a line of its own.
#[test]
fn a_denial_is_one_log_line_with_its_fields_and_reason() {
    let mut body: Value =
        serde_json::from_slice(&support::shared_fixture("admission/eviction-create.json")).unwrap();
    body["request"]["uid"] = Value::from("u-1\nforged ERROR line\\n");
    let out = run::with_stdin(
        Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
            .args(["--log-format", "text", "--log-level", "info", "review", "--state", &snapshot()])
            .env_remove("LONGHORN_GUARD_POLICY"),
        &serde_json::to_vec(&body).unwrap(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    let line = lines[0];
    assert!(
        line.contains(" WARN longhorn_guard::admit: admission denied uid=u-1\\nforged ERROR line\\\\n "),
        "{line}"
    );
    for field in [
        "user=kubernetes-admin",
        "webhook=\"validate\"",
        "resource=pods/eviction",
        "operation=\"CREATE\"",
        "namespace=longhorn-system",
        "name=instance-manager-7b9c5d2e1f3a",
        "rule=\"drain\"",
        "decision=\"deny\"",
        "code=429",
        "reason=longhorn-guard: pod longhorn-system/instance-manager-7b9c5d2e1f3a is not in the snapshot",
    ] {
        assert!(line.contains(&format!(" {field}")), "{field} in {line}");
    }
}
