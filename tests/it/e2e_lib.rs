//! The e2e harnesses' shared shell library (`e2e/lib.sh`), run by bash: a command that
//! stops a script names itself once, and a failure the script handles says nothing.

use std::process::Command;

/// Runs a script file of `body` under `set -euo pipefail` after sourcing lib.sh and
/// `say_where_stopped`, as the harnesses start.
fn script(body: &str) -> (i32, String, String) {
    let lib = concat!(env!("CARGO_MANIFEST_DIR"), "/e2e/lib.sh");
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("t.sh");
    let text = format!("set -euo pipefail\nSCRIPT_NAME=t\nsource {lib}\nsay_where_stopped\n{body}\n");
    std::fs::write(&path, text).expect("script written");
    let out = Command::new("bash").arg(&path).output().expect("bash runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_failure_handled_by_the_script_says_nothing() {
    let (rc, out, err) = script(
        "read -r x < <(printf 'a\\n' | grep -v a) || true\n\
         n=$(printf 'a\\n' | grep -c b || true)\n\
         if ! false; then echo handled; fi\n\
         echo \"done $n\"",
    );
    assert_eq!((rc, out.as_str(), err.as_str()), (0, "handled\ndone 0\n", ""));
}

#[test]
fn a_command_that_stops_the_script_names_itself_once() {
    let (rc, out, err) = script("echo before\ny=$(printf 'a\\n' | grep b)\necho after");
    assert_eq!(rc, 1);
    assert_eq!(out, "before\n");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("t: stopped: y="), "{err}");
    assert!(lines[0].ends_with("/t.sh line 6"), "{err}");
    assert!(lines[0].contains("failed (exit 1) at "), "{err}");
}
