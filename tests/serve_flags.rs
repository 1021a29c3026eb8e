//! `serve` refuses limits that would leave it answering nothing or stop its certificate
//! reloads: a usage error (exit 2) naming the flag, before anything starts.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_longhorn-guard");
const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/cluster-snapshot.yaml");

#[test]
fn zero_timeouts_intervals_and_body_limits_are_usage_errors() {
    let certs = tempfile::tempdir().unwrap();
    for (flag, value, why) in [
        ("--tls-reload-interval", "0s", "must be longer than 0s"),
        ("--header-read-timeout", "0s", "must be longer than 0s"),
        ("--idle-timeout", "0ms", "must be longer than 0s"),
        ("--request-timeout", "0s", "must be longer than 0s"),
        ("--max-body-bytes", "0", "0 is not in 1.."),
        ("--max-confirmations", "0", "0 is not in 1.."),
    ] {
        let out = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--state", DEMO, "--tls-dir"])
            .arg(certs.path())
            .args([flag, value])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(err.contains(flag) && err.contains(why), "{flag} {value}: {err}");
    }
}

#[test]
fn a_blank_client_ca_variable_is_still_an_error() {
    // Unset, it would silently turn client authentication off.
    let certs = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--state", DEMO, "--tls-dir"])
        .arg(certs.path())
        .env("LONGHORN_GUARD_CLIENT_CA", "")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--client-ca"), "{err}");
}
