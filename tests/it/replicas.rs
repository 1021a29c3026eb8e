//! Replica-count and settings rules, fed with the captured AdmissionReviews of
//! ../shared/fixtures/admission against the three-node cluster snapshot.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use longhorn_guard::admission::{parse_review, AdmissionRequest};
use longhorn_guard::admit::{Admitter, WebhookKind};
use longhorn_guard::cluster::{snapshot, ClusterView, SharedView};
use longhorn_guard::decision::{Decision, MAX_WARNING_LEN};
use longhorn_guard::policy::{self, Policy};
use serde_json::{json, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures");

fn view() -> ClusterView {
    snapshot::load(Path::new(&format!("{FIXTURES}/cluster/snapshot-three-nodes.json"))).unwrap()
}

fn body(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/admission/{name}")).unwrap()
}

fn request(name: &str) -> AdmissionRequest {
    parse_review(&body(name)).unwrap()
}

fn deny_policy() -> Policy {
    Policy::parse("replicas:\n  action: deny\n").unwrap()
}

fn decide(req: &AdmissionRequest, policy: &Policy) -> Decision {
    policy::validate(req, &view(), policy, SystemTime::now())
}

/// Asserts an allow with exactly these warnings, each within the Kubernetes limit.
fn assert_warns(d: &Decision, want: &[&str]) {
    assert!(d.allowed, "expected an allow: {d:?}");
    assert_eq!(d.status, None);
    assert_eq!(d.warnings, want);
    for w in &d.warnings {
        assert!(w.chars().count() <= MAX_WARNING_LEN, "{} chars: {w}", w.chars().count());
    }
}

/// Asserts a 422 Invalid denial with one field cause carrying the message.
fn assert_invalid(d: &Decision, field: &str, message: &str) {
    assert!(!d.allowed, "expected a denial: {d:?}");
    let st = d.status.as_ref().unwrap();
    assert_eq!((st.code, st.reason.as_str(), st.message.as_str()), (422, "Invalid", message));
    assert_eq!(st.causes.len(), 1, "{st:?}");
    assert_eq!(
        (st.causes[0].type_.as_str(), st.causes[0].field.as_str(), st.causes[0].message.as_str()),
        ("FieldValueInvalid", field, message)
    );
    assert_eq!(d.rule, "replicas");
}

const SETTING_JSON: &str =
    "longhorn-guard: default-replica-count v1=2, v2=2: 2 replicas tolerate 1 node failure; policy minimum is 3";
const SETTING_PLAIN: &str =
    "longhorn-guard: default-replica-count=2 (all engines): 2 replicas tolerate 1 node failure; policy minimum is 3";
const DRAIN_POLICY: &str = "longhorn-guard: node-drain-policy=always-allow: Longhorn stops blocking drains; \
                            longhorn-guard still blocks unsafe ones";
const STORAGE_NETWORK: &str = "longhorn-guard: storage-network=kube-system/storage-net: recreates all \
                               instance managers; the init gate guards start-up";
const SC_ONE: &str =
    "longhorn-guard: storageclass longhorn-1-replica: numberOfReplicas=1 has no redundancy; policy minimum is 3";
const VOL_CREATE: &str =
    "longhorn-guard: volume pvc-3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f: numberOfReplicas=2 \
                          tolerates 1 node failure; minimum 3";
const VOL_CREATE_FULL: &str = "longhorn-guard: volume pvc-3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f: \
                               numberOfReplicas=2 tolerates 1 node failure; policy minimum is 3";
const VOL_NODES: &str =
    "longhorn-guard: volume pvc-d0c1b2a3-e4f5-4a6b-8c7d-9e0f1a2b3c4d: numberOfReplicas=3 > 2 \
                         schedulable nodes: 1 unplaceable";
const VOL_UPDATE: &str =
    "longhorn-guard: volume pvc-6a2e4c1d-8b3f-4e5a-9c7d-1f0e2d3c4b5a: numberOfReplicas=1 \
                          has no redundancy; minimum 3";
const VOL_UPDATE_FULL: &str = "longhorn-guard: volume pvc-6a2e4c1d-8b3f-4e5a-9c7d-1f0e2d3c4b5a: \
                               numberOfReplicas=1 has no redundancy; policy minimum is 3";

#[test]
fn setting_at_the_minimum_gives_no_warning() {
    for policy in [Policy::default(), deny_policy()] {
        let d = decide(&request("setting-create.json"), &policy);
        assert_warns(&d, &[]);
        assert_eq!(d.rule, "replicas");
    }
}

#[test]
fn default_replica_count_both_value_forms_warn() {
    let d = decide(&request("setting-update.json"), &Policy::default());
    assert_warns(&d, &[SETTING_JSON]);
    assert_eq!(d.rule, "replicas");
    let d = decide(&request("setting-update-plain.json"), &Policy::default());
    assert_warns(&d, &[SETTING_PLAIN]);
}

#[test]
fn default_replica_count_both_value_forms_deny() {
    assert_invalid(&decide(&request("setting-update.json"), &deny_policy()), "value", SETTING_JSON);
    assert_invalid(&decide(&request("setting-update-plain.json"), &deny_policy()), "value", SETTING_PLAIN);
}

#[test]
fn default_replica_count_groups_engines_and_names_each_count() {
    let mut req = request("setting-update.json");
    req.object.as_mut().unwrap()["value"] = json!(r#"{"v1":"1","v2":"2"}"#);
    assert_warns(
        &decide(&req, &Policy::default()),
        &[
            "longhorn-guard: default-replica-count v1=1: no redundancy, one node failure loses data; policy minimum is 3",
            "longhorn-guard: default-replica-count v2=2: 2 replicas tolerate 1 node failure; policy minimum is 3",
        ],
    );
    // With a lower minimum only v1 is below it.
    let p = Policy::parse("replicas:\n  minimum: 2\n").unwrap();
    assert_warns(
        &decide(&req, &p),
        &["longhorn-guard: default-replica-count v1=1: no redundancy, one node failure loses data; policy minimum is 2"],
    );
    // Deny: both findings in one message, one cause each.
    let d = decide(&req, &deny_policy());
    let st = d.status.unwrap();
    assert_eq!(st.code, 422);
    assert_eq!(st.causes.len(), 2);
    assert!(st.causes.iter().all(|c| c.field == "value"));
}

#[test]
fn unreadable_default_replica_count_is_allowed_with_a_warning() {
    let cases = [
        (
            "three",
            r#"longhorn-guard: cannot read default-replica-count "three" (want 1..20 or {"v1":"3",...}); not checked"#,
        ),
        (
            r#"{"v1":"two","v2":"3"}"#,
            r#"longhorn-guard: cannot read default-replica-count v1="two" (want 1..20); not checked"#,
        ),
        (
            r#"{"v1":"3""#,
            r#"longhorn-guard: cannot read default-replica-count "{"v1":"3"" (not a JSON object); not checked"#,
        ),
        ("{}", r#"longhorn-guard: cannot read default-replica-count {} (names no data engine); not checked"#),
        (
            "0",
            r#"longhorn-guard: cannot read default-replica-count "0" (want 1..20 or {"v1":"3",...}); not checked"#,
        ),
        (
            "",
            r#"longhorn-guard: cannot read default-replica-count "" (want 1..20 or {"v1":"3",...}); not checked"#,
        ),
        (
            "a-very-long-value-that-is-not-a-number-at-all",
            r#"longhorn-guard: cannot read default-replica-count "a-very-lo...r-at-all" (want 1..20 or {"v1":"3",...}); not checked"#,
        ),
    ];
    for (value, want) in cases {
        let mut req = request("setting-update-plain.json");
        req.object.as_mut().unwrap()["value"] = json!(value);
        for policy in [Policy::default(), deny_policy()] {
            assert_warns(&decide(&req, &policy), &[want]);
        }
    }
}

#[test]
fn unchanged_low_value_is_warned_not_denied() {
    // An UPDATE that leaves a low count alone (labels, finalizers, Longhorn's own writes).
    let mut req = request("setting-update.json");
    req.old_object.as_mut().unwrap()["value"] = req.object.as_ref().unwrap()["value"].clone();
    assert_warns(&decide(&req, &deny_policy()), &[SETTING_JSON]);

    let mut req = request("volume-update-replicas.json");
    req.old_object.as_mut().unwrap()["spec"]["numberOfReplicas"] = json!(1);
    assert_warns(&decide(&req, &deny_policy()), &[VOL_UPDATE]);
}

#[test]
fn longhorns_own_rewrite_of_an_unchanged_count_gets_no_warning() {
    // Real Longhorn v1.10.2's managers rewrite Volumes (finalizers, spec syncs) and log each
    // warning the API server returns: an UPDATE by a trusted user leaving the counted fields as
    // they were is allowed with none. A user's is still warned (above); a change by Longhorn is
    // still reviewed.
    const LONGHORN: &str = "system:serviceaccount:longhorn-system:longhorn-service-account";
    let as_longhorn = |name: &str, f: &dyn Fn(&mut AdmissionRequest)| {
        let mut req = request(name);
        req.user_info.username = LONGHORN.into();
        f(&mut req);
        req
    };
    let same_volume = |r: &mut AdmissionRequest| {
        r.old_object.as_mut().unwrap()["spec"]["numberOfReplicas"] = json!(1);
        r.old_object.as_mut().unwrap()["metadata"]["finalizers"] = json!([]);
    };
    let same_setting = |r: &mut AdmissionRequest| {
        r.old_object.as_mut().unwrap()["value"] = r.object.as_ref().unwrap()["value"].clone();
    };
    for policy in [Policy::default(), deny_policy()] {
        for req in [
            as_longhorn("volume-update-replicas.json", &same_volume),
            as_longhorn("setting-update.json", &same_setting),
            as_longhorn("setting-update-node-drain-policy.json", &same_setting),
        ] {
            let d = decide(&req, &policy);
            assert!(d.allowed && d.warnings.is_empty() && d.status.is_none(), "{d:?}");
        }
        // Longhorn lowering a count, or a trusted name that is not trusted by this policy.
        let lowered = as_longhorn("volume-update-replicas.json", &|_| {});
        assert!(!decide(&lowered, &policy).warnings.is_empty() || !decide(&lowered, &policy).allowed);
    }
    let untrusting = Policy::parse("drain:\n  trustedUsers: []\n").unwrap();
    let req = as_longhorn("volume-update-replicas.json", &same_volume);
    assert_warns(&decide(&req, &untrusting), &[VOL_UPDATE]);
}

#[test]
fn raising_a_low_count_is_warned_not_denied() {
    // 1 -> 2: still below 3, but a step towards it.
    let mut req = request("volume-create.json");
    req.operation = longhorn_guard::admission::Operation::Update;
    let mut old = req.object.clone().unwrap();
    old["spec"]["numberOfReplicas"] = json!(1);
    req.old_object = Some(old);
    assert_warns(&decide(&req, &deny_policy()), &[VOL_CREATE]);

    // default-replica-count {"v1":"1","v2":"1"} -> {"v1":"2","v2":"2"}.
    let mut req = request("setting-update.json");
    req.old_object.as_mut().unwrap()["value"] = json!(r#"{"v1":"1","v2":"1"}"#);
    assert_warns(&decide(&req, &deny_policy()), &[SETTING_JSON]);
    // "1" -> "2" in the plain form.
    let mut req = request("setting-update-plain.json");
    req.old_object.as_mut().unwrap()["value"] = json!("1");
    assert_warns(&decide(&req, &deny_policy()), &[SETTING_PLAIN]);
    // {"v1":"1","v2":"3"} -> "2": v2 is lowered, so it is denied.
    req.old_object.as_mut().unwrap()["value"] = json!(r#"{"v1":"1","v2":"3"}"#);
    assert_invalid(&decide(&req, &deny_policy()), "value", SETTING_PLAIN);
    // An unreadable old value counts as lowered.
    req.old_object.as_mut().unwrap()["value"] = json!("junk");
    assert_invalid(&decide(&req, &deny_policy()), "value", SETTING_PLAIN);
}

#[test]
fn settings_that_remove_protection_warn_under_both_actions() {
    for policy in [Policy::default(), deny_policy()] {
        let d = decide(&request("setting-update-node-drain-policy.json"), &policy);
        assert_warns(&d, &[DRAIN_POLICY]);
        assert_eq!(d.rule, "settings");
        let d = decide(&request("setting-update-storage-network.json"), &policy);
        assert_warns(&d, &[STORAGE_NETWORK]);
        assert_eq!(d.rule, "settings");
    }
}

#[test]
fn drain_policy_warning_follows_drain_action() {
    let req = request("setting-update-node-drain-policy.json");
    let p = Policy::parse("drain:\n  action: warn\n").unwrap();
    assert_warns(
        &decide(&req, &p),
        &["longhorn-guard: node-drain-policy=always-allow: Longhorn stops blocking drains; drain.action=warn: nothing blocks them"],
    );
    let p = Policy::parse("drain:\n  action: off\n").unwrap();
    assert_warns(
        &decide(&req, &p),
        &["longhorn-guard: node-drain-policy=always-allow: Longhorn stops blocking drains; drain.action=off: nothing blocks them"],
    );
    let mut other = req.clone();
    other.object.as_mut().unwrap()["value"] = json!("block-for-eviction");
    assert_warns(&decide(&other, &Policy::default()), &[]);
}

#[test]
fn storage_network_values() {
    let req = request("setting-update-storage-network.json");
    let with = |value: &str, old: &str| {
        let mut r = req.clone();
        r.object.as_mut().unwrap()["value"] = json!(value);
        r.old_object.as_mut().unwrap()["value"] = json!(old);
        r
    };
    let p = Policy::default();
    assert_warns(&decide(&with("", "kube-system/storage-net"), &p), &[]);
    assert_warns(&decide(&with("kube-system/storage-net", "kube-system/storage-net"), &p), &[]);
    assert_warns(
        &decide(&with("storage-net", ""), &p),
        &[r#"longhorn-guard: storage-network="storage-net" is not <namespace>/<name>; Longhorn rejects it"#],
    );
    // Longhorn accepts these (two parts at '/') but can never use them.
    assert_warns(
        &decide(&with("/storage-net", ""), &p),
        &[
            r#"longhorn-guard: storage-network="/storage-net" has no namespace: Longhorn never matches it and uses the pod IP"#,
        ],
    );
    assert_warns(
        &decide(&with("storage-net/", ""), &p),
        &[
            r#"longhorn-guard: storage-network="storage-net/" is not <namespace>/<name>; instance managers cannot use it"#,
        ],
    );
    let long = format!("/{}", "n".repeat(300));
    let d = decide(&with(&long, ""), &p);
    assert!(
        d.warnings[0].contains("...")
            && d.warnings[0].ends_with("has no namespace: Longhorn never matches it and uses the pod IP"),
        "{d:?}"
    );
    let gate_off = Policy::parse("gate:\n  enabled: false\n").unwrap();
    assert_warns(
        &decide(&with("kube-system/storage-net", ""), &gate_off),
        &["longhorn-guard: storage-network=kube-system/storage-net: recreates all instance managers; the init gate is off"],
    );
    // A long value is clipped in the middle, never past the limit.
    let long = format!("{}/{}", "n".repeat(60), "x".repeat(60));
    let d = decide(&with(&long, ""), &p);
    assert_eq!(d.warnings.len(), 1);
    assert_eq!(d.warnings[0].chars().count(), MAX_WARNING_LEN);
    assert!(
        d.warnings[0].ends_with(": recreates all instance managers; the init gate guards start-up"),
        "{}",
        d.warnings[0]
    );
}

#[test]
fn storage_class_fixture() {
    let req = request("storageclass-create-longhorn-1-replica.json");
    let d = decide(&req, &Policy::default());
    assert_warns(&d, &[SC_ONE]);
    assert_eq!(d.rule, "replicas");
    assert_invalid(&decide(&req, &deny_policy()), "parameters.numberOfReplicas", SC_ONE);
    // A per-StorageClass override.
    let p = Policy::parse("replicas:\n  storageClassMinimums: {longhorn-1-replica: 1}\n").unwrap();
    assert_warns(&decide(&req, &p), &[]);
}

/// The 422 names the object in `status.details` (group, kind, name) beside its causes, so kubectl
/// prints `The StorageClass "longhorn-1-replica" is invalid: parameters.numberOfReplicas: ...`
/// (its `checkErr` for reason `Invalid`); without kind and name it prints only "The request is
/// invalid", dropping the message the causes do not repeat.
#[test]
fn a_denial_names_its_object_for_kubectl() {
    let cases = [
        (
            "storageclass-create-longhorn-1-replica.json",
            "storage.k8s.io",
            "StorageClass",
            "longhorn-1-replica",
        ),
        ("volume-create.json", "longhorn.io", "Volume", ""),
        ("setting-update.json", "longhorn.io", "Setting", "default-replica-count"),
    ];
    for (fixture, group, kind, name) in cases {
        let req = request(fixture);
        let name = if name.is_empty() {
            req.object.as_ref().unwrap()["metadata"]["name"].as_str().unwrap()
        } else {
            name
        };
        let d = decide(&req, &deny_policy());
        let wire = serde_json::to_value(longhorn_guard::admission::response_review(&req.uid, &d)).unwrap();
        let status = &wire["response"]["status"];
        assert_eq!(
            (status["code"].as_u64(), status["reason"].as_str()),
            (Some(422), Some("Invalid")),
            "{fixture}"
        );
        let details = &status["details"];
        assert_eq!(
            (details["group"].as_str(), details["kind"].as_str(), details["name"].as_str()),
            (Some(group), Some(kind), Some(name)),
            "{fixture}: {details}"
        );
        let causes = details["causes"].as_array().unwrap();
        assert!(!causes.is_empty(), "{fixture}");
        assert_eq!(causes[0]["message"], status["message"], "{fixture}");
    }
    // An allow, or a 429 drain denial, carries no details.
    let req = request("storageclass-create-longhorn-1-replica.json");
    let d = decide(&req, &Policy::default());
    let wire = serde_json::to_value(longhorn_guard::admission::response_review(&req.uid, &d)).unwrap();
    assert!(wire["response"].get("status").is_none(), "{wire}");
}

#[test]
fn storage_class_edge_cases() {
    let base = request("storageclass-create-longhorn-1-replica.json");
    let with = |f: &dyn Fn(&mut Value)| {
        let mut r = base.clone();
        f(r.object.as_mut().unwrap());
        r
    };
    let p = Policy::default();
    let other = with(&|o| o["provisioner"] = json!("ebs.csi.aws.com"));
    assert_warns(&decide(&other, &p), &[]);
    let bad = with(&|o| o["parameters"]["numberOfReplicas"] = json!("one"));
    for policy in [Policy::default(), deny_policy()] {
        assert_warns(
            &decide(&bad, &policy),
            &[
                r#"longhorn-guard: storageclass longhorn-1-replica: cannot read numberOfReplicas "one": not a count in 1..20; not checked"#,
            ],
        );
    }
    // No parameter: the cluster default (3 in the snapshot) applies, nothing to say.
    let none = with(&|o| {
        o["parameters"].as_object_mut().unwrap().remove("numberOfReplicas");
    });
    assert_warns(&decide(&none, &p), &[]);
}

#[test]
fn volume_fixtures_default_policy() {
    assert_warns(&decide(&request("volume-create.json"), &Policy::default()), &[VOL_CREATE]);
    // 3 replicas, but node-3 is cordoned (Schedulable=False): only 2 nodes can take one.
    assert_warns(&decide(&request("volume-create-dry-run.json"), &Policy::default()), &[VOL_NODES]);
    assert_warns(&decide(&request("volume-update-replicas.json"), &Policy::default()), &[VOL_UPDATE]);
}

#[test]
fn volume_fixtures_deny_policy() {
    assert_invalid(
        &decide(&request("volume-create.json"), &deny_policy()),
        "spec.numberOfReplicas",
        VOL_CREATE_FULL,
    );
    assert_invalid(
        &decide(&request("volume-update-replicas.json"), &deny_policy()),
        "spec.numberOfReplicas",
        VOL_UPDATE_FULL,
    );
    // Too many replicas for the schedulable nodes is a warning, never a denial.
    assert_warns(&decide(&request("volume-create-dry-run.json"), &deny_policy()), &[VOL_NODES]);
}

#[test]
fn a_healthy_volume_with_more_replicas_than_schedulable_nodes_is_warned_of_its_next_loss() {
    // Healthy: every replica is placed (one on a node that stopped taking replicas since), so
    // "cannot be placed" would be wrong; the risk is the replacement of a replica it loses.
    let mut req = request("volume-create-dry-run.json");
    req.object.as_mut().unwrap()["status"] = json!({"robustness": "healthy", "state": "attached"});
    for policy in [Policy::default(), deny_policy()] {
        assert_warns(
            &decide(&req, &policy),
            &["longhorn-guard: volume pvc-d0c1b2a3-e4f5-4a6b-8c7d-9e0f1a2b3c4d: numberOfReplicas=3 > 2 \
               schedulable nodes: no spare node"],
        );
    }
    // Degraded (or not known yet, as on CREATE): replicas are missing now.
    req.object.as_mut().unwrap()["status"]["robustness"] = json!("degraded");
    assert_warns(&decide(&req, &Policy::default()), &[VOL_NODES]);
}

fn volume_req(f: impl Fn(&mut Value)) -> AdmissionRequest {
    let mut r = request("volume-create.json");
    f(r.object.as_mut().unwrap());
    r
}

#[test]
fn volume_zero_resolves_the_default_setting() {
    let req = volume_req(|o| {
        o["spec"]["numberOfReplicas"] = json!(0);
        o["metadata"]["name"] = json!("vol-a");
    });
    // The snapshot's default is {"v1":"3","v2":"3"}: at the minimum, but more than the two
    // schedulable nodes (node-3 is cordoned).
    assert_warns(
        &decide(&req, &Policy::default()),
        &["longhorn-guard: volume vol-a: numberOfReplicas=3 > 2 schedulable nodes; 1 replica cannot be placed: degraded"],
    );
    // With v2=2 in the view, a v2 volume is below the minimum; a warning even under deny.
    let mut view = view();
    let setting = json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Setting",
        "metadata": {"name": "default-replica-count", "namespace": "longhorn-system"},
        "value": "{\"v1\":\"3\",\"v2\":\"2\"}"});
    view.upsert(
        longhorn_guard::cluster::Object::from_value(longhorn_guard::cluster::ObjectKind::Setting, setting)
            .unwrap(),
        SystemTime::now(),
    );
    let v2 = volume_req(|o| {
        o["spec"]["numberOfReplicas"] = json!(0);
        o["spec"]["dataEngine"] = json!("v2");
        o["metadata"]["name"] = json!("vol-a");
    });
    for policy in [Policy::default(), deny_policy()] {
        assert_warns(
            &policy::validate(&v2, &view, &policy, SystemTime::now()),
            &["longhorn-guard: volume vol-a: numberOfReplicas=0 means default-replica-count v2=2; policy minimum is 3"],
        );
    }
    // Without the setting in the view it cannot be resolved.
    let empty = ClusterView::new(longhorn_guard::cluster::Source::Direct);
    assert_warns(
        &policy::validate(&req, &empty, &Policy::default(), SystemTime::now()),
        &["longhorn-guard: volume vol-a: numberOfReplicas=0 means default-replica-count, not known here; not checked"],
    );
}

#[test]
fn strict_local_and_namespace_minimums() {
    let req = volume_req(|o| {
        o["metadata"]["name"] = json!("cache");
        o["spec"]["numberOfReplicas"] = json!(1);
        o["spec"]["dataLocality"] = json!("strict-local");
    });
    assert_warns(
        &decide(&req, &Policy::default()),
        &[
            "longhorn-guard: volume cache: numberOfReplicas=1 has no redundancy; policy minimum is 3",
            "longhorn-guard: volume cache: strict-local keeps 1 replica; every drain of its node will block",
        ],
    );
    // Deny: the count is denied, the strict-local note rides along as a warning.
    let d = decide(&req, &deny_policy());
    assert_eq!(d.status.as_ref().unwrap().causes[0].field, "spec.numberOfReplicas");
    assert_eq!(
        d.warnings,
        ["longhorn-guard: volume cache: strict-local keeps 1 replica; every drain of its node will block"]
    );

    let in_ns = |ns: &str| {
        volume_req(move |o| {
            o["metadata"]["name"] = json!("scratch");
            o["status"] = json!({"kubernetesStatus": {"namespace": ns, "pvcName": "data"}});
        })
    };
    let p = Policy::parse("replicas:\n  namespaceMinimums: {ci: 2, prod: 4}\n").unwrap();
    assert_warns(&decide(&in_ns("ci"), &p), &[]);
    assert_warns(
        &decide(&in_ns("prod"), &p),
        &["longhorn-guard: volume scratch: numberOfReplicas=2 tolerates 1 node failure; namespace prod minimum is 4"],
    );
    assert_warns(
        &decide(&in_ns("other"), &p),
        &["longhorn-guard: volume scratch: numberOfReplicas=2 tolerates 1 node failure; policy minimum is 3"],
    );
}

/// The dry-run volume (3 replicas, 2 schedulable nodes) decided with
/// `replica-soft-anti-affinity` set to `value`.
fn with_soft_anti_affinity(value: &str) -> Decision {
    let mut view = view();
    let setting = json!({"apiVersion": "longhorn.io/v1beta2", "kind": "Setting",
        "metadata": {"name": "replica-soft-anti-affinity", "namespace": "longhorn-system"}, "value": value});
    view.upsert(
        longhorn_guard::cluster::Object::from_value(longhorn_guard::cluster::ObjectKind::Setting, setting)
            .unwrap(),
        SystemTime::now(),
    );
    policy::validate(&request("volume-create-dry-run.json"), &view, &Policy::default(), SystemTime::now())
}

#[test]
fn soft_anti_affinity_silences_the_node_count_warning() {
    // Read as Longhorn reads booleans (Go's strconv.ParseBool).
    for value in ["true", "True", "1", "t"] {
        assert_warns(&with_soft_anti_affinity(value), &[]);
    }
    assert_warns(&with_soft_anti_affinity("false"), &[VOL_NODES]);
}

#[test]
fn a_storage_class_count_is_read_as_longhorns_csi_driver_reads_it() {
    let base = request("storageclass-create-longhorn-1-replica.json");
    let with = |v: &str| {
        let mut r = base.clone();
        r.object.as_mut().unwrap()["parameters"]["numberOfReplicas"] = json!(v);
        r
    };
    // "0" means the cluster default (3 in the snapshot): nothing to say. Atoi reads a sign and
    // leading zeros, so these are 0 too.
    for zero in ["0", "00", "-0", "+0"] {
        assert_warns(&decide(&with(zero), &deny_policy()), &[]);
    }
    // A class override is named as the minimum's source.
    let own = Policy::parse("replicas:\n  action: deny\n  storageClassMinimums: {longhorn-1-replica: 2}\n")
        .unwrap();
    let d = decide(&with("1"), &own);
    assert_eq!(
        d.status.unwrap().message,
        "longhorn-guard: storageclass longhorn-1-replica: numberOfReplicas=1 has no redundancy; storageclass longhorn-1-replica minimum is 2"
    );
    // ... and these are 2.
    for two in ["02", "+2"] {
        let d = decide(&with(two), &deny_policy());
        assert!(!d.allowed, "{two}: {d:?}");
        assert!(d.status.unwrap().message.contains("numberOfReplicas=2 tolerates 1 node failure"), "{two}");
    }
    // Go's Atoi takes no spaces: every PVC of such a class would fail.
    assert_warns(
        &decide(&with(" 3"), &deny_policy()),
        &[
            r#"longhorn-guard: storageclass longhorn-1-replica: cannot read numberOfReplicas " 3": not a count in 1..20; not checked"#,
        ],
    );
}

#[test]
fn a_volume_naming_no_namespace_yet_is_not_denied_when_an_override_could_allow_it() {
    // Longhorn's CSI driver creates the Volume before its status names the PVC's namespace.
    let req = volume_req(|o| {
        o["metadata"]["name"] = json!("scratch");
        o["spec"]["numberOfReplicas"] = json!(1);
    });
    let overrides = Policy::parse("replicas:\n  action: deny\n  namespaceMinimums: {ci: 1}\n").unwrap();
    assert_warns(
        &decide(&req, &overrides),
        &["longhorn-guard: volume scratch: numberOfReplicas=1; minimum 3 unless overridden"],
    );
    let by_class =
        Policy::parse("replicas:\n  action: deny\n  storageClassMinimums: {longhorn-scratch: 1}\n").unwrap();
    assert!(decide(&req, &by_class).allowed);
    // No override could allow it: denied as before.
    let strict = Policy::parse("replicas:\n  action: deny\n  namespaceMinimums: {prod: 4}\n").unwrap();
    assert!(!decide(&req, &strict).allowed);
}

#[test]
fn a_volume_never_names_its_storage_class_so_a_lower_class_minimum_keeps_it_a_warning() {
    // The namespace is known, the StorageClass never is (it is on the PersistentVolume): a
    // class override below the minimum might be the one that applies.
    let req = volume_req(|o| {
        o["metadata"]["name"] = json!("scratch");
        o["spec"]["numberOfReplicas"] = json!(1);
        o["status"] = json!({"kubernetesStatus": {"namespace": "default", "pvcName": "data"}});
    });
    let by_class =
        Policy::parse("replicas:\n  action: deny\n  storageClassMinimums: {longhorn-scratch: 1}\n").unwrap();
    assert_warns(
        &decide(&req, &by_class),
        &["longhorn-guard: volume scratch: numberOfReplicas=1; minimum 3 unless overridden"],
    );
    // A namespace override is named, and a class override below it still makes it uncertain.
    let both = Policy::parse(
        "replicas:\n  action: deny\n  namespaceMinimums: {default: 2}\n  storageClassMinimums: {longhorn-scratch: 1}\n",
    )
    .unwrap();
    let d = decide(&req, &both);
    assert!(d.allowed, "{d:?}");
    // Class overrides at or above the minimum cannot allow it: denied, naming the source.
    let high = Policy::parse(
        "replicas:\n  action: deny\n  namespaceMinimums: {default: 2}\n  storageClassMinimums: {fast: 3}\n",
    )
    .unwrap();
    let d = decide(&req, &high);
    assert!(!d.allowed, "{d:?}");
    assert_eq!(
        d.status.unwrap().message,
        "longhorn-guard: volume scratch: numberOfReplicas=1 has no redundancy; namespace default minimum is 2"
    );
}

#[test]
fn null_fields_read_as_unset_as_the_api_server_stores_them() {
    let base = request("storageclass-create-longhorn-1-replica.json");
    for provisioner in ["driver.longhorn.io", "rancher.io/local-path"] {
        let mut r = base.clone();
        let o = r.object.as_mut().unwrap();
        o["provisioner"] = json!(provisioner);
        o["parameters"] = Value::Null;
        // No parameters: the cluster default (3 in the snapshot) applies; nothing to say.
        assert_warns(&decide(&r, &deny_policy()), &[]);
    }
    let vol = volume_req(|o| {
        o["spec"]["dataLocality"] = Value::Null;
        o["status"] = Value::Null;
    });
    assert!(decide(&vol, &Policy::default()).allowed);
    // A null parameter value is "" in Go's map[string]string: Longhorn cannot read it.
    let mut r = base.clone();
    r.object.as_mut().unwrap()["parameters"]["numberOfReplicas"] = Value::Null;
    assert_warns(
        &decide(&r, &deny_policy()),
        &[
            r#"longhorn-guard: storageclass longhorn-1-replica: cannot read numberOfReplicas "": not a count in 1..20; not checked"#,
        ],
    );
}

#[test]
fn malformed_objects_are_bad_requests_not_allows() {
    let req = volume_req(|o| o["spec"]["numberOfReplicas"] = json!("three"));
    let d = decide(&req, &Policy::default());
    assert!(!d.allowed);
    assert_eq!(d.status.as_ref().unwrap().code, 400);
    let mut req = request("setting-update.json");
    req.object.as_mut().unwrap()["value"] = json!(2);
    let d = decide(&req, &Policy::default());
    assert_eq!(
        d.status.unwrap().message,
        "longhorn-guard: request.object.value is malformed: must be a string"
    );
}

#[test]
fn long_names_are_clipped_to_the_limit() {
    let name = "v".repeat(253);
    let req = volume_req(|o| {
        o["metadata"]["name"] = json!(name);
        o["spec"]["numberOfReplicas"] = json!(1);
        o["spec"]["dataLocality"] = json!("strict-local");
    });
    let d = decide(&req, &Policy::default());
    assert_eq!(d.warnings.len(), 2);
    for w in &d.warnings {
        assert_eq!(w.chars().count(), MAX_WARNING_LEN, "{w}");
        assert!(w.starts_with("longhorn-guard: volume vvvv"), "{w}");
        assert!(w.contains("..."), "{w}");
    }
}

/// What `kubectl apply` prints: each warning of the webhook's response after `Warning: `,
/// before the object line (../shared/fixtures/kubectl-output/apply-with-warnings.txt).
#[tokio::test]
async fn kubectl_shows_the_response_warnings() {
    let captured =
        std::fs::read_to_string(format!("{FIXTURES}/kubectl-output/apply-with-warnings.txt")).unwrap();
    let kubectl_warning_lines: Vec<&str> = captured.lines().filter(|l| l.starts_with("Warning: ")).collect();
    assert!(!kubectl_warning_lines.is_empty());

    let admitter = Admitter::new(SharedView::new(view()), Arc::new(Policy::default()), None);
    let cases: [(&str, &[&str]); 4] = [
        ("setting-update.json", &[SETTING_JSON]),
        ("setting-update-plain.json", &[SETTING_PLAIN]),
        ("setting-update-node-drain-policy.json", &[DRAIN_POLICY]),
        ("storageclass-create-longhorn-1-replica.json", &[SC_ONE]),
    ];
    for (fixture, want) in cases {
        let admitted =
            admitter.admit(WebhookKind::Validate, &body(fixture), Duration::from_secs(5)).await.unwrap();
        let json = admitted.response_json();
        let response = &json["response"];
        assert_eq!(response["allowed"], true);
        assert_eq!(response["uid"], admitted.request.uid.as_str());
        let shown: Vec<String> = response["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| format!("Warning: {}", w.as_str().unwrap()))
            .collect();
        let expected: Vec<String> = want.iter().map(|w| format!("Warning: {w}")).collect();
        assert_eq!(shown, expected, "{fixture}");
        for line in &shown {
            // Same shape as kubectl's lines: one `Warning: ` and the text, on one line.
            assert_eq!(line.matches("Warning: ").count(), 1);
            assert!(!line.contains('\n'));
            assert!(line.len() - "Warning: ".len() <= MAX_WARNING_LEN);
        }
    }
    assert_eq!(
        format!("Warning: {SETTING_PLAIN}"),
        "Warning: longhorn-guard: default-replica-count=2 (all engines): 2 replicas tolerate 1 node failure; policy minimum is 3"
    );
}

/// One command of a captured kubectl transcript: `$ cmd`, its `Warning: ` lines, the object
/// line (`<resource>.<group>/<name> <verb>`) and `[exit code: N]`.
#[derive(Debug)]
struct Transcript {
    command: String,
    warnings: Vec<String>,
    object: String,
    exit: String,
}

impl Transcript {
    /// Splits the fixture into its blank-line separated commands.
    fn parse_all(text: &str) -> Vec<Transcript> {
        text.split("\n\n")
            .filter(|b| !b.trim().is_empty())
            .map(|block| {
                let lines: Vec<&str> = block.lines().collect();
                assert!(lines.len() >= 3, "{block}");
                let command = lines[0].strip_prefix("$ ").expect("a command line").to_string();
                let warnings = lines[1..lines.len() - 2]
                    .iter()
                    .map(|l| l.strip_prefix("Warning: ").expect("a Warning line").to_string())
                    .collect();
                Transcript {
                    command,
                    warnings,
                    object: lines[lines.len() - 2].to_string(),
                    exit: lines[lines.len() - 1].to_string(),
                }
            })
            .collect()
    }

    /// The lines kubectl prints for it.
    fn render(&self) -> Vec<String> {
        let mut out = vec![format!("$ {}", self.command)];
        out.extend(self.warnings.iter().map(|w| format!("Warning: {w}")));
        out.push(self.object.clone());
        out.push(self.exit.clone());
        out
    }
}

/// Each rendered line is of the same kind as the captured line it stands for.
fn line_kind(line: &str) -> &'static str {
    if line.starts_with("$ kubectl ") {
        "command"
    } else if line.starts_with("Warning: ") && !line["Warning: ".len()..].starts_with(' ') {
        "warning"
    } else if line.starts_with("[exit code: ") {
        "exit"
    } else if line.split_once(' ').is_some_and(|(obj, verb)| {
        obj.contains('/') && matches!(verb, "configured" | "patched" | "created" | "unchanged")
    }) {
        "object"
    } else {
        "other"
    }
}

#[tokio::test]
async fn our_warnings_print_like_the_captured_kubectl_transcript() {
    let captured =
        std::fs::read_to_string(format!("{FIXTURES}/kubectl-output/apply-with-warnings.txt")).unwrap();
    let blocks = Transcript::parse_all(&captured);
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    // The parser and renderer reproduce the capture exactly.
    let reproduced: Vec<String> = blocks.iter().flat_map(|b| b.render()).collect();
    let original: Vec<&str> = captured.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(reproduced, original);

    let admitter = Admitter::new(SharedView::new(view()), Arc::new(Policy::default()), None);
    for (block, fixture, want) in [
        (&blocks[0], "setting-update-plain.json", SETTING_PLAIN),
        (&blocks[1], "setting-update.json", SETTING_JSON),
    ] {
        let admitted =
            admitter.admit(WebhookKind::Validate, &body(fixture), Duration::from_secs(5)).await.unwrap();
        let json = admitted.response_json();
        let response = &json["response"];
        assert_eq!(response["allowed"], true, "{fixture}");
        let req = &admitted.request;
        // The object line names what the request names.
        assert_eq!(block.object.split_once(' ').unwrap().0, format!("setting.longhorn.io/{}", req.name()));
        let ours = Transcript {
            command: block.command.clone(),
            warnings: response["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_str().unwrap().to_string())
                .collect(),
            object: block.object.clone(),
            exit: block.exit.clone(),
        };
        let (ours, theirs) = (ours.render(), block.render());
        assert_eq!(ours[1..ours.len() - 2], [format!("Warning: {want}")], "{fixture}");
        // Line by line the same kinds in the same order: the command, warnings, then the
        // object line and the exit code, exactly as kubectl prints them.
        let kinds = |lines: &[String]| {
            let mut k: Vec<&'static str> = lines.iter().map(|l| line_kind(l)).collect();
            k.dedup();
            k
        };
        assert_eq!(kinds(&ours), ["command", "warning", "object", "exit"], "{ours:?}");
        assert_eq!(kinds(&ours), kinds(&theirs), "{ours:?} vs {theirs:?}");
        assert_eq!(ours.first(), theirs.first());
        assert_eq!(ours[ours.len() - 2..], theirs[theirs.len() - 2..]);
        for line in &ours {
            assert!(!line.contains('\n'), "{line}");
            if line_kind(line) == "warning" {
                assert!(line.chars().count() - "Warning: ".len() <= MAX_WARNING_LEN, "{line}");
            }
        }
    }
}

#[test]
fn out_of_range_volume_count_is_not_checked() {
    for n in [-1, 21] {
        let req = volume_req(|o| {
            o["metadata"]["name"] = json!("odd");
            o["spec"]["numberOfReplicas"] = json!(n);
        });
        for policy in [Policy::default(), deny_policy()] {
            assert_warns(
                &decide(&req, &policy),
                &[format!(
                    "longhorn-guard: volume odd: numberOfReplicas={n} is not a count in 1..20; not checked"
                )
                .as_str()],
            );
        }
    }
}

mod limits {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the names and values, every warning fits the limit, nothing panics, and a
        /// denial is always 422 Invalid with a field cause.
        #[test]
        fn warnings_always_fit(
            name in "[a-z0-9][a-z0-9.-]{0,252}",
            count in -3i64..25,
            value in ".{0,300}",
            engine_counts in proptest::collection::btree_map("v[0-9]", 0i64..25, 0..4),
            deny in any::<bool>(),
        ) {
            let view = view();
            let policy = if deny { deny_policy() } else { Policy::default() };
            let mut reqs = Vec::new();
            let mut vol = request("volume-create.json");
            vol.object.as_mut().unwrap()["metadata"]["name"] = json!(name);
            vol.object.as_mut().unwrap()["spec"]["numberOfReplicas"] = json!(count);
            vol.object.as_mut().unwrap()["spec"]["dataLocality"] = json!("strict-local");
            reqs.push(vol);
            let mut sc = request("storageclass-create-longhorn-1-replica.json");
            sc.object.as_mut().unwrap()["metadata"]["name"] = json!(name);
            sc.object.as_mut().unwrap()["parameters"]["numberOfReplicas"] = json!(value);
            reqs.push(sc);
            for (setting, v) in [
                ("default-replica-count", value.clone()),
                ("default-replica-count", serde_json::to_string(&engine_counts.iter().map(|(k, v)| (k.clone(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>()).unwrap()),
                ("storage-network", value.clone()),
                ("storage-network", format!("{name}/{name}")),
            ] {
                let mut s = request("setting-update.json");
                s.object.as_mut().unwrap()["metadata"]["name"] = json!(setting);
                s.object.as_mut().unwrap()["value"] = json!(v);
                reqs.push(s);
            }
            for req in reqs {
                let d = policy::validate(&req, &view, &policy, SystemTime::now());
                for w in &d.warnings {
                    prop_assert!(w.chars().count() <= MAX_WARNING_LEN, "{} chars: {}", w.chars().count(), w);
                    prop_assert!(w.starts_with("longhorn-guard: "), "{}", w);
                }
                if let Some(st) = d.status.as_ref() {
                    prop_assert!(deny);
                    prop_assert_eq!((st.code, st.reason.as_str()), (422, "Invalid"));
                    prop_assert!(!st.causes.is_empty());
                }
            }
        }
    }
}
