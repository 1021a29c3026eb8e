//! The drain doctor (`check drain NODE` beyond the guard's verdicts) over snapshot fixtures:
//! `shared/fixtures/cluster/snapshot-three-nodes.json`, Longhorn's instance-manager budget
//! (`shared/fixtures/longhorn/pdb-instance-manager.json`) made for each of its instance
//! managers as longhorn-manager makes them, that fixture's own budget and orphaned
//! instance-manager pod (`instance-manager-pod-storage-network.json`, whose instance manager
//! the snapshot lacks), and application pods and budgets (tests/data/drain-doctor).

use crate::support;

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use support::check_drain as check;

const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures");
const WORKLOADS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/drain-doctor/workloads.json");
const IM_NODE_1: &str = "instance-manager-5d1f0b6e2c9a47d38e4f7a1b0c2d3e4f";
const IM_NODE_2: &str = "instance-manager-9b7e2d4c1a0f45e6b8c3d5f7e9a1b2c4";
const IM_NODE_3: &str = "instance-manager-e3a5c7b9d1f2406a8c0e2b4d6f8a1c3e";
const ORPHAN_IM: &str = "instance-manager-6c9e1e4e0f3b2a8d7c5b4a3f2e1d0c9b";

fn read(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A budget status as the disruption controller writes it for `minAvailable: 1` over one
/// ready pod.
fn at_zero() -> Value {
    json!({"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1})
}

/// Longhorn's budget (the fixture) for the instance manager whose pod is `pod`.
fn longhorn_budget(pod: &Value) -> Value {
    let mut b = read(&format!("{SHARED}/longhorn/pdb-instance-manager.json"));
    b.as_object_mut().unwrap().remove("_comment");
    b["metadata"]["name"] = pod["metadata"]["name"].clone();
    b["metadata"]["generation"] = json!(1);
    b["spec"]["selector"]["matchLabels"] = pod["metadata"]["labels"].clone();
    b["status"] = at_zero();
    b
}

/// The snapshot items: the three-node fixture with Longhorn's budget for each instance
/// manager, the orphaned budget and pod, and the workloads.
fn items() -> Vec<Value> {
    let snapshot = read(&format!("{SHARED}/cluster/snapshot-three-nodes.json"));
    let mut items: Vec<Value> = snapshot["items"].as_array().unwrap().clone();
    let budgets: Vec<Value> = items.iter().filter(|i| i["kind"] == "Pod").map(longhorn_budget).collect();
    items.extend(budgets);
    let mut orphan_budget = read(&format!("{SHARED}/longhorn/pdb-instance-manager.json"));
    orphan_budget.as_object_mut().unwrap().remove("_comment");
    orphan_budget["metadata"]["generation"] = json!(1);
    orphan_budget["status"] = at_zero();
    items.push(orphan_budget);
    let mut orphan_pod = read(&format!("{SHARED}/longhorn/instance-manager-pod-storage-network.json"));
    orphan_pod.as_object_mut().unwrap().remove("_comment");
    orphan_pod["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    items.push(orphan_pod);
    items.extend(read(WORKLOADS)["items"].as_array().unwrap().iter().cloned());
    items
}

fn write(dir: &Path, items: Vec<Value>) -> String {
    let path = dir.join("snapshot.json");
    std::fs::write(&path, json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()).unwrap();
    path.display().to_string()
}

fn snapshot(dir: &tempfile::TempDir) -> String {
    write(dir.path(), items())
}

/// The doctor's lines of the table: from its header line on.
fn doctor_lines(out: &str, node: &str) -> Vec<String> {
    let head = format!("{node}: beyond longhorn-guard's verdicts");
    out.lines().skip_while(|l| !l.starts_with(&head)).map(str::to_string).collect()
}

/// The table's finding line and remedy line for `object`.
fn finding(lines: &[String], object: &str) -> Option<(String, String)> {
    let i = lines.iter().position(|l| l.contains(&format!(" {object}: ")))?;
    Some((lines[i].clone(), lines[i + 1].trim_start().to_string()))
}

/// The line under a finding's remedy that says what getting past the budget would cost, if any.
fn bypass(lines: &[String], object: &str) -> Option<String> {
    let i = lines.iter().position(|l| l.contains(&format!(" {object}: ")))?;
    let next = lines.get(i + 2)?.trim_start();
    next.starts_with("bypass: ").then(|| next.to_string())
}

fn stale_remedy(im: &str) -> String {
    format!(
        "remedy: kubectl -n longhorn-system delete pdb {im} is safe: longhorn-guard's analysis finds no volume that \
         needs instance manager {im} (Longhorn creates the budget again when that instance manager runs on a \
         schedulable node)"
    )
}

#[test]
fn a_stale_longhorn_budget_beside_a_needed_one() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot(&dir);
    let (code, out, err) = check(&["node-2", "--state", &snap]);
    assert_eq!(code, 1, "{out}{err}");
    let lines = doctor_lines(&out, "node-2");
    assert_eq!(
        lines[0],
        "node-2: beyond longhorn-guard's verdicts (2 pods on node-2, 8 PodDisruptionBudgets read):"
    );
    let (line, remedy) =
        finding(&lines, &format!("poddisruptionbudget longhorn-system/{ORPHAN_IM}")).unwrap();
    assert_eq!(
        line,
        format!(
            "BLOCK  longhorn-pdb-stale   poddisruptionbudget longhorn-system/{ORPHAN_IM}: Longhorn's budget for \
             instance manager {ORPHAN_IM}, stale: that instance manager is gone; Longhorn deletes such budgets when \
             it next reconciles an instance manager (cleanUpPDBForNonExistingIM, longhorn-manager \
             controller/instance_manager_controller.go)"
        )
    );
    assert_eq!(
        remedy,
        format!(
            "remedy: kubectl -n longhorn-system delete pdb {ORPHAN_IM} is safe: nothing it protected exists"
        )
    );
    let (line, remedy) =
        finding(&lines, &format!("poddisruptionbudget longhorn-system/{IM_NODE_2}")).unwrap();
    // vol-detached's only replica is stopped on node-2 (no instance manager runs it), yet Longhorn
    // counts every replica on the node (canDeleteInstanceManagerPDB) and keeps the budget for it.
    assert_eq!(
        line,
        format!(
            "BLOCK  longhorn-pdb-needed  poddisruptionbudget longhorn-system/{IM_NODE_2}: Longhorn's budget for \
             instance manager {IM_NODE_2}, needed: node-2 holds replicas or engines of vol-detached, vol-healthy, \
             which block the drain (verdicts above)"
        )
    );
    assert_eq!(
        remedy,
        "remedy: do not delete it: once those volumes are protected elsewhere, Longhorn deletes it on the cordoned \
         node (canDeleteInstanceManagerPDB)"
    );
    // Deleting the needed budget, or its pod (which no budget refuses), would cost what the
    // guard's verdicts protect: vol-detached's only replica is on node-2, vol-healthy's engine
    // runs there (its data is safe on node-1).
    assert_eq!(
        bypass(&lines, &format!("poddisruptionbudget longhorn-system/{IM_NODE_2}")).as_deref(),
        Some(
            "bypass: deleting it, or its instance-manager pod as kubectl drain --disable-eviction does, takes the \
             last healthy replica of 1 volume (vol-detached) and stops the engine of 1 attached volume under its \
             workload (vol-healthy)"
        )
    );
    assert_eq!(bypass(&lines, &format!("poddisruptionbudget longhorn-system/{ORPHAN_IM}")), None);
    assert_eq!(out.matches("bypass: ").count(), 1, "{out}");
    // The other nodes' Longhorn budgets are not node-2's business.
    assert!(!out.contains(IM_NODE_1) && !out.contains(IM_NODE_3), "{out}");
    assert_eq!(
        lines[lines.len() - 1],
        "node-2: a drain would BLOCK on 2 of 3 volumes and 2 PodDisruptionBudgets"
    );
    assert!(!out.contains("drain with"), "{out}");
}

/// node-3 is cordoned and vol-healthy is protected elsewhere: Longhorn should have deleted its
/// budget; uncordoned, Longhorn keeps it until the cordon (not a blocker); with its instance
/// manager in error, Longhorn leaves it for good.
#[test]
fn longhorn_budgets_that_no_volume_needs() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = check(&["node-3", "--state", &snapshot(&dir)]);
    assert_eq!(code, 1);
    let lines = doctor_lines(&out, "node-3");
    let (line, remedy) =
        finding(&lines, &format!("poddisruptionbudget longhorn-system/{IM_NODE_3}")).unwrap();
    assert_eq!(
        line,
        format!(
            "BLOCK  longhorn-pdb-stale     poddisruptionbudget longhorn-system/{IM_NODE_3}: Longhorn's budget \
             for instance manager {IM_NODE_3}, stale: no replica or engine on node-3 needs it, yet it is still there \
             on the cordoned node; Longhorn deletes it only when canDeleteInstanceManagerPDB passes (longhorn-manager \
             controller/instance_manager_controller.go): no engine on the node's instance managers, and under \
             node-drain-policy each replica on the node has a healthy replica under a budget on another node; is the \
             longhorn-manager pod on node-3 running?"
        )
    );
    assert_eq!(remedy, stale_remedy(IM_NODE_3));
    assert!(!out.contains("bypass"), "{out}");

    let uncordon = |mut items: Vec<Value>| {
        for i in &mut items {
            if i["kind"] == "Node" && i["apiVersion"] == "v1" && i["metadata"]["name"] == "node-3" {
                i["spec"] = json!({});
            }
        }
        items
    };
    let keep_only_longhorn = |items: Vec<Value>| -> Vec<Value> {
        let workloads: Vec<Value> = read(WORKLOADS)["items"].as_array().unwrap().clone();
        items.into_iter().filter(|i| !workloads.contains(i)).collect()
    };
    let snap = write(dir.path(), keep_only_longhorn(uncordon(items())));
    let (code, out, err) = check(&["node-3", "--state", &snap]);
    assert_eq!(code, 0, "{out}{err}");
    let lines = doctor_lines(&out, "node-3");
    let (line, remedy) =
        finding(&lines, &format!("poddisruptionbudget longhorn-system/{IM_NODE_3}")).unwrap();
    assert_eq!(
        line,
        format!(
            "ok     longhorn-pdb-until-cordon  poddisruptionbudget longhorn-system/{IM_NODE_3}: Longhorn's budget for \
             instance manager {IM_NODE_3}, not needed: no replica or engine on node-3 needs it; Longhorn keeps it \
             while node-3 is schedulable and deletes it once the node is cordoned (kubectl drain cordons first; \
             canDeleteInstanceManagerPDB, longhorn-manager controller/instance_manager_controller.go)"
        )
    );
    assert_eq!(
        remedy,
        format!(
            "remedy: none needed; if it is still there after the cordon, {}",
            &stale_remedy(IM_NODE_3)[8..]
        )
    );
    assert!(!out.contains("bypass"), "{out}");
    assert_eq!(
        lines[lines.len() - 2..],
        [
            "node-3: a drain would proceed (1 volume checked, none blocking)",
            "node-3: drain with: kubectl drain node-3",
        ]
    );

    let mut items = keep_only_longhorn(items());
    for i in &mut items {
        if i["kind"] == "InstanceManager" && i["metadata"]["name"] == IM_NODE_3 {
            i["status"]["currentState"] = json!("error");
        }
    }
    let snap = write(dir.path(), items);
    let (code, out, _) = check(&["node-3", "--state", &snap]);
    assert_eq!(code, 1, "{out}");
    let lines = doctor_lines(&out, "node-3");
    let (line, _) = finding(&lines, &format!("poddisruptionbudget longhorn-system/{IM_NODE_3}")).unwrap();
    assert!(
        line.ends_with(&format!(
            "poddisruptionbudget longhorn-system/{IM_NODE_3}: Longhorn's budget for instance manager {IM_NODE_3}, \
             stale: no replica or engine on node-3 needs it, and the instance manager is error: Longhorn leaves the \
             budget of an instance manager that is not running as it is (syncInstanceManagerPDB, longhorn-manager \
             controller/instance_manager_controller.go), so it stays"
        )),
        "{line}"
    );
    assert!(line.starts_with("BLOCK  longhorn-pdb-stale"), "{line}");
}

#[test]
fn application_budgets_and_pods_kubectl_drain_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = check(&["node-3", "--state", &snapshot(&dir), "--drain-timeout", "10m"]);
    assert_eq!(code, 1, "{out}{err}");
    let lines = doctor_lines(&out, "node-3");
    assert_eq!(
        lines[0],
        "node-3: beyond longhorn-guard's verdicts (14 pods on node-3, 8 PodDisruptionBudgets read):"
    );
    let pad = " ".repeat(36);
    let want = [
        (
            "poddisruptionbudget default/web",
            "BLOCK  pdb-at-zero                  poddisruptionbudget default/web: selector app=web covers \
             default/web-6d4cf56db6-x7k2p on node-3; disruptionsAllowed 0 (minAvailable 2; currentHealthy 2, \
             desiredHealthy 2, expectedPods 2): each eviction gets 429 and kubectl drain retries it every 5 s",
            "remedy: scale the workload up so that one pod may go, or relax the budget (minAvailable 2); deleting it \
             drops the protection for good",
        ),
        (
            "pod default/shared-5c8d7b6a4-m3n4p",
            "BLOCK  pod-with-several-pdbs        pod default/shared-5c8d7b6a4-m3n4p: covered by 2 \
             PodDisruptionBudgets (shared-a, shared-b): the eviction API refuses it (500: more than one \
             PodDisruptionBudget)",
            "remedy: make the budgets' selectors disjoint so that one budget covers the pod",
        ),
        (
            "pod default/cache-0",
            "flag   emptydir-pod                 pod default/cache-0: has emptyDir volume scratch: kubectl drain \
             refuses pods with local storage (the flag deletes that data)",
            "remedy: kubectl drain node-3 --delete-emptydir-data",
        ),
        (
            "pod default/debug-shell",
            "flag   bare-pod                     pod default/debug-shell: declares no controller: kubectl drain \
             refuses it (the flag deletes it for good: nothing recreates it)",
            "remedy: kubectl drain node-3 --force",
        ),
        (
            "pod longhorn-system/longhorn-manager-8xk2q",
            "flag   daemonset-pod                pod longhorn-system/longhorn-manager-8xk2q: managed by DaemonSet \
             longhorn-manager: kubectl drain refuses DaemonSet-managed pods (it leaves them running with the flag)",
            "remedy: kubectl drain node-3 --ignore-daemonsets",
        ),
        (
            "pod default/report-29381760-6xk8d",
            "BLOCK  grace-period-beyond-timeout  pod default/report-29381760-6xk8d: terminationGracePeriodSeconds \
             3600 is beyond --drain-timeout 10m: kubectl drain gives up before it ends",
            "remedy: give kubectl drain --timeout above 3600s, or shorten it with --grace-period (cuts the pod's \
             shutdown short)",
        ),
        (
            "pod default/stuck-5b9c8d7e6-k4l5m",
            "BLOCK  terminating-pod              pod default/stuck-5b9c8d7e6-k4l5m: Terminating, past its deadline \
             2026-11-30T10:00:00Z: finalizers example.com/hold hold it",
            "remedy: kubectl drain waits for it until --timeout; once the kubelet or the finalizer's controller \
             finishes it, it goes; to drain regardless: --skip-wait-for-delete-timeout=1",
        ),
    ];
    for (object, line, remedy) in want {
        let got = finding(&lines, object).unwrap_or_else(|| panic!("{object} not named:\n{out}"));
        assert_eq!(got.0, line);
        assert_eq!(got.1, remedy);
        let i = lines.iter().position(|l| *l == got.0).unwrap();
        assert!(lines[i + 1].starts_with(&format!("{pad}remedy: ")), "{}", lines[i + 1]);
    }
    // Not blockers: a budget that allows a disruption (default/api), a Pending pod under two
    // budgets, a finished Job pod with an emptyDir, a mirror pod, a pod Terminating within its
    // deadline, and default/web's pod on node-1.
    for absent in [
        "default/api",
        "shared-5c8d7b6a4-r5s6t",
        "migrate-28999-abcde",
        "kube-proxy-node-3",
        "leaving-5b9c8d7e6-n6o7p",
        "web-6d4cf56db6-q9z4m",
    ] {
        assert!(!out.contains(absent), "{absent}:\n{out}");
    }
    // longhorn-guard's own verdicts let it go ("none blocking"); the budgets and pods do not,
    // so no command line follows the verdict (the JSON's kubectlDrain still has it).
    assert_eq!(
        lines[lines.len() - 1],
        "node-3: a drain would BLOCK on 2 PodDisruptionBudgets and 3 pods (1 volume checked, none blocking)"
    );
    assert!(!out.contains("drain with"), "{out}");

    // Without --drain-timeout (or with one past the grace period) the long grace period is no blocker.
    for extra in [&[][..], &["--drain-timeout", "2h"][..]] {
        let mut args =
            vec!["node-3", "--state", &snapshot(&dir)].into_iter().map(String::from).collect::<Vec<_>>();
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (_, out, _) = check(&args);
        assert!(!out.contains("grace-period-beyond-timeout"), "{out}");
    }
}

/// A drain that can go ends with its verdict and the one command line that gets past every pod
/// kubectl drain refuses: node-3 uncordoned (its Longhorn budget waits for the cordon), without
/// the budgets and the pod that block.
#[test]
fn a_drain_that_can_go_ends_with_its_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let blocking = ["web", "shared-a", "shared-b", "stuck-5b9c8d7e6-k4l5m"];
    let mut items: Vec<Value> =
        items().into_iter().filter(|i| !blocking.iter().any(|b| i["metadata"]["name"] == *b)).collect();
    for i in &mut items {
        if i["kind"] == "Node" && i["apiVersion"] == "v1" && i["metadata"]["name"] == "node-3" {
            i["spec"] = json!({});
        }
    }
    let (code, out, err) = check(&["node-3", "--state", &write(dir.path(), items)]);
    assert_eq!(code, 0, "{out}{err}");
    let lines = doctor_lines(&out, "node-3");
    assert!(lines.iter().any(|l| l.starts_with("ok     longhorn-pdb-until-cordon ")), "{out}");
    assert!(lines.iter().any(|l| l.starts_with("flag   bare-pod ")), "{out}");
    assert_eq!(
        lines[lines.len() - 2..],
        [
            "node-3: a drain would proceed (1 volume checked, none blocking)",
            "node-3: drain with: kubectl drain node-3 --ignore-daemonsets --delete-emptydir-data --force",
        ]
    );
}

