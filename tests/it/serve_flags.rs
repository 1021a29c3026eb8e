//! `serve` refuses limits that would leave it answering nothing or stop its certificate
//! reloads: a usage error (exit 2) naming the flag, before anything starts.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_longhorn-guard");
const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/cluster-snapshot.yaml");

#[test]
fn zero_or_huge_timeouts_intervals_and_body_limits_are_usage_errors() {
    let certs = tempfile::tempdir().unwrap();
    for (flag, value, why) in [
        ("--tls-reload-interval", "0s", "must be longer than 0s"),
        ("--header-read-timeout", "0s", "must be longer than 0s"),
        ("--idle-timeout", "0ms", "must be longer than 0s"),
        ("--request-timeout", "0s", "must be longer than 0s"),
        ("--max-body-bytes", "0", "0 is not in 1.."),
        ("--max-confirmations", "0", "0 is not in 1.."),
        // Past any sane value, and past what the clock's arithmetic holds.
        ("--max-body-bytes", "67108865", "67108865 is not in 1..=67108864"),
        ("--request-timeout", "18446744073709551615s", "must be at most 24h"),
        ("--shutdown-grace", "25h", "must be at most 24h"),
        ("--shutdown-idle-wait", "25h", "must be at most 24h"),
        ("--check-interval", "1000000d", "must be at most 24h"),
        // One read per watched kind each round: faster only loads the API server.
        ("--freshness-probe-interval", "10ms", "must be 0s (off) or at least 100ms"),
        ("--freshness-probe-interval", "25h", "must be at most 24h"),
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
fn a_blank_client_ca_or_tls_variable_is_still_an_error() {
    // Unset, the client-CA one would silently turn client authentication off; a path of spaces
    // is not what anybody meant either.
    let certs = tempfile::tempdir().unwrap();
    for (var, flag) in [
        ("LONGHORN_GUARD_CLIENT_CA", "--client-ca"),
        ("LONGHORN_GUARD_TLS_DIR", "--tls-dir"),
        ("LONGHORN_GUARD_TLS_CERT", "--tls-cert"),
    ] {
        for blank in ["", "  "] {
            let mut cmd = Command::new(BIN);
            cmd.args(["serve", "--listen", "127.0.0.1:0", "--state", DEMO]);
            match var {
                "LONGHORN_GUARD_TLS_DIR" => {}
                // A --tls-dir flag would override the --tls-cert variable (flag wins).
                "LONGHORN_GUARD_TLS_CERT" => {
                    cmd.env("LONGHORN_GUARD_TLS_KEY", certs.path().join("tls.key"));
                }
                _ => {
                    cmd.arg("--tls-dir").arg(certs.path());
                }
            }
            let out = cmd.env(var, blank).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{var}={blank:?}: {err}");
            // Not "required arguments were not provided", which an unset variable would give.
            assert!(err.contains(&format!("a value is required for '{flag}")), "{var}={blank:?}: {err}");
        }
    }
}

#[test]
fn a_log_filter_the_logger_cannot_read_is_a_usage_error() {
    for (how, filter) in [("flag", "=["), ("variable", "longhorn_guard=loud")] {
        let mut cmd = Command::new(BIN);
        match how {
            "flag" => cmd.args(["--log-level", filter, "review", "--state", DEMO]),
            _ => cmd.env("LONGHORN_GUARD_LOG", filter).args(["review", "--state", DEMO]),
        };
        let out = cmd.stdin(std::process::Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{how} {filter}: {err}");
        assert!(err.contains("--log-level") && err.contains("not a log filter"), "{how} {filter}: {err}");
    }
}

/// `serve --state` reads its snapshot by the rules of `review` and `check drain`, whether or not
/// it also runs the `check cluster` checks (`--check-interval`): a snapshot those refuse would
/// otherwise serve allows from a view with volumes missing, or with none at all.
#[test]
fn serve_refuses_the_snapshots_review_refuses_with_or_without_checks() {
    let dir = tempfile::tempdir().unwrap();
    let demo = std::fs::read_to_string(DEMO).unwrap();
    let cases = [
        ("bad-volume.yaml", demo.replacen("numberOfReplicas: 2", "numberOfReplicas: one", 1), "item"),
        (
            "recurring-job-only.yaml",
            "apiVersion: longhorn.io/v1beta2\nkind: RecurringJob\nmetadata: {name: hourly, namespace: longhorn-system}\nspec: {task: snapshot, cron: '0 * * * *', retain: 2, concurrency: 1}\n".to_string(),
            "holds no object longhorn-guard reads",
        ),
        (
            "core-only.yaml",
            "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\n".to_string(),
            "holds no Longhorn object",
        ),
    ];
    for (name, text, why) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let review = Command::new(BIN).args(["review", "--state"]).arg(&path).output().unwrap();
        let review_err = String::from_utf8_lossy(&review.stderr);
        assert_eq!(review.status.code(), Some(2), "review {name}: {review_err}");
        assert!(review_err.contains(why), "review {name}: {review_err}");
        for interval in ["5m", "0s"] {
            let out = Command::new(BIN)
                .args(["serve", "--listen", "127.0.0.1:0", "--tls-dir"])
                .arg(dir.path())
                .arg("--state")
                .arg(&path)
                .args(["--check-interval", interval])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "serve {name} --check-interval {interval}: {err}");
            assert!(err.contains("state: ") && err.contains(why), "serve {name} {interval}: {err}");
        }
    }
}

#[test]
fn a_listen_address_that_is_not_ip_and_port_is_a_usage_error() {
    let certs = tempfile::tempdir().unwrap();
    for bad in ["nope", "localhost:8443", "127.0.0.1"] {
        let out = Command::new(BIN)
            .args(["serve", "--state", DEMO, "--listen", bad, "--tls-dir"])
            .arg(certs.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--listen") && err.contains("not an IP address and port"), "{bad}: {err}");
    }
}

#[test]
fn a_tls_flag_wins_over_the_variables_of_the_other_way() {
    // The variables name one way, the flags the other: the flags are used (here, files that do
    // not exist, so the error names them), not refused as conflicting.
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    type Case<'a> = (&'a [(&'a str, String)], Vec<String>, String);
    let cases: [Case; 2] = [
        (
            &[("LONGHORN_GUARD_TLS_DIR", path("env-dir"))],
            vec!["--tls-cert".into(), path("flag.crt"), "--tls-key".into(), path("flag.key")],
            path("flag.crt"),
        ),
        (
            &[("LONGHORN_GUARD_TLS_CERT", path("env.crt")), ("LONGHORN_GUARD_TLS_KEY", path("env.key"))],
            vec!["--tls-dir".into(), path("flag-dir")],
            path("flag-dir"),
        ),
    ];
    for (env, flags, named) in cases {
        let out = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--state", DEMO])
            .args(&flags)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {err}");
        assert!(err.contains(&named) && !err.contains("cannot be used with"), "{flags:?}: {err}");
    }
    // Both ways on the command line stay a usage error.
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--state", DEMO, "--tls-dir", "d", "--tls-cert", "c"])
        .args(["--tls-key", "k"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}
