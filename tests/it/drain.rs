//! The drain guard, table-driven over cluster states built from the shared fixture
//! snapshot (`cluster/snapshot-three-nodes.json`) and the captured AdmissionReviews.
//!
//! The base snapshot: node-1..3 (node-3 cordoned); vol-healthy attached on node-2 with RW
//! replicas on node-1..3; vol-degraded attached on node-1 with RW on node-1 and a WO
//! rebuild (progress 0) on node-2; vol-detached with one stopped replica on node-2.

use crate::support::states;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use longhorn_guard::admission::{parse_review, AdmissionRequest};
use longhorn_guard::admit::{Admitter, WebhookKind};
use longhorn_guard::cluster::{snapshot, ClusterView, Object, SharedView, Source};
use longhorn_guard::decision::{Decision, MAX_WARNINGS, MAX_WARNING_LEN};
use longhorn_guard::policy::drain::confirm;
use longhorn_guard::policy::drain::{
    analyze_node, stalled_rebuilds, Reason, Verdict, WhyNot, ALLOW_DRAIN_ANNOTATION,
};
use longhorn_guard::policy::{self, Policy};
use serde_json::{json, Value};
// `now` is 40 minutes after the snapshot's rebuild started (2026-11-30T11:19:51Z).
use states::now;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures");