/// A needed budget that refuses no eviction now does not hold the node: no cost line. Nor does
/// the guard alone, with no budget (the demo snapshot holds none).
#[test]
fn no_bypass_cost_where_no_budget_holds_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let mut items = items();
    for i in &mut items {
        if i["kind"] == "PodDisruptionBudget" && i["metadata"]["name"] == IM_NODE_2 {
            i["status"]["disruptionsAllowed"] = json!(1);
        }
    }
    let (code, out, err) = check(&["node-2", "--state", &write(dir.path(), items)]);
    assert_eq!(code, 1, "{out}{err}");
    let lines = doctor_lines(&out, "node-2");
    let (line, _) = finding(&lines, &format!("poddisruptionbudget longhorn-system/{IM_NODE_2}")).unwrap();
    assert!(line.starts_with("ok     longhorn-pdb-needed "), "{line}");
    assert!(
        line.ends_with("; it refuses no eviction now (no pod of it on the node is evictable under it)"),
        "{line}"
    );
    assert!(!out.contains("bypass"), "{out}");

    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/cluster-snapshot.yaml");
    let (code, out, _) = check(&["node-2", "--state", demo]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("\nnode-2: a drain would BLOCK on 2 of 3 volumes\n"), "{out}");
    assert!(!out.contains("bypass"), "{out}");
}

