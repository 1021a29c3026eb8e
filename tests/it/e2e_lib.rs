//! The e2e harnesses' shared shell library (`e2e/lib.sh`) and helpers they source, run by
//! bash: a command that stops a script names itself once, and a failure the script handles
//! says nothing.

use std::path::Path;
use std::process::Command;

const E2E: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/e2e");

/// Runs a script file of `body` under `set -euo pipefail` after sourcing lib.sh and
/// `say_where_stopped`, as the harnesses start.
fn script(body: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().expect("temporary directory");
    script_in(dir.path(), body)
}

/// [`script`] with its file in `dir`, with `dir/bin` first on PATH.
fn script_in(dir: &Path, body: &str) -> (i32, String, String) {
    let path = dir.join("t.sh");
    let text = format!("set -euo pipefail\nSCRIPT_NAME=t\nsource {E2E}/lib.sh\nsay_where_stopped\n{body}\n");
    std::fs::write(&path, text).expect("script written");
    let search = format!("{}/bin:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("bash").arg(&path).env("PATH", search).output().expect("bash runs");
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

#[test]
fn a_lookup_with_an_empty_answer_is_no_stop() {
    let (rc, out, err) = script(
        "x=$(value false)\n\
         y=$(printf 'a\\n' | matching b | sed -n 1p)\n\
         z=$(value printf 'b c\\n' | awk '{print $1}')\n\
         echo \"[$x] [$y] [$z]\"",
    );
    assert_eq!((rc, out.as_str(), err.as_str()), (0, "[] [] [b]\n", ""));
}

/// `dir/bin` holding the stand-in `kubectl` (the text of `script`), executable, and an empty
/// file for each of `modes` (what the stand-in reads to choose its answers).
fn stand_in(dir: &Path, script: &str, modes: &[&str]) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).expect("bin directory");
    std::fs::write(bin.join("kubectl"), script).expect("stand-in written");
    let chmod = Command::new("chmod").arg("+x").arg(bin.join("kubectl")).status().expect("chmod runs");
    assert!(chmod.success());
    for m in modes {
        std::fs::write(bin.join(m), "").expect("mode written");
    }
    bin
}

