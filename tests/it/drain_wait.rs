//! `check drain NODE --wait` against the stand-in API server with watches
//! (tests/support/watchapi.rs): the fixture snapshot with vol-healthy's engine rebuilding its
//! node-1 replica (node-2's in ERR), so node-3 holds its last healthy replica until the rebuild
//! completes. Plain lines through a pipe, the in-place display in a pseudo-terminal (`script`
//! from util-linux), exit 0 once the rebuild completes, 1 at the timeout, and nothing but
//! reads.

use crate::support;

use std::io::Read as _;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};
use support::generated::{fixture_items, named};
use support::watchapi::WatchApi;

/// vol-healthy's engine with node-1's replica rebuilding at `progress` (from node-3's) and
/// node-2's in ERR; `None`: the rebuild done, node-1's replica RW again.
fn engine(items: &[Value], progress: Option<i64>) -> Value {
    let mut e = named(items, "Engine", "vol-healthy-e-0").clone();
    let status = &mut e["status"];
    status["replicaModeMap"] = json!({
        "vol-healthy-r-1a2b3c4d": if progress.is_some() { "WO" } else { "RW" },
        "vol-healthy-r-5e6f7a8b": "ERR",
        "vol-healthy-r-9c0d1e2f": "RW",
    });
    status["rebuildStatus"] = match progress {
        Some(p) => json!({"tcp://10.42.0.15:10000": {
            "error": "", "fromReplicaAddress": "tcp://10.42.2.9:10000",
            "isRebuilding": true, "progress": p, "state": "in_progress"}}),
        None => json!({}),
    };
    e
}

/// The stand-in with vol-healthy's engine as [`engine`] gives it for `progress`.
async fn start(progress: Option<i64>) -> (WatchApi, Vec<Value>) {
    support::install_provider();
    let mut items = fixture_items();
    let e = engine(&items, progress);
    for i in &mut items {
        if i["kind"] == "Engine" && i["metadata"]["name"] == "vol-healthy-e-0" {
            *i = e.clone();
        }
    }
    (WatchApi::start(items.clone()).await, items)
}

/// The binary with KUBECONFIG naming the stand-in; `via_script` runs it in a pseudo-terminal.
fn command(api: &WatchApi, dir: &tempfile::TempDir, args: &[&str], via_script: bool) -> Command {
    let kubeconfig = support::kubeconfig(dir.path(), api.addr, &api.certs.path().join("ca.crt"));
    let bin = env!("CARGO_BIN_EXE_longhorn-guard");
    let mut cmd = if via_script {
        let line = std::iter::once(bin)
            .chain(["check", "drain"])
            .chain(args.iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        let mut c = Command::new("script");
        c.args(["-qefc", &line, "/dev/null"]);
        c
    } else {
        let mut c = Command::new(bin);
        c.args(["check", "drain"]).args(args);
        c
    };
    cmd.env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("LONGHORN_GUARD_LOG", "warn")
        .env("COLUMNS", "200")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The child's standard output as it comes, in chunks, through a channel.
fn output_of(child: &mut Child) -> mpsc::Receiver<String> {
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stdout.read(&mut buf) {
            if tx.send(String::from_utf8_lossy(&buf[..n]).into_owned()).is_err() {
                return;
            }
        }
    });
    rx
}

/// Reads from `rx` into `seen` until it holds `want` (30 s at most).
fn until(rx: &mpsc::Receiver<String>, seen: &mut String, want: &str) {
    while !seen.contains(want) {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(chunk) => seen.push_str(&chunk),
            Err(e) => panic!("{e} before {want:?}: {seen:?}"),
        }
    }
}