fn read_json(rel: &str) -> Value {
    let text = std::fs::read_to_string(format!("{FIXTURES}/{rel}")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The base state as editable JSON.
struct State(Value);

impl State {
    fn base() -> Self {
        Self(read_json("cluster/snapshot-three-nodes.json"))
    }

    fn items(&mut self) -> &mut Vec<Value> {
        self.0["items"].as_array_mut().unwrap()
    }

    /// The object of `kind` (`Replica`, `Engine`, `Node` (core), `LonghornNode`, ...) named `name`.
    fn get(&mut self, kind: &str, name: &str) -> &mut Value {
        let (api, k) = match kind {
            "LonghornNode" => ("longhorn.io/v1beta2", "Node"),
            "Node" | "Pod" => ("v1", kind),
            _ => ("longhorn.io/v1beta2", kind),
        };
        self.items()
            .iter_mut()
            .find(|o| o["apiVersion"] == api && o["kind"] == k && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in the state"))
    }

    fn remove(&mut self, kind: &str, name: &str) {
        let k = if kind == "LonghornNode" { "Node" } else { kind };
        self.items().retain(|o| {
            !(o["kind"] == k && o["metadata"]["name"] == name && (kind != "Node" || o["apiVersion"] == "v1"))
        });
    }

    fn push(&mut self, o: Value) {
        self.items().push(o);
    }

    fn view(&self) -> ClusterView {
        snapshot::parse(&self.0.to_string(), Path::new("case.json")).unwrap()
    }

    /// The same objects as a watch-fed view last updated at `at`.
    fn watch_view(&self, at: SystemTime) -> ClusterView {
        ClusterView::from_objects(Source::Watch, objects(&self.0), at)
            .derive(longhorn_guard::policy::drain::derivations(), at)
    }
}

fn objects(list: &Value) -> Vec<Object> {
    states::objects(list["items"].as_array().unwrap())
}

const IM_POD: [(&str, &str); 3] = [
    ("node-1", "instance-manager-5d1f0b6e2c9a47d38e4f7a1b0c2d3e4f"),
    ("node-2", "instance-manager-9b7e2d4c1a0f45e6b8c3d5f7e9a1b2c4"),
    ("node-3", "instance-manager-e3a5c7b9d1f2406a8c0e2b4d6f8a1c3e"),
];

fn im_of(node: &str) -> &'static str {
    IM_POD.iter().find(|(n, _)| *n == node).unwrap().1
}

/// The captured eviction with request.name set to the IM pod of `node`.
fn eviction_body(node: &str) -> Value {
    let mut body = read_json("admission/eviction-create.json");
    body["request"]["name"] = json!(im_of(node));
    body["request"]["object"]["metadata"]["name"] = json!(im_of(node));
    body
}

fn request(body: &Value) -> AdmissionRequest {
    parse_review(body.to_string().as_bytes()).unwrap()
}

fn decide(state: &State, body: &Value, policy: &Policy) -> Decision {
    policy::validate(&request(body), &state.view(), policy, now())
}

fn drain(state: &State, node: &str) -> Decision {
    decide(state, &eviction_body(node), &Policy::default())
}

fn message(d: &Decision) -> &str {
    &d.status.as_ref().expect("a denial").message
}

fn assert_denied_429(d: &Decision) {
    assert!(!d.allowed, "expected a denial, got {d:?}");
    let st = d.status.as_ref().unwrap();
    assert_eq!((st.code, st.reason.as_str()), (429, "TooManyRequests"));
    assert!(st.message.starts_with("longhorn-guard: "), "{}", st.message);
    assert!(d.confirm_node.is_none(), "denials never need confirming");
}

fn assert_allowed(d: &Decision) {
    assert!(d.allowed, "expected an allow, got {:?}", d.status);
    assert!(d.status.is_none());
}

// ---- state edits ----

fn fail(s: &mut State, replica: &str) {
    let r = s.get("Replica", replica);
    r["spec"]["failedAt"] = json!("2026-11-30T11:40:00Z");
    r["spec"]["lastFailedAt"] = json!("2026-11-30T11:40:00Z");
    r["spec"]["desireState"] = json!("stopped");
    r["status"]["currentState"] = json!("stopped");
    let engine = format!("{}-e-0", replica.split("-r-").next().unwrap());
    s.get("Engine", &engine)["status"]["replicaModeMap"][replica] = json!("ERR");
}

/// vol-healthy with only two replicas: the one on node-3 (drained in most cases) and the
/// one on node-1 (the "other"); its engine stays on node-2.
fn pair() -> State {
    let mut s = State::base();
    s.remove("Replica", "vol-healthy-r-5e6f7a8b");
    let e = s.get("Engine", "vol-healthy-e-0");
    for m in ["replicaModeMap", "currentReplicaAddressMap", "replicaTransitionTimeMap"] {
        e["status"][m].as_object_mut().unwrap().remove("vol-healthy-r-5e6f7a8b");
    }
    s.get("Volume", "vol-healthy")["spec"]["numberOfReplicas"] = json!(2);
    s
}

/// Puts the node-1 replica of the pair into a WO rebuild at `progress`, entered at `since`.
fn rebuilding(s: &mut State, progress: i64, since: &str) {
    let r = s.get("Replica", "vol-healthy-r-1a2b3c4d");
    r["spec"]["healthyAt"] = json!("");
    r["spec"]["lastFailedAt"] = json!("2026-11-30T11:19:40Z");
    let e = s.get("Engine", "vol-healthy-e-0");
    e["status"]["replicaModeMap"]["vol-healthy-r-1a2b3c4d"] = json!("WO");
    e["status"]["replicaTransitionTimeMap"]["vol-healthy-r-1a2b3c4d"] = json!(since);
    e["status"]["rebuildStatus"] = json!({
        "tcp://10.42.0.15:10000": {"isRebuilding": true, "progress": progress, "state": "in_progress",
            "error": "", "fromReplicaAddress": "tcp://10.42.2.9:10000"}
    });
}

// ---- the acceptance cases ----

#[test]
fn three_healthy_replicas_allow() {
    let d = drain(&State::base(), "node-3");
    assert_allowed(&d);
    assert_eq!(d.rule, "drain");
    assert_eq!(d.details.node.as_deref(), Some("node-3"));
    assert!(d.confirm_node.is_none(), "a snapshot is always fresh");
}

#[test]
fn last_healthy_replica_denies_and_names_the_volume() {
    let mut s = State::base();
    fail(&mut s, "vol-healthy-r-1a2b3c4d");
    fail(&mut s, "vol-healthy-r-5e6f7a8b");
    let d = drain(&s, "node-3");
    assert_denied_429(&d);
    assert_eq!(d.details.volumes, vec!["vol-healthy"]);
    let msg = message(&d);
    assert!(
        msg.starts_with("longhorn-guard: draining node-3 would strand 1 volume:\n- vol-healthy: "),
        "{msg}"
    );
    assert!(msg.contains("last healthy replica is on node-3"), "{msg}");
    // Replicas with the same reason share one clause; times are ages (now is 12:00Z).
    assert!(msg.contains("; its replicas on node-1, node-2 each failed 20m ago; "), "{msg}");
    assert_eq!(msg.lines().count(), 2, "one line per volume: {msg}");
}

#[test]
fn other_replica_failed_denies() {
    let mut s = pair();
    assert_allowed(&drain(&s, "node-3"));
    fail(&mut s, "vol-healthy-r-1a2b3c4d");
    let d = drain(&s, "node-3");
    assert_denied_429(&d);
    assert!(message(&d).contains("its replica on node-1 failed 20m ago"), "{}", message(&d));
    assert!(message(&d).contains("wait for Longhorn to rebuild a healthy replica elsewhere"));
}

#[test]
fn other_replica_absent_from_its_engines_replica_set_does_not_protect() {
    // The engine (running, on node-2) lists only the node-3 replica: the healthy-looking one on
    // node-1 is not used, so its healthyAt is history.
    let mut s = pair();
    let e = s.get("Engine", "vol-healthy-e-0");
    for m in ["replicaModeMap", "currentReplicaAddressMap", "replicaTransitionTimeMap"] {
        e["status"][m].as_object_mut().unwrap().remove("vol-healthy-r-1a2b3c4d");
    }
    let d = drain(&s, "node-3");
    assert_denied_429(&d);
    assert_eq!(
        message(&d),
        "longhorn-guard: draining node-3 would strand 1 volume:\n- vol-healthy: last healthy replica is on node-3; \
         its replica on node-1 is not in its engine's replica set; wait for Longhorn to rebuild a healthy replica elsewhere"
    );
    let a = analyze_node(&s.view(), "node-3", &Policy::default(), now());
    let r = a.volumes[0].replicas.iter().find(|r| r.name == "vol-healthy-r-1a2b3c4d").unwrap();
    assert!(!r.protecting);
    // Typed, and written in the message module's words.
    assert_eq!(r.why_not, Some(WhyNot::NotInEngine));
    assert_eq!(
        r.why_not.as_ref().map(ToString::to_string).as_deref(),
        Some("is not in its engine's replica set")
    );

    // An empty map says nothing about the replica set (an engine that has not reported yet).
    let mut s = pair();
    s.get("Engine", "vol-healthy-e-0")["status"]["replicaModeMap"] = json!({});
    assert_allowed(&drain(&s, "node-3"));
}

#[test]
fn other_replica_rebuilding_shows_progress() {
    let mut s = pair();
    rebuilding(&mut s, 37, "2026-11-30T11:58:00Z");
    let d = drain(&s, "node-3");
    assert_denied_429(&d);
    assert_eq!(
        message(&d),
        "longhorn-guard: draining node-3 would strand 1 volume:\n- vol-healthy: last healthy replica is on node-3; \
         its replica on node-1 is rebuilding (37%); wait for the rebuild"
    );
    // Rebuilding with healthyAt still set (WO again after a restart) does not protect either.
    s.get("Replica", "vol-healthy-r-1a2b3c4d")["spec"]["healthyAt"] = json!("2026-11-30T11:19:26Z");
    assert!(message(&drain(&s, "node-3")).contains("is rebuilding (37%)"));
}

#[test]
fn stalled_rebuild_is_named_as_stalled() {
    let mut s = pair();
    rebuilding(&mut s, 0, "2026-11-30T11:30:00Z");
    let d = drain(&s, "node-3");
    assert_denied_429(&d);
    let msg = message(&d);
    assert_eq!(
        msg,
        "longhorn-guard: draining node-3 would strand 1 volume:\n- vol-healthy: last healthy replica is on node-3; \
         its replica on node-1 is stuck rebuilding at 0% for 30m; check its engine and instance manager"
    );

    // Within drain.stallAfter it is an ordinary rebuild.
    let young = Policy::parse("drain:\n  stallAfter: 1h\n").unwrap();
    let d = decide(&s, &eviction_body("node-3"), &young);
    assert!(message(&d).contains("is rebuilding (0%); wait for the rebuild"), "{}", message(&d));

    // Storage network set but the replica's storage IP is its pod IP: say why.
    s.get("Setting", "storage-network")["value"] = json!("kube-system/storage-net");
    let msg = message(&drain(&s, "node-3")).to_string();
    assert!(msg.ends_with("; restart its instance manager (no storage network)"), "{msg}");
}

/// Renames vol-healthy (Volume, Engine, Replicas) to a CSI-style 40-character PVC volume name.
fn with_pvc_name(s: &mut State) -> String {
    let new = "pvc-6a2e4c1d-8b3f-4e5a-9c7d-1f0e2d3c4b5a".to_string();
    let text = s.0.to_string().replace("vol-healthy", &new);
    s.0 = serde_json::from_str(&text).unwrap();
    new
}

#[test]
fn each_volume_line_fits_one_terminal_line() {
    // 160 columns with the fixture's names; a 40-character CSI volume name (pvc-<uuid>) adds
    // 29 more in the longest case.
    const TERMINAL: usize = 160;
    const WITH_PVC_NAME: usize = 160 + 29;
    let mut cases: Vec<(&str, State)> = Vec::new();
    // A stalled rebuild whose instance manager lacks the storage network.
    let mut s = pair();
    rebuilding(&mut s, 0, "2026-11-30T11:19:51Z");
    s.get("Setting", "storage-network")["value"] = json!("kube-system/storage-net");
    cases.push(("stalled, no storage network", s));
    // Two other replicas failed.
    let mut s = State::base();
    fail(&mut s, "vol-healthy-r-1a2b3c4d");
    fail(&mut s, "vol-healthy-r-5e6f7a8b");
    cases.push(("two failed", s));
    // Attached on the drained node, holding the last healthy replica, with a PVC.
    let mut s = State::base();
    fail(&mut s, "vol-healthy-r-1a2b3c4d");
    fail(&mut s, "vol-healthy-r-5e6f7a8b");
    cases.push(("attached, PVC", s));
    for (case, mut s) in cases {
        for (limit, rename) in [(TERMINAL, false), (WITH_PVC_NAME, true)] {
            let name = if rename { with_pvc_name(&mut s) } else { "vol-healthy".to_string() };
            let mut denied = 0;
            for node in ["node-2", "node-3"] {
                let d = drain(&s, node);
                let Some(st) = d.status.as_ref() else { continue };
                denied += 1;
                for line in st.message.lines().skip(1) {
                    let n = line.chars().count();
                    assert!(n <= limit, "{case}: {n} chars: {line}");
                    assert!(!line.contains("2026-"), "{case}: ages, not timestamps: {line}");
                }
                assert!(st.message.contains(&format!("- {name}: ")), "{case}: {}", st.message);
            }
            assert!(denied > 0, "{case}");
        }
    }
}

#[test]
fn stalled_rebuilds_for_the_metric() {
    let view = State::base().view();
    let stalled = stalled_rebuilds(&view, &Policy::default(), now());
    assert_eq!(stalled.len(), 1, "{stalled:?}");
    let s = &stalled[0];
    assert_eq!((s.volume.as_str(), s.engine.as_str()), ("vol-degraded", "vol-degraded-e-0"));
    assert_eq!(s.replica.as_deref(), Some("vol-degraded-r-7d8e9f0a"));
    assert_eq!(s.progress, 0);
    assert_eq!(
        s.since,
        SystemTime::from(
            time::OffsetDateTime::parse(
                "2026-11-30T11:19:51Z",
                &time::format_description::well_known::Rfc3339
            )
            .unwrap()
        )
    );
    // Five minutes into the rebuild nothing is stalled yet.
    let early = SystemTime::from(
        time::OffsetDateTime::parse("2026-11-30T11:24:51Z", &time::format_description::well_known::Rfc3339)
            .unwrap(),
    );
    assert!(stalled_rebuilds(&view, &Policy::default(), early).is_empty());
}

#[test]
fn watch_view_dates_progress_changes() {
    // A watch sees progress 40 at t0 and still 40 eleven minutes later: stalled since t0.
    let mut s = pair();
    rebuilding(&mut s, 40, "2026-11-30T11:58:00Z");
    let t0 = now() - Duration::from_secs(11 * 60);
    let mut view = s.watch_view(t0);
    let engine = objects(&s.0).into_iter().find(|o| o.name() == "vol-healthy-e-0").unwrap();
    view.upsert(engine.clone(), now());
    let a = analyze_node(&view, "node-3", &Policy::default(), now());
    let v = &a.volumes[0];
    assert_eq!(v.verdict, Verdict::Block);
    assert!(v.reason.to_string().contains("is stuck rebuilding at 40% for 11m"), "{}", v.reason);
    let healthy_stalled = |view: &ClusterView| {
        stalled_rebuilds(view, &Policy::default(), now())
            .into_iter()
            .filter(|s| s.engine == "vol-healthy-e-0")
            .count()
    };
    assert_eq!(healthy_stalled(&view), 1);

    // Progress moves: no longer stalled.
    let mut moved = engine;
    if let Object::Engine(e) = &mut moved {
        e.status.rebuild_status.values_mut().for_each(|r| r.progress = 41);
    }
    view.upsert(moved, now());
    let a = analyze_node(&view, "node-3", &Policy::default(), now());
    assert!(a.volumes[0].reason.to_string().contains("is rebuilding (41%)"), "{}", a.volumes[0].reason);
    assert_eq!(healthy_stalled(&view), 0);
}

#[test]
fn other_replica_on_cordoned_node_denies() {
    let mut s = pair();
    s.get("Node", "node-1")["spec"]["unschedulable"] = json!(true);
    let d = drain(&s, "node-3");
    assert_denied_429(&d);
    assert!(
        message(&d).contains("its replica on node-1 is on a cordoned node; uncordon node-1"),
        "{}",
        message(&d)
    );
}

#[test]
fn other_replicas_instance_manager_not_running_denies() {
    let mut s = pair();
    s.get("InstanceManager", im_of("node-1"))["status"]["currentState"] = json!("error");
    let d = drain(&s, "node-3");
    assert_denied_429(&d);
    assert!(
        message(&d).contains("its replica on node-1 has no running instance manager (state error)"),
        "{}",
        message(&d)
    );
    assert!(message(&d).contains("wait until the instance manager on node-1 is running"));

    // With status.instanceManagerName empty, the IM on the replica's node is found by data engine.
    s.get("Replica", "vol-healthy-r-1a2b3c4d")["status"]["instanceManagerName"] = json!("");
    assert!(message(&drain(&s, "node-3")).contains("has no running instance manager (state error)"));
    s.get("InstanceManager", im_of("node-1"))["status"]["currentState"] = json!("running");
    assert_allowed(&drain(&s, "node-3"));
}

#[test]
fn reused_replica_with_only_last_failed_at_denies() {
    let mut s = State::base();
    fail(&mut s, "vol-healthy-r-1a2b3c4d");
    fail(&mut s, "vol-healthy-r-5e6f7a8b");
    let r = s.get("Replica", "vol-healthy-r-9c0d1e2f");
    r["spec"]["healthyAt"] = json!("");
    r["spec"]["failedAt"] = json!("");
    r["spec"]["lastHealthyAt"] = json!("");
    r["spec"]["lastFailedAt"] = json!("2026-11-30T11:20:00Z");
    let d = drain(&s, "node-3");
    assert_denied_429(&d);
    assert!(message(&d).contains("vol-healthy: only copy of its data is on node-3"), "{}", message(&d));
}

#[test]
fn never_used_replica_allows() {
    let mut s = State::base();
    fail(&mut s, "vol-healthy-r-1a2b3c4d");
    fail(&mut s, "vol-healthy-r-5e6f7a8b");
    let r = s.get("Replica", "vol-healthy-r-9c0d1e2f");
    for k in ["healthyAt", "failedAt", "lastHealthyAt", "lastFailedAt"] {
        r["spec"][k] = json!("");
    }
    assert_allowed(&drain(&s, "node-3"));
    let a = analyze_node(&s.view(), "node-3", &Policy::default(), now());
    assert_eq!(a.volumes[0].reason, Reason::NeverUsed { node: "node-3".into(), count: 1 });
    assert_eq!(a.volumes[0].reason.to_string(), "replica on node-3 was never used");
}

/// vol-detached's single stopped replica moved to node-3 (node-3 then holds it and a
/// protected vol-healthy replica).
fn detached_on_node_3() -> State {
    let mut s = State::base();
    let r = s.get("Replica", "vol-detached-r-b1c2d3e4");
    r["spec"]["nodeID"] = json!("node-3");
    r["metadata"]["labels"]["longhornnode"] = json!("node-3");
    s
}

#[test]
fn detached_single_stopped_replica_denies_by_default_and_allows_when_relaxed() {
    let s = detached_on_node_3();
    let d = drain(&s, "node-3");
    assert_denied_429(&d);
    assert_eq!(d.details.volumes, vec!["vol-detached"]);
    assert!(
        message(&d).contains(
            "- vol-detached: 1 replica (numberOfReplicas=1); raise numberOfReplicas to 2 or more and attach it"
        ),
        "{}",
        message(&d)
    );
    let relaxed = Policy::parse("drain:\n  protectStoppedReplicas: false\n").unwrap();
    assert_allowed(&decide(&s, &eviction_body("node-3"), &relaxed));
}

#[test]
fn volume_attached_without_a_pod_is_not_only_told_to_move_one() {
    // Longhorn attached vol-healthy by itself (a backup of a detached volume, a replica
    // eviction): it lists no pod, so "move its workload" alone would mislead.
    let mut s = State::base();
    s.remove("Volume", "vol-detached");
    s.remove("Replica", "vol-detached-r-b1c2d3e4");
    let want = "- vol-healthy: attached to node-2 (engine running); Longhorn lists no pod using it (Longhorn attaches a volume itself for a backup, snapshot, clone, restore or replica eviction, and keeps a disaster-recovery volume attached; or it was attached from the Longhorn UI): wait for the detach or detach it in Longhorn; if a pod does use it, move that pod off node-2 first";
    let usual = "move its workload (PVC default/data-postgres-0) off node-2 first";
    let listed = s.get("Volume", "vol-healthy")["status"]["kubernetesStatus"]["workloadsStatus"].clone();
    assert!(listed.as_array().is_some_and(|l| !l.is_empty()), "{listed}");
    assert!(message(&drain(&s, "node-2")).contains(usual));
    // No pod listed since the PV was bound, or none left: Longhorn keeps the last pods as
    // history and sets lastPodRefAt.
    let cases = [(json!(null), json!("")), (json!([]), json!("")), (listed, json!("2026-11-30T12:00:00Z"))];
    for (workloads, last_pod_ref_at) in cases {
        let ks = &mut s.get("Volume", "vol-healthy")["status"]["kubernetesStatus"];
        ks["workloadsStatus"] = workloads.clone();
        ks["lastPodRefAt"] = last_pod_ref_at.clone();
        let d = drain(&s, "node-2");
        assert_denied_429(&d);
        assert!(message(&d).contains(want), "{workloads} {last_pod_ref_at}: {}", message(&d));
    }
    // Without the list (an object Longhorn did not write) nothing is known: the usual remedy.
    let v = s.get("Volume", "vol-healthy");
    v["status"]["kubernetesStatus"].as_object_mut().unwrap().remove("workloadsStatus");
    assert!(message(&drain(&s, "node-2")).contains(usual));
}

#[test]
fn volume_attached_on_the_node_denies() {
    let mut s = State::base();
    s.remove("Volume", "vol-detached");
    s.remove("Replica", "vol-detached-r-b1c2d3e4");
    let d = drain(&s, "node-2");
    assert_denied_429(&d);
    assert_eq!(d.details.volumes, vec!["vol-healthy"]);
    assert!(
        message(&d).contains(
            "- vol-healthy: attached to node-2 (engine running); move its workload (PVC default/data-postgres-0) off node-2 first"
        ),
        "{}",
        message(&d)
    );

    // Without the Engine object, the instance manager's status.instanceEngines still shows it.
    s.remove("Engine", "vol-healthy-e-0");
    let v = s.get("Volume", "vol-healthy");
    v["status"]["currentNodeID"] = json!("");
    v["status"]["state"] = json!("detached");
    let d = drain(&s, "node-2");
    assert_denied_429(&d);
    assert!(
        message(&d).contains("vol-healthy: attached to node-2 (engine running in its instance manager)"),
        "{}",
        message(&d)
    );
}

#[test]
fn pod_that_is_not_an_instance_manager_is_allowed() {
    let body = read_json("admission/eviction-create-default-pod.json");
    let d = decide(&State::base(), &body, &Policy::default());
    assert_allowed(&d);
    assert!(d.confirm_node.is_none());

    // A longhorn-system pod in the view without the instance-manager label: allowed too.
    let mut s = State::base();
    let pod = s.get("Pod", im_of("node-1"));
    pod["metadata"]["labels"].as_object_mut().unwrap().remove("longhorn.io/component");
    assert_allowed(&drain(&s, "node-1"));
}

#[test]
fn pod_unknown_to_the_view_waits() {
    // The captured eviction names instance-manager-7b9c5d2e1f3a, which the snapshot lacks.
    let body = read_json("admission/eviction-create.json");
    let d = decide(&State::base(), &body, &Policy::default());
    assert_denied_429(&d);
    assert_eq!(
        message(&d),
        "longhorn-guard: pod longhorn-system/instance-manager-7b9c5d2e1f3a is not in the snapshot case.json; \
         it may be an instance manager, so its eviction is refused; use a snapshot that has it"
    );
    assert!(!message(&d).contains("retry"), "a snapshot does not change: {}", message(&d));
    // A watch view that has not synced says so.
    let mut view =
        ClusterView::new(Source::Watch).derive(longhorn_guard::policy::drain::derivations(), now());
    view.touch(now());
    let d = policy::validate(&request(&body), &view, &Policy::default(), now());
    assert!(message(&d).contains("its watches are still syncing"), "{}", message(&d));
    assert!(message(&d).ends_with("its eviction waits; retry in a few seconds"), "{}", message(&d));

    // The pod is missing but its InstanceManager is known: decided for that IM's node.
    let mut s = State::base();
    s.remove("Pod", im_of("node-1"));
    let d = drain(&s, "node-1");
    assert_denied_429(&d);
    assert!(message(&d).contains("draining node-1 would strand"));
    let mut s = State::base();
    s.remove("Pod", im_of("node-3"));
    assert_allowed(&drain(&s, "node-3"));

    // A longhorn-system pod whose name cannot be an instance manager's is allowed.
    let mut body = read_json("admission/eviction-create.json");
    body["request"]["name"] = json!("longhorn-ui-6b8d9c7f5-x2x4z");
    assert_allowed(&decide(&State::base(), &body, &Policy::default()));
}

#[test]
fn node_delete_uses_the_same_computation() {
    // node-4 is not in the snapshot and holds nothing.
    let body = read_json("admission/node-delete.json");
    let d = decide(&State::base(), &body, &Policy::default());
    assert_allowed(&d);
    assert_eq!(d.rule, "node-delete");

    let for_node = |n: &str| {
        let mut b = body.clone();
        b["request"]["name"] = json!(n);
        b["request"]["oldObject"]["metadata"]["name"] = json!(n);
        b
    };
    let d = decide(&State::base(), &for_node("node-2"), &Policy::default());
    assert_denied_429(&d);
    assert_eq!(d.rule, "node-delete");
    let msg = message(&d);
    assert!(
        msg.starts_with("longhorn-guard: deleting node node-2 would strand 2 volumes:\n- vol-detached: "),
        "{msg}"
    );
    assert!(msg.contains("\n- vol-healthy: attached to node-2"), "{msg}");
    assert_eq!(d.details.volumes, vec!["vol-detached", "vol-healthy"]);

    // Safe to delete, but replicas are left behind (Longhorn #10833): allowed with a warning.
    let d = decide(&State::base(), &for_node("node-3"), &Policy::default());
    assert_allowed(&d);
    assert_eq!(
        d.warnings,
        vec!["longhorn-guard: node-3 holds 1 Longhorn replica; delete that Replica object or later drains may hang (longhorn#10833)"]
    );
    // Several left: plural.
    let mut s = State::base();
    s.get("Replica", "vol-healthy-r-1a2b3c4d")["spec"]["nodeID"] = json!("node-3");
    s.get("Replica", "vol-healthy-r-1a2b3c4d")["metadata"]["labels"]["longhornnode"] = json!("node-3");
    let d = decide(&s, &for_node("node-3"), &Policy::default());
    assert_eq!(
        d.warnings,
        vec!["longhorn-guard: node-3 holds 2 Longhorn replicas; delete those Replica objects or later drains may hang (longhorn#10833)"]
    );
}

#[test]
fn cordon_warns_within_the_limits_and_never_denies() {
    let body = read_json("admission/node-update-cordon.json");
    let d = decide(&State::base(), &body, &Policy::default());
    assert_allowed(&d);
    assert_eq!(d.rule, "cordon");
    assert_eq!(
        d.warnings[0],
        "longhorn-guard: a drain of node-1 will wait for 1 volume (longhorn-guard check drain node-1):"
    );
    assert!(
        d.warnings[1].starts_with("vol-degraded: attached to node-1 (engine running)"),
        "{:?}",
        d.warnings
    );
    assert!(d.warnings.iter().all(|w| w.chars().count() <= MAX_WARNING_LEN), "{:?}", d.warnings);

    // Many blocking volumes: bounded count, each line clipped, then "and N more".
    let mut s = State::base();
    for i in 0..12 {
        let mut v = s.get("Volume", "vol-detached").clone();
        let name = format!("vol-single-{i:02}-with-a-rather-long-name-to-test-clipping-of-warnings");
        v["metadata"]["name"] = json!(name);
        let mut r = s.get("Replica", "vol-detached-r-b1c2d3e4").clone();
        r["metadata"]["name"] = json!(format!("{name}-r-0000000{i}"));
        r["metadata"]["labels"]["longhornnode"] = json!("node-1");
        r["metadata"]["labels"]["longhornvolume"] = json!(name);
        r["spec"]["nodeID"] = json!("node-1");
        r["spec"]["volumeName"] = json!(name);
        s.push(v);
        s.push(r);
    }
    let d = decide(&s, &body, &Policy::default());
    assert_allowed(&d);
    assert!(d.warnings.len() <= MAX_WARNINGS, "{}", d.warnings.len());
    assert!(d.warnings.iter().all(|w| w.chars().count() <= MAX_WARNING_LEN), "{:?}", d.warnings);
    assert!(d.warnings[0].contains("will wait for 13 volumes"), "{}", d.warnings[0]);
    assert_eq!(d.warnings.last().unwrap(), "and 8 more (longhorn-guard check drain node-1 lists all)");

    // Other node updates (already cordoned, uncordon, label changes) carry no warnings.
    let mut b = body.clone();
    b["request"]["oldObject"]["spec"]["unschedulable"] = json!(true);
    let d = decide(&State::base(), &b, &Policy::default());
    assert_allowed(&d);
    assert!(d.warnings.is_empty());
}

#[test]
fn node_update_with_unreadable_objects_is_a_bad_request() {
    let body = read_json("admission/node-update-cordon.json");
    let mut no_old = body.clone();
    no_old["request"].as_object_mut().unwrap().remove("oldObject");
    let mut null_old = body.clone();
    null_old["request"]["oldObject"] = Value::Null;
    let mut odd_old = body.clone();
    odd_old["request"]["oldObject"]["spec"] = json!("not an object");
    let mut odd_new = body.clone();
    odd_new["request"]["object"]["spec"]["unschedulable"] = json!("yes");
    for (case, b, want) in [
        ("missing oldObject", &no_old, "request.oldObject is missing"),
        ("null oldObject", &null_old, "request.oldObject is missing"),
        (
            "odd oldObject",
            &odd_old,
            "request.oldObject.spec is malformed: invalid type: string \"not an object\", expected struct NodeSpec",
        ),
        (
            "odd object",
            &odd_new,
            "request.object.spec.unschedulable is malformed: invalid type: string \"yes\", expected a boolean",
        ),
    ] {
        let d = decide(&State::base(), b, &Policy::default());
        assert!(!d.allowed, "{case}");
        let st = d.status.as_ref().unwrap();
        assert_eq!((st.code, st.message.as_str()), (400, format!("longhorn-guard: {want}").as_str()), "{case}");
        assert!(d.warnings.is_empty(), "{case}: {:?}", d.warnings);
    }
}

#[test]
fn many_blocking_volumes_are_listed_then_counted() {
    let s = with_stranded_copies(8);
    let d = drain(&s, "node-2");
    let msg = message(&d);
    assert!(msg.starts_with("longhorn-guard: draining node-2 would strand 10 volumes:"), "{msg}");
    assert_eq!(msg.lines().count(), 1 + 5 + 1, "{msg}");
    assert!(msg.ends_with("\n- and 5 more (longhorn-guard check drain node-2 lists all)"), "{msg}");
    assert_eq!(d.details.volumes.len(), 10);
}

#[test]
fn policy_modes_and_codes() {
    let s = detached_on_node_3();
    let body = eviction_body("node-3");

    let warn = Policy::parse("drain:\n  action: warn\n").unwrap();
    let d = decide(&s, &body, &warn);
    assert_allowed(&d);
    assert!(d.confirm_node.is_none());
    assert_eq!(
        d.warnings[0],
        "longhorn-guard: draining node-3 would strand 1 volume (drain.action is warn, so it is allowed):"
    );
    assert!(d.warnings[1].starts_with("vol-detached: 1 replica (numberOfReplicas=1)"));
    assert!(d.warnings.iter().all(|w| w.chars().count() <= MAX_WARNING_LEN));

    let off = Policy::parse("drain:\n  action: off\n").unwrap();
    let d = decide(&s, &body, &off);
    assert_allowed(&d);
    assert!(d.warnings.is_empty());

    let fast = Policy::parse("drain:\n  denyCode: 403\n").unwrap();
    let d = decide(&s, &body, &fast);
    let st = d.status.as_ref().unwrap();
    assert_eq!((st.code, st.reason.as_str()), (403, "Forbidden"));
    assert!(st.message.contains("vol-detached"));
}

#[test]
fn override_annotation_on_volume_or_node() {
    let mut s = detached_on_node_3();
    s.get("Volume", "vol-detached")["metadata"]["annotations"] = json!({ ALLOW_DRAIN_ANNOTATION: "  " });
    assert_denied_429(&drain(&s, "node-3"));

    s.get("Volume", "vol-detached")["metadata"]["annotations"] =
        json!({ ALLOW_DRAIN_ANNOTATION: "disk replaced, data restored from backup" });
    let d = drain(&s, "node-3");
    assert_allowed(&d);
    assert_eq!(
        d.details.overridden.as_deref(),
        Some("volume vol-detached annotation longhorn-guard.io/allow-drain: disk replaced, data restored from backup")
    );
    assert_eq!(d.details.volumes, vec!["vol-detached"]);
    assert!(d.warnings[0]
        .starts_with("longhorn-guard: draining node-3 would strand 1 volume; allowed by override"));
    assert!(d.warnings.iter().all(|w| w.chars().count() <= MAX_WARNING_LEN));

    // On the Node: every volume of the node.
    let mut s = State::base();
    s.get("Node", "node-2")["metadata"]["annotations"] =
        json!({ ALLOW_DRAIN_ANNOTATION: "node is being replaced" });
    let d = drain(&s, "node-2");
    assert_allowed(&d);
    assert_eq!(
        d.details.overridden.as_deref(),
        Some("node node-2 annotation longhorn-guard.io/allow-drain: node is being replaced")
    );
    assert_eq!(d.details.volumes, vec!["vol-detached", "vol-healthy"]);
    // A volume override between two node-overridden volumes: each reason is named once.
    let mut v = s.get("Volume", "vol-detached").clone();
    v["metadata"]["name"] = json!("vol-e");
    v["metadata"]["annotations"] = json!({ ALLOW_DRAIN_ANNOTATION: "scratch data" });
    let mut r = s.get("Replica", "vol-detached-r-b1c2d3e4").clone();
    r["metadata"]["name"] = json!("vol-e-r-1");
    r["metadata"]["labels"]["longhornvolume"] = json!("vol-e");
    r["spec"]["volumeName"] = json!("vol-e");
    s.push(v);
    s.push(r);
    let d = drain(&s, "node-2");
    assert_allowed(&d);
    assert_eq!(d.details.volumes, vec!["vol-detached", "vol-e", "vol-healthy"]);
    assert_eq!(
        d.details.overridden.as_deref(),
        Some(
            "node node-2 annotation longhorn-guard.io/allow-drain: node is being replaced; \
             volume vol-e annotation longhorn-guard.io/allow-drain: scratch data"
        )
    );
    // Nothing overridden when nothing blocked.
    let d = drain(&s, "node-3");
    assert!(d.details.overridden.is_none() && d.warnings.is_empty());
}

#[test]
fn stale_watch_views_ask_for_confirmation_of_allows_only() {
    let s = State::base();
    let req = request(&eviction_body("node-3"));
    let p = Policy::default();
    let stale = s.watch_view(now() - Duration::from_secs(60));
    let d = policy::validate(&req, &stale, &p, now());
    assert!(d.allowed);
    assert_eq!(d.confirm_node.as_deref(), Some("node-3"));

    let fresh = s.watch_view(now() - Duration::from_secs(2));
    assert!(policy::validate(&req, &fresh, &p, now()).confirm_node.is_none());

    // A denial on a stale view stands without confirmation.
    let d = policy::validate(&request(&eviction_body("node-1")), &stale, &p, now());
    assert!(!d.allowed && d.confirm_node.is_none());
}

#[tokio::test]
async fn stale_view_and_unreachable_api_server_deny_as_unconfirmed() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();

    let long_ago = SystemTime::now() - Duration::from_secs(3600);
    let view = SharedView::new(State::base().watch_view(long_ago));
    let confirmer = confirm::confirmer(client, view.clone());
    let admitter = Admitter::new(view, Arc::new(Policy::default()), Some(confirmer));
    let body = eviction_body("node-3").to_string();
    let out = admitter.admit(WebhookKind::Validate, body.as_bytes(), Duration::from_secs(5)).await.unwrap();
    assert!(!out.decision.allowed, "a stale view must never allow: {:?}", out.decision);
    let st = out.decision.status.as_ref().unwrap();
    assert_eq!((st.code, st.reason.as_str()), (429, "TooManyRequests"));
    assert!(
        st.message
            .starts_with("longhorn-guard: could not confirm that draining node-3 is safe (cannot list "),
        "{}",
        st.message
    );
    eprintln!("{}", st.message);
    assert_eq!(out.response_json()["response"]["allowed"], false);
    assert_eq!(out.response_json()["response"]["status"]["code"], 429);

    // A node deletion is confirmed the same way, and its denial says what was asked.
    let mut body = read_json("admission/node-delete.json");
    body["request"]["name"] = json!("node-3");
    body["request"]["oldObject"]["metadata"]["name"] = json!("node-3");
    let out = admitter
        .admit(WebhookKind::Validate, body.to_string().as_bytes(), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!out.decision.allowed, "{:?}", out.decision);
    let message = &out.decision.status.as_ref().unwrap().message;
    assert!(
        message.starts_with("longhorn-guard: could not confirm that deleting node node-3 is safe ("),
        "{message}"
    );
    assert_eq!(out.decision.rule, "node-delete");
}

#[test]
fn analysis_lists_every_volume_on_the_node() {
    let a = analyze_node(&State::base().view(), "node-2", &Policy::default(), now());
    let names: Vec<_> = a.volumes.iter().map(|v| (v.volume.as_str(), v.verdict)).collect();
    assert_eq!(
        names,
        vec![
            ("vol-degraded", Verdict::Safe),
            ("vol-detached", Verdict::Block),
            ("vol-healthy", Verdict::Block)
        ]
    );
    let deg = &a.volumes[0];
    assert_eq!(deg.protecting, vec!["vol-degraded-r-3f4a5b6c"]);
    let states: Vec<_> = deg.replicas.iter().map(|r| format!("{}:{}", r.node, r.state)).collect();
    assert_eq!(states, vec!["node-2:WO(0%,stalled)", "node-1:RW"]);
}

#[test]
fn ambiguous_instance_manager_of_a_replica_never_counts_as_running() {
    // node-3's vol-healthy replica is protected by the replicas on node-1 and node-2. Clear their
    // instanceManagerName so the IM is looked up by node and data engine.
    let mut s = State::base();
    for r in ["vol-healthy-r-1a2b3c4d", "vol-healthy-r-5e6f7a8b"] {
        s.get("Replica", r)["status"]["instanceManagerName"] = json!("");
    }
    assert_allowed(&drain(&s, "node-3"));

    // An upgrade puts a second, still-starting instance manager (new image) beside each old one.
    for (node, im) in [
        ("node-1", "instance-manager-5d1f0b6e2c9a47d38e4f7a1b0c2d3e4f"),
        ("node-2", "instance-manager-9b7e2d4c1a0f45e6b8c3d5f7e9a1b2c4"),
    ] {
        let mut new_im = s.get("InstanceManager", im).clone();
        new_im["metadata"]["name"] = json!(format!("instance-manager-new-{node}"));
        new_im["spec"]["image"] = json!("longhornio/longhorn-instance-manager:v1.13.0");
        new_im["status"]["currentState"] = json!("starting");
        s.push(new_im);
    }
    // Which one the replicas belong to is unknown: doubt must not protect.
    let d = drain(&s, "node-3");
    assert_denied_429(&d);
    assert!(message(&d).contains("vol-healthy"), "{}", message(&d));

    // Longhorn's default-instance-manager-image names the old, running one: protected again.
    let mut setting = s.get("Setting", "node-drain-policy").clone();
    setting["metadata"]["name"] = json!("default-instance-manager-image");
    setting["value"] = json!("longhornio/longhorn-instance-manager:v1.12.1");
    s.push(setting);
    assert_allowed(&drain(&s, "node-3"));
}

/// The base state with `n` more copies of the detached volume stranded on node-2
/// (`vol-s0`, `vol-s1`, ...), each with its one replica there.
fn with_stranded_copies(n: usize) -> State {
    let mut s = State::base();
    for i in 0..n {
        let mut v = s.get("Volume", "vol-detached").clone();
        let name = format!("vol-s{i:02}");
        v["metadata"]["name"] = json!(name);
        let mut r = s.get("Replica", "vol-detached-r-b1c2d3e4").clone();
        r["metadata"]["name"] = json!(format!("{name}-r-1"));
        r["metadata"]["labels"]["longhornvolume"] = json!(name);
        r["spec"]["volumeName"] = json!(name);
        s.push(v);
        s.push(r);
    }
    s
}

/// A denial renders only the volumes it lists (5 by default), in name order with their full
/// reason and remedy, and counts the rest without writing them; the log's volume list names
/// every one; a cordon's warnings and `check drain` say the same of the same volumes.
#[test]
fn a_denial_writes_what_it_lists_and_counts_the_rest() {
    let s = with_stranded_copies(12);
    let d = drain(&s, "node-2");
    assert_denied_429(&d);
    let msg = message(&d);
    let one = |v: &str| {
        format!("- {v}: 1 replica (numberOfReplicas=1); raise numberOfReplicas to 2 or more and attach it until the rebuild is done")
    };
    let expected = [
        "longhorn-guard: draining node-2 would strand 14 volumes:".to_string(),
        one("vol-detached"),
        "- vol-healthy: attached to node-2 (engine running); move its workload (PVC default/data-postgres-0) off node-2 first".to_string(),
        one("vol-s00"),
        one("vol-s01"),
        one("vol-s02"),
        "- and 9 more (longhorn-guard check drain node-2 lists all)".to_string(),
    ]
    .join("\n");
    assert_eq!(msg, expected);
    assert_eq!(d.details.volumes.len(), 14);
    assert_eq!(d.details.volumes[2], "vol-s00");

    // drain.maxListedVolumes: 2 lists two and counts twelve.
    let mut two = Policy::default();
    two.drain.max_listed_volumes = 2;
    let d = decide(&s, &eviction_body("node-2"), &two);
    let msg = message(&d);
    assert_eq!(msg.lines().count(), 1 + 2 + 1, "{msg}");
    assert!(msg.ends_with("\n- and 12 more (longhorn-guard check drain node-2 lists all)"), "{msg}");

    // The cordon lists as many as its warnings hold, with the same reasons.
    let cordon = read_json("admission/node-update-cordon.json");
    let mut cordon = cordon;
    cordon["request"]["name"] = json!("node-2");
    for o in ["object", "oldObject"] {
        cordon["request"][o]["metadata"]["name"] = json!("node-2");
    }
    let c = decide(&s, &cordon, &Policy::default());
    assert!(c.allowed);
    assert_eq!(
        c.warnings[0],
        "longhorn-guard: a drain of node-2 will wait for 14 volumes (longhorn-guard check drain node-2):"
    );
    assert!(c.warnings[1].starts_with("vol-detached: "), "{:?}", c.warnings);
    assert_eq!(c.warnings.last().unwrap(), "and 9 more (longhorn-guard check drain node-2 lists all)");

    // `check drain` writes every one, each the same line the denial writes for it.
    let a = analyze_node(&s.view(), "node-2", &Policy::default(), now());
    let blocking: Vec<String> = a.blocking().map(|v| format!("- {}", v.line())).collect();
    assert_eq!(blocking.len(), 14);
    assert_eq!(blocking[..5], expected.lines().skip(1).take(5).map(String::from).collect::<Vec<_>>()[..]);
}