/// A stand-in kubectl answering as kubectl does once the instance-manager pod on node-3 is
/// deleted: made again (`remade` in its directory) or not, with no event about it. A jsonpath
/// index into the empty event list fails (kubectl 1.32: "array index out of bounds"); a range
/// prints nothing.
const KUBECTL: &str = r#"#!/usr/bin/env bash
state=${0%/*}
args=" $* "
echo "$args" >>"$state/calls"
case $args in
*" delete pod "*) touch "$state/deleted" ;;
*" get pods -l longhorn.io/component=instance-manager "*) printf instance-manager-3 ;;
*" get events "*--no-headers*) echo "No resources found in longhorn-system namespace." >&2 ;;
*" get events "*"[-1:]"* | *" get events "*"[0]"*)
	echo "error: error executing jsonpath: array index out of bounds: index -1, length 0" >&2
	exit 1
	;;
*" get pod instance-manager-3 "*)
	if [ -f "$state/deleted" ] && [ ! -f "$state/remade" ]; then
		echo 'Error from server (NotFound): pods "instance-manager-3" not found' >&2
		exit 1
	fi
	uid=uid-1
	if [ -f "$state/deleted" ]; then uid=uid-2; fi
	case $args in
	*metadata.uid*) printf %s "$uid" ;;
	*status.podIP*) printf 10.233.3.20 ;;
	*status.phase*) printf Running ;;
	*startedAt*) printf 2026-12-07T10:00:05Z ;;
	*" -o json "*) printf '{"metadata": {"uid": "%s"}, "status": {"phase": "Running"}}' "$uid" ;;
	esac
	;;
*" get instancemanagers.longhorn.io "*)
	echo 'Error from server (NotFound): instancemanagers.longhorn.io "instance-manager-3" not found' >&2
	exit 1
	;;
esac
exit 0
"#;

/// Scenario s5 of the real-Multus suite (e2e/longhorn/latestatus.sh) offline, its functions as
/// the suite sources them, kubectl the stand-in above, the waits cut to one try. No sandbox
/// event (as with Multus v3.9.3, where the scenario stopped at the event lookup, with no
/// summary: issue 45), the pod made again with no Multus status, or never made again: the
/// checks that read the empty answers fail, counted, and the scenario runs to the summary line.
#[test]
fn the_late_status_scenario_fails_its_checks_on_empty_answers_and_reaches_the_summary() {
    for remade in [true, false] {
        let dir = tempfile::tempdir().expect("temporary directory");
        let bin = stand_in(dir.path(), KUBECTL, if remade { &["remade"] } else { &[] });
        let body = format!(
            "ROOT={root} E2E={E2E} DIR={dir}/cluster KUBECTL=kubectl NODES=3 E2E_MULTUS=v3.9.3\n\
             SVC_CIDR=10.97.0.0/16 API_PORT=33443\n\
             for f in net node control; do source \"$E2E/cluster/$f.sh\"; done\n\
             source \"$E2E/longhorn/multus.sh\"\n\
             source \"$E2E/longhorn/checks.sh\"\n\
             start_bg() {{ :; }}\nstop_named() {{ :; }}\nsleep() {{ :; }}\n\
             wait_for() {{ shift; \"$@\" >/dev/null 2>&1; }}\n\
             mkdir -p \"$DIR/pki\" \"$DIR/node-3/cni\" \"$DIR/log\"\n\
             : >\"$DIR/pki/multus.kubeconfig\"; : >\"$DIR/log/slow-proxy.log\"\n\
             check_late_status\n\
             summary || echo \"summary status $?\"",
            root = env!("CARGO_MANIFEST_DIR"),
            dir = dir.path().display(),
        );
        let (rc, out, err) = script_in(dir.path(), &body);
        assert!(!err.contains("stopped:"), "remade {remade}: {err}");
        let calls = std::fs::read_to_string(bin.join("calls")).expect("kubectl was called");
        assert!(calls.contains(" delete pod instance-manager-3 "), "{calls}");
        assert!(calls.contains(" get events "), "{calls}");
        let started = if remade { "2026-12-07T10:00:05Z" } else { "" };
        for failed in [
            format!(
                "FAIL - s5: the sandbox and the instance manager came after the status write (written , started \
                 {started})"
            ),
            "FAIL - s5: the instance manager runs with its storage IP (-)".to_string(),
        ] {
            assert_eq!(out.matches(&failed).count(), 2, "as it fails and in the summary: {failed}\n{out}");
        }
        assert!(out.contains("ok   - s5: while Multus's status path was slow"), "{out}");
        assert!(out.contains("0 failed sandbox events"), "{out}");
        assert!(out.ends_with("1 passed, 2 failed\nsummary status 1\n"), "remade {remade}: {out}");
        assert_eq!(rc, 0, "{out}{err}");
    }
}

/// e2e/cluster.sh: a step that stops the run (here the first kubectl call of the stand-in's
/// set-up, kubectl failing) counts as one failed check, and the run still ends with its
/// summary line and a failing status.
#[test]
fn a_cluster_run_that_stops_still_ends_with_its_summary() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let cluster = dir.path().join("cluster");
    let bin = dir.path().join("bin");
    for d in [&cluster, &bin] {
        std::fs::create_dir(d).expect("directory");
    }
    std::fs::write(cluster.join("owner"), "").expect("owner written");
    std::fs::write(bin.join("kubectl"), "#!/bin/sh\nexit 1\n").expect("stand-in written");
    let chmod = Command::new("chmod").arg("+x").arg(bin.join("kubectl")).status().expect("chmod runs");
    assert!(chmod.success());
    let search = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("bash")
        .args([&format!("{E2E}/cluster.sh"), "checks", "longhorn_standin"])
        .env("PATH", search)
        .env("E2E_CLUSTER_DIR", &cluster)
        .env("KUBECTL", "kubectl")
        .env_remove("E2E_CLUSTER_SUITE")
        .env_remove("E2E_CLUSTER_NODES")
        .output()
        .expect("bash runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(stderr.matches("e2e-cluster: stopped: ").count(), 1, "{stderr}");
    let failed = "FAIL - the run stopped before its end (the 'stopped:' line above says where)\n";
    assert_eq!(stdout.matches(failed).count(), 2, "as it fails and in the summary: {stdout}");
    assert!(stdout.ends_with("0 passed, 1 failed\n"), "{stdout}");
}

/// A stand-in kubectl for scenario f (e2e/longhorn/deletes.sh) that knows one volume's replica
/// on node-2 and node-2's instance manager, and nothing else: every other answer is empty (no
/// Volume, no metric, no log, no budget), and every write "succeeds" without changing anything.
const KUBECTL_DELETES: &str = r#"#!/usr/bin/env bash
state=${0%/*}
args=" $* "
echo "$args" >>"$state/calls"
case $args in
*" get replicas.longhorn.io "*) [ -f "$state/no-replica" ] || printf 'vol-del-r-1 node-2 running\n' ;;
*" get pods -l longhorn.io/component=instance-manager --field-selector "*) printf instance-manager-2 ;;
*" get instancemanagers.longhorn.io -l "*) printf instance-manager-2 ;;
*" get volumes.longhorn.io "* | *" get pdb "* | *" get --raw "*)
	echo 'Error from server (NotFound): not found' >&2
	exit 1
	;;
esac
exit 0
"#;

/// Scenario f offline, as the suite sources it, kubectl the stand-in above, the waits cut to one
/// try: with a replica to work on, every step runs and each check that reads an empty answer
/// fails, counted; with none, the scenario says so and moves on. Never a stop.
#[test]
fn the_deletes_scenario_fails_its_checks_on_empty_answers_and_reaches_the_summary() {
    for replica in [true, false] {
        let dir = tempfile::tempdir().expect("temporary directory");
        let bin = stand_in(dir.path(), KUBECTL_DELETES, if replica { &[] } else { &["no-replica"] });
        let body = format!(
            "ROOT={root} E2E={E2E} DIR={dir}/cluster KUBECTL=kubectl NODES=3 IM_IMAGE=im:1\n\
             mkdir -p \"$DIR\"\n\
             source \"$E2E/longhorn/checks.sh\"\n\
             sleep() {{ :; }}\nwait_for() {{ shift; \"$@\" >/dev/null 2>&1; }}\n\
             F_BURST=2 check_deletes\n\
             summary || echo \"summary status $?\"",
            root = env!("CARGO_MANIFEST_DIR"),
            dir = dir.path().display(),
        );
        let (rc, out, err) = script_in(dir.path(), &body);
        assert_eq!(err, "", "replica {replica}: nothing on stderr, no stop\n{out}");
        assert_eq!(rc, 0, "{out}{err}");
        assert!(out.contains("summary status 1\n"), "replica {replica}: {out}");
        let calls = std::fs::read_to_string(bin.join("calls")).expect("kubectl was called");
        // The burst of other pods is deleted by label, in both namespaces.
        assert_eq!(calls.matches(" delete pod -l longhorn-guard-e2e-burst=true ").count(), 2, "{calls}");
        if replica {
            for step in [
                " -n longhorn-system delete pod instance-manager-2 --wait=false ",
                " -n longhorn-system delete pod instance-manager-2 --grace-period=0 --force ",
                " -n longhorn-system delete pdb instance-manager-2 ",
                " -n longhorn-system delete instancemanagers.longhorn.io instance-manager-2 --wait=false ",
                " drain node-2 --disable-eviction ",
                " delete pod -l app=longhorn-manager --wait=false ",
            ] {
                assert!(calls.contains(step), "{step}: {calls}");
            }
            assert!(
                out.contains(
                    "FAIL - f1: kubectl delete pod instance-manager-2 is refused with the guard's message"
                ),
                "{out}"
            );
            assert!(out.contains("f. timeline: "), "{out}");
        } else {
            assert!(
                out.contains("FAIL - f: vol-del has a replica on a node with an instance-manager pod"),
                "{out}"
            );
            assert!(
                !calls.contains(" delete pod instance-manager"),
                "nothing deleted by an empty name: {calls}"
            );
        }
    }
}

/// free_port PORT [COUNT]: a free port is its own answer; a port something listens on, or a
/// pair that holds one, is skipped, upwards.
#[test]
fn free_port_skips_a_port_in_use_and_a_pair_holding_one() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let busy = listener.local_addr().expect("its address").port();
    let was_free = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("another port");
        l.local_addr().expect("its address").port()
    };
    let (rc, out, err) = script(&format!("free_port {busy}; free_port {} 2; free_port {was_free}", busy - 1));
    assert_eq!((rc, err.as_str()), (0, ""), "{out}");
    let ports: Vec<u16> = out.lines().map(|l| l.parse().expect("a port number")).collect();
    assert_eq!(ports.len(), 3, "{out}");
    assert!(ports[0] > busy, "free_port {busy} gave {}", ports[0]);
    assert!(ports[1] > busy, "free_port {} 2 gave {} ({busy} is in use)", busy - 1, ports[1]);
    assert_eq!(ports[2], was_free);
    drop(listener);
}

/// etcdctl_path: ETCDCTL, else the etcdctl beside ETCD, else the one on PATH, else nothing.
#[test]
fn etcdctl_is_the_setting_else_the_one_beside_etcd_else_the_one_on_path() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let d = dir.path().display();
    for f in ["bin/etcdctl", "etcd35/etcd", "etcd35/etcdctl", "lone/etcd"] {
        let path = dir.path().join(f);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("directory");
        std::fs::write(&path, "#!/bin/sh\n").expect("stand-in written");
        let chmod = Command::new("chmod").arg("+x").arg(&path).status().expect("chmod runs");
        assert!(chmod.success());
    }
    let (rc, out, err) = script_in(
        dir.path(),
        &format!(
            "ETCDCTL=/opt/etcdctl ETCD={d}/etcd35/etcd etcdctl_path\n\
             ETCD={d}/etcd35/etcd etcdctl_path\n\
             ETCD={d}/lone/etcd etcdctl_path\n\
             PATH=/nonexistent etcdctl_path\n\
             echo end"
        ),
    );
    assert_eq!((rc, err.as_str()), (0, ""), "{out}");
    assert_eq!(out, format!("/opt/etcdctl\n{d}/etcd35/etcdctl\n{d}/bin/etcdctl\nend\n"));
}

/// e2e/gate-policy.sh's served_v1, on the discovery of real kube-apiservers
/// (tests/chart/data/discovery-*.json): MutatingAdmissionPolicy in v1 only from 1.36, not
/// where only its beta is on; ValidatingAdmissionPolicy in v1 on every supported minor.
#[test]
fn served_v1_reads_the_groups_v1_resources_only() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/chart/data");
    for (file, map) in [
        ("discovery-v1.33.4-alpha.json", false),
        ("discovery-v1.35.3-beta.json", false),
        ("discovery-v1.36.2.json", true),
    ] {
        let (rc, out, err) = script(&format!(
            "ROOT={root}\nsource {E2E}/gate-policy.sh\n\
             k() {{ [ \"$*\" = 'get --raw /apis/admissionregistration.k8s.io/v1' ]; \
             jq '.resources[\"admissionregistration.k8s.io/v1\"]' {data}/{file}; }}\n\
             for kind in MutatingAdmissionPolicy ValidatingAdmissionPolicy MutatingAdmissionPolicyX; do \
             if served_v1 $kind; then echo \"$kind yes\"; else echo \"$kind no\"; fi; done\n\
             if gate_policy_served; then echo gate yes; else echo gate no; fi",
            root = env!("CARGO_MANIFEST_DIR"),
        ));
        let yes = |b: bool| if b { "yes" } else { "no" };
        assert_eq!(
            (rc, out.as_str(), err.as_str()),
            (
                0,
                format!(
                    "MutatingAdmissionPolicy {}\nValidatingAdmissionPolicy yes\nMutatingAdmissionPolicyX no\ngate {}\n",
                    yes(map),
                    yes(map)
                )
                .as_str(),
                ""
            ),
            "{file}"
        );
    }
}