#[test]
fn json_findings_have_stable_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = check(&["node-3", "--state", &snapshot(&dir), "--output", "json"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["drain"], "block");
    assert_eq!(v["volumes"][0]["verdict"], "safe");
    assert_eq!(v["kubectlDrain"], "kubectl drain node-3 --ignore-daemonsets --delete-emptydir-data --force");
    assert_eq!(v["podsRead"], 14);
    assert_eq!(v["podDisruptionBudgetsRead"], 8);
    let ids: Vec<(&str, &str, bool)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["id"].as_str().unwrap(), f["name"].as_str().unwrap(), f["blocks"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        ids,
        [
            ("pod-with-several-pdbs", "shared-5c8d7b6a4-m3n4p", true),
            ("pdb-at-zero", "web", true),
            ("longhorn-pdb-stale", IM_NODE_3, true),
            ("emptydir-pod", "cache-0", false),
            ("bare-pod", "debug-shell", false),
            ("terminating-pod", "stuck-5b9c8d7e6-k4l5m", true),
            ("daemonset-pod", "longhorn-csi-plugin-4wz7d", false),
            ("daemonset-pod", "longhorn-manager-8xk2q", false),
        ]
    );
    let web = &v["findings"][1];
    assert_eq!(web["kind"], "poddisruptionbudget");
    assert_eq!(web["namespace"], "default");
    assert_eq!(web["selector"], "app=web");
    assert_eq!(
        web["counts"],
        json!({"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2})
    );
    assert_eq!(web["pods"], json!(["default/web-6d4cf56db6-x7k2p"]));
    assert_eq!(v["findings"][3]["flag"], "--delete-emptydir-data");
}

#[test]
fn an_unreadable_budget_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut items = items();
    items.push(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "broken", "namespace": "default"}, "spec": {"minAvailable": [1]}}));
    let (code, out, err) = check(&["node-3", "--state", &write(dir.path(), items)]);
    assert_eq!(code, 2, "{out}");
    assert!(
        err.starts_with("longhorn-guard check drain: cannot read poddisruptionbudget default/broken: "),
        "{err}"
    );
    let (code, _, err) = check(&["node-3", "--state", &snapshot(&dir), "--drain-timeout", "0s"]);
    assert_eq!(code, 2);
    assert!(err.contains("must be more than 0 and at most 24h"), "{err}");
}