/// Waits for the child to exit (20 s at most) and gives its exit code.
fn exit_code(mut child: Child) -> Option<i32> {
    for _ in 0..200 {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("still running");
}

/// Every request the stand-in got was a read (it records other methods as `METHOD path`).
fn only_reads(api: &WatchApi) {
    let requests = api.requests();
    assert!(!requests.is_empty());
    assert!(requests.iter().all(|r| r.starts_with('/')), "{requests:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pipe_gets_one_line_per_change_and_exit_0_once_the_rebuild_completes() {
    let (api, items) = start(Some(40)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut child = command(&api, &dir, &["node-3", "--wait", "--timeout", "60s"], false).spawn().unwrap();
    let rx = output_of(&mut child);
    let mut seen = String::new();
    tokio::task::block_in_place(|| until(&rx, &mut seen, "\n"));
    assert!(seen.starts_with("node-3: waiting on vol-healthy (rebuild 40%): "), "{seen}");
    api.modify(engine(&items, Some(70)));
    tokio::task::block_in_place(|| until(&rx, &mut seen, "(rebuild 70%)"));
    api.modify(engine(&items, None));
    tokio::task::block_in_place(|| until(&rx, &mut seen, "any more\n"));
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(lines.len(), 4, "{seen}");
    assert!(lines[1].starts_with("node-3: waiting on vol-healthy (rebuild 70%): "), "{seen}");
    assert_eq!(lines[2], "node-3: vol-healthy no longer blocks");
    assert_eq!(lines[3], "node-3: nothing of longhorn-guard's blocks a drain any more");
    assert_eq!(tokio::task::block_in_place(|| exit_code(child)), Some(0));
    only_reads(&api);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_timeout_exits_1_with_what_still_blocks() {
    let (api, _) = start(Some(40)).await;
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::task::block_in_place(|| {
        command(&api, &dir, &["node-3", "--wait", "--timeout", "2s"], false).output().unwrap()
    });
    let (stdout, stderr) = (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("node-3: waiting on vol-healthy (rebuild 40%): "), "{stdout}");
    assert_eq!(lines[1], "node-3: timed out after 2s; a drain would still BLOCK on:");
    assert_eq!(lines[2], format!("  {}", &lines[0]["node-3: waiting on ".len()..]));
    assert_eq!(lines.len(), 3, "{stdout}");
    only_reads(&api);

    let out = tokio::task::block_in_place(|| {
        command(&api, &dir, &["node-9", "--wait", "--timeout", "5s"], false).output().unwrap()
    });
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "longhorn-guard check drain: node node-9 is not in the cluster\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_gets_a_progress_bar_redrawn_in_place() {
    let (api, items) = start(Some(40)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut child = command(&api, &dir, &["node-3", "--wait", "--timeout", "60s"], true).spawn().unwrap();
    let rx = output_of(&mut child);
    let mut seen = String::new();
    tokio::task::block_in_place(|| until(&rx, &mut seen, "vol-healthy  [########------------]  40%  "));
    api.modify(engine(&items, Some(70)));
    tokio::task::block_in_place(|| until(&rx, &mut seen, "vol-healthy  [##############------]  70%  "));
    api.modify(engine(&items, None));
    tokio::task::block_in_place(|| {
        until(&rx, &mut seen, "node-3: nothing of longhorn-guard's blocks a drain any more")
    });
    assert_eq!(tokio::task::block_in_place(|| exit_code(child)), Some(0));
    // Each redraw moves up over the header and the volume's line and clears them.
    let redraws = seen.matches("\x1b[2A\x1b[J").count();
    assert!(redraws >= 2, "{seen:?}");
    assert!(seen.starts_with("node-3: waiting "), "{seen:?}");
    assert!(seen.contains("s for:\r\nvol-healthy  [########------------]  40%  "), "{seen:?}");
    // Not one plain change line: the terminal gets the in-place display only.
    assert!(!seen.contains("waiting on vol-healthy"), "{seen:?}");
    only_reads(&api);
}

/// An operator's command is quiet by default: its answer on stdout and nothing on stderr; the
/// watches' start (one INFO line per kind listed, then "cluster view synced") only with `-v`
/// or a `--log-level` / `LONGHORN_GUARD_LOG` that asks for it.
#[tokio::test(flavor = "multi_thread")]
async fn the_watches_start_is_logged_only_when_asked_for() {
    let (api, _) = start(None).await;
    let dir = tempfile::tempdir().unwrap();
    let answer = "node-3: nothing of longhorn-guard's blocks a drain any more\n";
    for (flags, env, logged) in [
        (&[][..], None, false),
        (&["-v"][..], None, true),
        (&[][..], Some("info"), true),
        (&["--log-level", "info"][..], None, true),
        (&["-v"][..], Some("warn"), false),
    ] {
        let mut args = vec!["node-3", "--wait", "--timeout", "60s"];
        args.extend(flags);
        let mut cmd = command(&api, &dir, &args, false);
        match env {
            Some(filter) => cmd.env("LONGHORN_GUARD_LOG", filter),
            None => cmd.env_remove("LONGHORN_GUARD_LOG"),
        };
        let out =
            tokio::task::block_in_place(|| cmd.env_remove("LONGHORN_GUARD_LOG_FORMAT").output().unwrap());
        let (stdout, stderr) =
            (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
        assert_eq!(out.status.code(), Some(0), "{flags:?} {env:?}: {stdout}{stderr}");
        assert_eq!(stdout, answer, "{flags:?} {env:?}");
        if logged {
            let listed =
                stderr.lines().filter(|l| l.contains(" INFO ") && l.contains(" listed kind=")).count();
            assert!(listed >= 10, "{flags:?} {env:?}: {stderr}");
            // How long each list took and what it cost to apply (make scale reads them).
            let timed = stderr.lines().filter(|l| l.contains(" listed kind=") && l.contains(" list_ms="));
            assert_eq!(timed.filter(|l| l.contains(" apply_ms=")).count(), listed, "{stderr}");
            let synced = stderr.lines().find(|l| l.contains("cluster view synced"));
            let synced = synced.unwrap_or_else(|| panic!("{flags:?} {env:?}: {stderr}"));
            assert!(synced.contains(" sync_ms=") && synced.contains(" oldest_kind="), "{synced}");
        } else {
            assert_eq!(stderr, "", "{flags:?} {env:?}");
        }
    }
    only_reads(&api);
}