/// The live cluster: the node's pods by field selector and every budget, in 500-item pages,
/// nothing but GETs of collections.
#[tokio::test(flavor = "multi_thread")]
async fn reads_the_live_cluster_read_only_and_paginated() {
    support::install_provider();
    let api = support::apiserver::FakeApi::start(items(), std::time::Duration::ZERO).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = support::kubeconfig(dir.path(), api.addr, &api.certs.path().join("ca.crt"));
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
            .args(["check", "drain", "node-2", "--output", "json"])
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("LONGHORN_GUARD_LOG", "warn")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let (stdout, stderr) = (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let ids: Vec<(&str, &str)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["id"].as_str().unwrap(), f["name"].as_str().unwrap()))
        .collect();
    assert_eq!(ids, [("longhorn-pdb-stale", ORPHAN_IM), ("longhorn-pdb-needed", IM_NODE_2)]);
    assert_eq!(v["findings"][0].get("bypass"), None);
    assert_eq!(
        v["findings"][1]["bypass"],
        json!({"lastCopy": ["vol-detached"], "engineStops": ["vol-healthy"]})
    );
    let requests = api.seen.requests();
    assert!(
        requests.iter().any(|r| r.starts_with("/api/v1/pods?")
            && r.contains("fieldSelector=spec.nodeName%3Dnode-2")
            && r.contains("limit=500")),
        "{requests:#?}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("/apis/policy/v1/poddisruptionbudgets?") && r.contains("limit=500")),
        "{requests:#?}"
    );
}
