//! Deletions that stop a node's instance managers (docs/drain.md, "Every way to remove the last
//! healthy copy"): an instance-manager pod, an InstanceManager, one of Longhorn's budgets. Each
//! is an AdmissionReview POSTed over real TLS to the server on 127.0.0.1:0, decided on the real
//! Longhorn snapshot of scenario c of every version (tests/data/longhorn-v*/rebuilding.json):
//! vol-c is attached to one node (in v1.12.1's, node-1) and its last healthy replica is on
//! another (node-2) while Longhorn rebuilds the other replica (on node-1); a third node holds
//! nothing (node-3). Each test reads these roles from the snapshot it runs on.
//!
//! No DELETE of a pod, a budget or an InstanceManager was captured from the API server: each
//! review here is the captured `kubectl delete node` review (admission/node-delete.json:
//! operation DELETE, `object` null, `options` a DeleteOptions) with the resource, kind, name
//! and namespace of the object it deletes, and that object, as Longhorn wrote it, from the
//! snapshot as `oldObject`. A dry run sets `dryRun` and `options.dryRun` as the captured dry-run
//! CREATE (admission/volume-create-dry-run.json) does; a force delete sets
//! `options.gracePeriodSeconds: 0`, as `kubectl delete --grace-period=0 --force` sends it.

use crate::support::longhorn::{skip, Snapshot};
use crate::support::{self, assert_review, delete_of, evict_pod, request, shared_json, TestServer};

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use longhorn_guard::admit::Admitter;
use longhorn_guard::cluster::{snapshot, ClusterView, SharedView, Source};
use longhorn_guard::policy::{Policy, DEFAULT_TRUSTED_USERS};
use serde_json::{json, Value};

const ADMIN: &str = "kubernetes-admin";

/// One version's snapshot of scenario c, and its nodes' roles.
struct Case {
    snap: Snapshot,
    /// The node of the last healthy replica, and its instance manager (pod, InstanceManager and
    /// budget alike).
    healthy: String,
    im_healthy: String,
    /// The node vol-c is attached to, and its instance manager.
    attached: String,
    im_attached: String,
    /// The node of the replica Longhorn rebuilds.
    rebuilding: String,
    /// A node holding nothing, and its instance manager.
    idle: Option<(String, String)>,
}

impl Case {
    fn items(&self) -> Vec<Value> {
        self.snap.items.clone()
    }

    /// The idle node and its instance manager; `None`, said on stderr, when every node holds
    /// part of vol-c.
    fn idle(&self) -> Option<(&str, &str)> {
        let idle = self.idle.as_ref().map(|(n, im)| (n.as_str(), im.as_str()));
        if idle.is_none() {
            skip(&format!("Longhorn {}: no idle node in {}", self.snap.version, self.snap.state()));
        }
        idle
    }
}

/// Every version's rebuilding.json (see support::longhorn::snapshots).
fn cases() -> Vec<Case> {
    Snapshot::all("rebuilding.json")
        .into_iter()
        .map(|snap| {
            let r = snap.rebuild("vol-c");
            Case {
                im_healthy: snap.instance_manager(&r.healthy),
                im_attached: snap.instance_manager(&r.attached),
                idle: r.idle.clone().map(|n| (n.clone(), snap.instance_manager(&n))),
                healthy: r.healthy,
                attached: r.attached,
                rebuilding: r.rebuilding,
                snap,
            }
        })
        .collect()
}

/// The object of `kind` (`Pod`, `PodDisruptionBudget`, `InstanceManager`, `Volume`, ...) named `name`.
fn object<'a>(items: &'a mut [Value], kind: &str, name: &str) -> &'a mut Value {
    items
        .iter_mut()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the snapshot"))
}

fn view_of(items: &[Value]) -> ClusterView {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    snapshot::parse(&list.to_string(), Path::new("rebuilding.json"))
        .unwrap()
        .derive(longhorn_guard::policy::drain::derivations(), SystemTime::now())
}

async fn serve_view(view: ClusterView, policy: Policy) -> TestServer {
    TestServer::with_admitter(Admitter::new(SharedView::new(view), Arc::new(policy), None)).await
}

async fn serve(items: &[Value]) -> TestServer {
    serve_view(view_of(items), Policy::default()).await
}

fn pod_delete(items: &mut [Value], name: &str, user: &str) -> Value {
    delete_of("", "v1", "pods", object(items, "Pod", name), user)
}

fn budget_delete(items: &mut [Value], name: &str, user: &str) -> Value {
    delete_of("policy", "v1", "poddisruptionbudgets", object(items, "PodDisruptionBudget", name), user)
}

fn instance_manager_delete(items: &mut [Value], name: &str, user: &str) -> Value {
    delete_of("longhorn.io", "v1beta2", "instancemanagers", object(items, "InstanceManager", name), user)
}

/// POSTs `review` to `/validate` over TLS; checks the answer's shape and returns its `response`.
async fn answer(server: &TestServer, review: &Value) -> Value {
    let body = serde_json::to_vec(review).unwrap();
    let r = request(server.addr, &server.client, "POST", "/validate", body).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_review(&v, review["request"]["uid"].as_str().unwrap(), "delete");
    v["response"].clone()
}

fn assert_allowed_quietly(resp: &Value, what: &str) {
    assert_eq!(resp["allowed"], true, "{what}: {resp}");
    assert!(resp.get("status").is_none() && resp.get("warnings").is_none(), "{what}: {resp}");
}

fn message(resp: &Value) -> &str {
    resp["status"]["message"].as_str().unwrap_or_else(|| panic!("no denial message: {resp}"))
}

fn assert_denied_429(resp: &Value, what: &str) {
    assert_eq!(resp["allowed"], false, "{what}: {resp}");
    assert_eq!(
        (&resp["status"]["code"], &resp["status"]["reason"]),
        (&json!(429), &json!("TooManyRequests")),
        "{what}"
    );
}

fn warnings(resp: &Value) -> Vec<String> {
    resp["warnings"].as_array().into_iter().flatten().map(|w| w.as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn an_instance_manager_pod_delete_gets_the_answer_of_its_eviction() {
    for c in cases() {
        let (h, w, im_h) = (c.healthy.as_str(), c.rebuilding.as_str(), c.im_healthy.as_str());
        let mut items = c.items();
        let server = serve(&items).await;
        let evicted = evict_pod(&server, im_h).await;
        assert_denied_429(&evicted, "eviction");
        let plain = pod_delete(&mut items, im_h, ADMIN);
        let mut dry = plain.clone();
        dry["request"]["uid"] = json!("dry-run");
        dry["request"]["dryRun"] = json!(true);
        dry["request"]["options"]["dryRun"] = json!(["All"]);
        let mut force = plain.clone();
        force["request"]["uid"] = json!("force");
        force["request"]["options"]["gracePeriodSeconds"] = json!(0);
        // A DELETE of a collection (`kubectl delete pods -l ...` through the API) names no object:
        // the pod is in oldObject only.
        let mut collection = plain.clone();
        collection["request"]["uid"] = json!("collection");
        collection["request"]["name"] = json!("");
        for (what, review) in
            [("delete", &plain), ("dry run", &dry), ("grace period 0", &force), ("collection", &collection)]
        {
            let resp = answer(&server, review).await;
            assert_denied_429(&resp, what);
            assert_eq!(resp["status"], evicted["status"], "{what}: the eviction's message, code and reason");
        }
        assert!(
            message(&evicted).starts_with(&format!("longhorn-guard: draining {h} would strand 1 volume:\n- vol-c: last healthy replica is on {h}; its replica on {w} is rebuilding")),
            "{}",
            message(&evicted)
        );
        // A node holding nothing: its instance manager goes, as its eviction would.
        let allowed = match c.idle() {
            Some((idle, im_i)) => {
                assert_allowed_quietly(&answer(&server, &pod_delete(&mut items, im_i, ADMIN)).await, idle);
                1
            }
            None => 0,
        };
        // Counted as what they are.
        let metrics = request(server.addr, &server.client, "GET", "/metrics", vec![]).await.unwrap().text();
        for series in [
            "{webhook=\"validate\",resource=\"pods\",operation=\"DELETE\",decision=\"deny\"} 4".to_string(),
            format!("{{webhook=\"validate\",resource=\"pods\",operation=\"DELETE\",decision=\"allow\"}} {allowed}"),
            "{webhook=\"validate\",resource=\"pods/eviction\",operation=\"CREATE\",decision=\"deny\"} 1".to_string(),
        ] {
            assert!(
                metrics.contains(&format!("longhorn_guard_admission_requests_total{series}")),
                "{series}: {metrics}"
            );
        }
    }
}

#[tokio::test]
async fn pods_that_are_not_instance_managers_are_allowed_at_once() {
    for c in cases() {
        let (h, im_h) = (c.healthy.as_str(), c.im_healthy.as_str());
        let mut items = c.items();
        let server = serve(&items).await;
        // On the node whose instance manager may not go: Longhorn's manager and engine-image pods.
        for pod in [c.snap.pod_on(h, "longhorn-manager-"), c.snap.pod_on(h, "engine-image-")] {
            assert_allowed_quietly(&answer(&server, &pod_delete(&mut items, &pod, ADMIN)).await, &pod);
        }
        // A pod of another namespace (the captured pod of admission/pod-create-default.json).
        let pod = shared_json("admission/pod-create-default.json")["request"]["object"].clone();
        assert_allowed_quietly(
            &answer(&server, &delete_of("", "v1", "pods", &pod, ADMIN)).await,
            "default pod",
        );
        // An instance-manager label outside longhorn-system is not Longhorn's.
        let mut im = object(&mut items, "Pod", im_h).clone();
        im["metadata"]["namespace"] = json!("default");
        assert_allowed_quietly(
            &answer(&server, &delete_of("", "v1", "pods", &im, ADMIN)).await,
            "default namespace",
        );
    }
}

#[tokio::test]
async fn trusted_users_delete_at_once_and_no_one_else_does() {
    for c in cases() {
        let im_h = c.im_healthy.as_str();
        let mut items = c.items();
        let server = serve(&items).await;
        for user in DEFAULT_TRUSTED_USERS {
            for review in [
                pod_delete(&mut items, im_h, user),
                instance_manager_delete(&mut items, im_h, user),
                budget_delete(&mut items, im_h, user),
            ] {
                let what = format!("{user} {}", review["request"]["resource"]["resource"]);
                assert_allowed_quietly(&answer(&server, &review).await, &what);
            }
        }
        // Not trusted: another account of Longhorn's namespace, a trusted name in another namespace,
        // and an admin whose groups hold the trusted accounts' groups (groups never count).
        for user in [
            "system:serviceaccount:longhorn-system:longhorn-ui-service-account",
            "system:serviceaccount:ops:generic-garbage-collector",
            "system:kube-controller-manager",
            ADMIN,
        ] {
            let mut review = pod_delete(&mut items, im_h, user);
            review["request"]["userInfo"]["groups"] =
                json!(["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:masters"]);
            assert_denied_429(&answer(&server, &review).await, user);
        }
        // The list is the policy's: emptied, Longhorn's own account is refused too.
        let policy = Policy::parse("drain:\n  trustedUsers: []\n").unwrap();
        let strict = serve_view(view_of(&items), policy).await;
        let resp = answer(&strict, &pod_delete(&mut items, im_h, DEFAULT_TRUSTED_USERS[0])).await;
        assert_denied_429(&resp, "Longhorn's account, trusting nobody");
    }
}

#[tokio::test]
async fn an_instance_manager_delete_is_decided_for_its_node() {
    for c in cases() {
        let (h, im_h) = (c.healthy.as_str(), c.im_healthy.as_str());
        let mut items = c.items();
        let server = serve(&items).await;
        let resp = answer(&server, &instance_manager_delete(&mut items, im_h, ADMIN)).await;
        assert_denied_429(&resp, "the healthy node's instance manager");
        assert!(
            message(&resp).starts_with(&format!(
                "longhorn-guard: deleting {h}'s instance manager would strand 1 volume:\n- vol-c: last healthy replica is on {h}"
            )),
            "{}",
            message(&resp)
        );
        if let Some((idle, im_i)) = c.idle() {
            assert_allowed_quietly(
                &answer(&server, &instance_manager_delete(&mut items, im_i, ADMIN)).await,
                idle,
            );
        }
    }
}

/// The doctor's finding on `budget` for a drain of `node` of `items`: (id, reason, remedy).
fn doctor(items: &[Value], node: &str, budget: &str) -> (String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    std::fs::write(&path, json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()).unwrap();
    let (_, out, err) = support::check_drain(&[node, "--state", path.to_str().unwrap(), "--output", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == budget)
        .unwrap_or_else(|| panic!("{v}"));
    let text = |k: &str| f[k].as_str().unwrap().to_string();
    (text("id"), text("reason"), text("remedy"))
}

#[tokio::test]
async fn a_needed_budget_is_refused_in_the_doctors_words() {
    for c in cases() {
        let (h, e, im_h, im_e) =
            (c.healthy.as_str(), c.attached.as_str(), c.im_healthy.as_str(), c.im_attached.as_str());
        let mut items = c.items();
        let server = serve(&items).await;
        let resp = answer(&server, &budget_delete(&mut items, im_h, ADMIN)).await;
        assert_denied_429(&resp, "the healthy node's budget");
        let (id, reason, remedy) = doctor(&items, h, im_h);
        assert_eq!(id, "longhorn-pdb-needed");
        let reason = reason.strip_suffix(" (verdicts above)").unwrap();
        let head =
            format!("longhorn-guard: {id} poddisruptionbudget longhorn-system/{im_h}: {reason}; {remedy}");
        let msg = message(&resp);
        assert!(msg.starts_with(&format!("{head}\n- vol-c: last healthy replica is on {h}")), "{msg}");
        assert_eq!(msg.lines().count(), 2, "{msg}");
        assert!(remedy.starts_with("do not delete it"), "{remedy}");
        // The budget of the node vol-c is attached to.
        let resp = answer(&server, &budget_delete(&mut items, im_e, ADMIN)).await;
        assert_denied_429(&resp, "the attached node's budget");
        let attached = format!("\n- vol-c: attached to {e} (engine running)");
        assert!(message(&resp).contains(&attached), "{}", message(&resp));
    }
}

#[tokio::test]
async fn a_budget_no_volume_needs_goes_with_its_verdict_named() {
    for c in cases() {
        let Some((idle, im_i)) = c.idle() else { continue };
        let mut items = c.items();
        // On a schedulable node: Longhorn keeps it until the cordon.
        let server = serve(&items).await;
        let resp = answer(&server, &budget_delete(&mut items, im_i, ADMIN)).await;
        assert_eq!(resp["allowed"], true, "{resp}");
        let (id, _, remedy) = doctor(&items, idle, im_i);
        assert_eq!(id, "longhorn-pdb-until-cordon");
        // The verdict and the doctor's remedy, word for word; the doctor says why.
        let said = |id: &str, remedy: &str| {
            format!(
                "longhorn-guard: {id} poddisruptionbudget longhorn-system/{im_i} (longhorn-guard check drain \
                 {idle} says why); {remedy}"
            )
        };
        assert_eq!(warnings(&resp).join(" "), said(&id, &remedy));
        assert!(warnings(&resp).iter().all(|w| w.chars().count() <= 120), "{resp}");

        // Stale: the node cordoned, the budget still there; and its instance manager gone.
        object(&mut items, "Node", idle)["spec"]["unschedulable"] = json!(true);
        let server = serve(&items).await;
        let resp = answer(&server, &budget_delete(&mut items, im_i, ADMIN)).await;
        let (id, _, remedy) = doctor(&items, idle, im_i);
        assert_eq!(id, "longhorn-pdb-stale");
        assert_eq!(resp["allowed"], true, "{resp}");
        assert_eq!(warnings(&resp).join(" "), said(&id, &remedy));
        assert!(
            remedy.starts_with(&format!("kubectl -n longhorn-system delete pdb {im_i} is safe")),
            "{remedy}"
        );

        let budget = object(&mut items, "PodDisruptionBudget", im_i).clone();
        items.retain(|o| !(o["kind"] == "InstanceManager" && o["metadata"]["name"] == im_i));
        let server = serve(&items).await;
        let resp = answer(&server, &delete_of("policy", "v1", "poddisruptionbudgets", &budget, ADMIN)).await;
        assert_eq!(resp["allowed"], true, "{resp}");
        let (id, _, remedy) = doctor(&items, idle, im_i);
        assert_eq!(warnings(&resp).join(" "), said(&id, &remedy));
        assert!(remedy.ends_with("is safe: nothing it protected exists"), "{remedy}");

        // Budgets that are not an instance manager's are not looked at.
        let mut other = budget;
        other["spec"]["selector"]["matchLabels"] = json!({"app": "longhorn-ui"});
        assert_allowed_quietly(
            &answer(&server, &delete_of("policy", "v1", "poddisruptionbudgets", &other, ADMIN)).await,
            "ui budget",
        );
    }
}

#[tokio::test]
async fn the_override_lets_the_pod_the_instance_manager_and_the_budget_go() {
    for c in cases() {
        let (h, im_h) = (c.healthy.as_str(), c.im_healthy.as_str());
        let mut items = c.items();
        object(&mut items, "Volume", "vol-c")["metadata"]["annotations"] =
            json!({"longhorn-guard.io/allow-drain": "restored from backup, INC-1"});
        let server = serve(&items).await;
        let evicted = evict_pod(&server, im_h).await;
        let deleted = answer(&server, &pod_delete(&mut items, im_h, ADMIN)).await;
        assert_eq!(deleted["allowed"], true, "{deleted}");
        assert_eq!(deleted["warnings"], evicted["warnings"], "the eviction's warnings");
        assert!(
            warnings(&deleted)[0].starts_with(&format!(
                "longhorn-guard: draining {h} would strand 1 volume; allowed by override (volume vol-c"
            )),
            "{deleted}"
        );
        let resp = answer(&server, &instance_manager_delete(&mut items, im_h, ADMIN)).await;
        assert_eq!(resp["allowed"], true, "{resp}");
        assert!(
            warnings(&resp)[0].starts_with(&format!(
                "longhorn-guard: deleting {h}'s instance manager would strand 1 volume; allowed by override"
            )),
            "{resp}"
        );
        let resp = answer(&server, &budget_delete(&mut items, im_h, ADMIN)).await;
        assert_eq!(resp["allowed"], true, "{resp}");
        assert!(
            warnings(&resp)[0].starts_with("longhorn-guard: longhorn-pdb-until-cordon poddisruptionbudget"),
            "{resp}"
        );
    }
}

#[tokio::test]
async fn unreadable_deletes_are_bad_requests_with_one_line_reasons() {
    for c in cases() {
        let im_h = c.im_healthy.as_str();
        let mut items = c.items();
        let server = serve(&items).await;
        let pod = pod_delete(&mut items, im_h, ADMIN);
        let budget = budget_delete(&mut items, im_h, ADMIN);
        let im = instance_manager_delete(&mut items, im_h, ADMIN);
        let cases = [
            (&pod, "/request/oldObject", Value::Null, "longhorn-guard: request.oldObject is missing"),
            (&pod, "/request/oldObject", json!("instance-manager"), "longhorn-guard: request.oldObject is malformed: expected a JSON object, found a string"),
            (&pod, "/request/oldObject/spec/nodeName", json!(7), "longhorn-guard: request.oldObject.spec.nodeName is malformed: invalid type: integer `7`, expected a string"),
            (&budget, "/request/oldObject/metadata/labels", json!(["x"]), "longhorn-guard: request.oldObject.metadata.labels is malformed"),
            (&im, "/request/oldObject/spec/nodeID", json!({"n": 1}), "longhorn-guard: request.oldObject.spec.nodeID is malformed"),
        ];
        for (i, (review, at, value, want)) in cases.into_iter().enumerate() {
            let mut review = review.clone();
            let (parent, key) = at.rsplit_once('/').unwrap();
            review.pointer_mut(parent).unwrap()[key] = value;
            review["request"]["uid"] = json!(format!("bad-{i}"));
            let resp = answer(&server, &review).await;
            assert_eq!(resp["allowed"], false, "{at}: {resp}");
            assert_eq!(
                (&resp["status"]["code"], &resp["status"]["reason"]),
                (&json!(400), &json!("BadRequest")),
                "{at}"
            );
            assert!(message(&resp).starts_with(want), "{at}: {}", message(&resp));
            assert!(!message(&resp).contains('\n'), "{at}");
        }
        // No name at all, in the request or the object.
        let mut review = pod;
        review["request"]["name"] = json!("");
        review["request"]["oldObject"]["metadata"].as_object_mut().unwrap().remove("name");
        let resp = answer(&server, &review).await;
        assert_eq!(message(&resp), "longhorn-guard: request.name is missing");
    }
}

#[tokio::test]
async fn an_allow_on_old_data_that_cannot_be_confirmed_says_which_delete() {
    for c in cases() {
        let im_h = c.im_healthy.as_str();
        let Some((idle, im_i)) = c.idle() else { continue };
        let mut items = c.items();
        object(&mut items, "Node", idle)["spec"]["unschedulable"] = json!(true);
        // A watch view last updated an hour ago, and no API client to confirm with.
        let old = SystemTime::now() - Duration::from_secs(3600);
        let objects = crate::support::states::objects(&items);
        let view = ClusterView::from_objects(Source::Watch, objects, old)
            .derive(longhorn_guard::policy::drain::derivations(), old);
        let server = serve_view(view, Policy::default()).await;
        for (review, what) in [
            (pod_delete(&mut items, im_i, ADMIN), format!("draining {idle}")),
            (instance_manager_delete(&mut items, im_i, ADMIN), format!("deleting {idle}'s instance manager")),
            (budget_delete(&mut items, im_i, ADMIN), format!("deleting {idle}'s instance-manager budget")),
        ] {
            let resp = answer(&server, &review).await;
            assert_denied_429(&resp, &what);
            assert_eq!(
                message(&resp),
                format!("longhorn-guard: could not confirm that {what} is safe (no API client is configured to confirm it); retry later")
            );
        }
        // A budget whose instance manager the old view lacks and whose selector names no node waits.
        let mut budget = object(&mut items, "PodDisruptionBudget", im_i).clone();
        budget["metadata"]["name"] = json!("instance-manager-0000");
        budget["spec"]["selector"]["matchLabels"].as_object_mut().unwrap().remove("longhorn.io/node");
        let resp = answer(&server, &delete_of("policy", "v1", "poddisruptionbudgets", &budget, ADMIN)).await;
        assert_denied_429(&resp, "no node");
        assert!(message(&resp).ends_with("its deletion waits; retry in a few seconds"), "{}", message(&resp));
        // A denial on old data stands: it needs no confirming.
        let resp = answer(&server, &budget_delete(&mut items, im_h, ADMIN)).await;
        assert!(
            message(&resp).starts_with("longhorn-guard: longhorn-pdb-needed poddisruptionbudget"),
            "{resp}"
        );
    }
}

#[tokio::test]
async fn the_drain_policy_modes_and_code_apply_to_deletes_as_to_evictions() {
    for c in cases() {
        let (h, im_h) = (c.healthy.as_str(), c.im_healthy.as_str());
        let mut items = c.items();
        let view = || view_of(&c.items());
        let budget = budget_delete(&mut items, im_h, ADMIN);
        let pod = pod_delete(&mut items, im_h, ADMIN);
        let im = instance_manager_delete(&mut items, im_h, ADMIN);

        let warn = serve_view(view(), Policy::parse("drain:\n  action: warn\n").unwrap()).await;
        let evicted = evict_pod(&warn, im_h).await;
        let deleted = answer(&warn, &pod).await;
        assert_eq!(
            (&deleted["allowed"], &deleted["warnings"]),
            (&json!(true), &evicted["warnings"]),
            "{deleted}"
        );
        let resp = answer(&warn, &budget).await;
        assert_eq!(resp["allowed"], true, "{resp}");
        let w = warnings(&resp);
        assert!(w[0].starts_with("longhorn-guard: longhorn-pdb-needed poddisruptionbudget"), "{w:?}");
        let last = format!("vol-c: last healthy replica is on {h}");
        assert!(w.iter().any(|l| l.starts_with(&last)), "{w:?}");

        let off = serve_view(view(), Policy::parse("drain:\n  action: off\n").unwrap()).await;
        for review in [&pod, &budget, &im] {
            assert_allowed_quietly(&answer(&off, review).await, "drain.action off");
        }

        let fast = serve_view(view(), Policy::parse("drain:\n  denyCode: 403\n").unwrap()).await;
        for review in [&pod, &budget, &im] {
            let resp = answer(&fast, review).await;
            assert_eq!(
                (&resp["status"]["code"], &resp["status"]["reason"]),
                (&json!(403), &json!("Forbidden")),
                "{resp}"
            );
        }
    }
}

#[tokio::test]
async fn what_runs_nowhere_goes() {
    for c in cases() {
        let im_h = c.im_healthy.as_str();
        let mut items = c.items();
        let server = serve(&items).await;
        // A pod the scheduler never placed (no spec.nodeName, no longhorn.io/node label).
        let mut pod = object(&mut items, "Pod", im_h).clone();
        pod["spec"].as_object_mut().unwrap().remove("nodeName");
        pod["metadata"]["labels"].as_object_mut().unwrap().remove("longhorn.io/node");
        let resp = answer(&server, &delete_of("", "v1", "pods", &pod, ADMIN)).await;
        assert_eq!(resp["allowed"], true, "{resp}");
        assert_eq!(
            warnings(&resp),
            [format!("longhorn-guard: instance-manager pod {im_h} has no node; nothing runs in it")]
        );
        // An InstanceManager with no node.
        let mut im = object(&mut items, "InstanceManager", im_h).clone();
        im["spec"]["nodeID"] = json!("");
        let resp =
            answer(&server, &delete_of("longhorn.io", "v1beta2", "instancemanagers", &im, ADMIN)).await;
        assert_eq!(resp["allowed"], true, "{resp}");
        assert!(warnings(&resp)[0].ends_with("has no node; nothing runs in it"), "{resp}");
    }
}

/// Seen on real Longhorn (e2e scenario f): once a graceful deletion has begun (Longhorn's own,
/// an eviction, a delete this rule allowed), the kubelet removes the object with a DELETE of
/// its own, as `system:node:NAME`, after the containers stopped. Refusing it kept every
/// instance-manager pod `Completed` and never made again. The webhook's matchConditions leave
/// such a DELETE out (it/manifests); the server allows it too.
#[tokio::test]
async fn the_final_delete_of_a_terminating_instance_manager_pod_goes() {
    for c in cases() {
        let (h, im_h) = (c.healthy.as_str(), c.im_healthy.as_str());
        let mut items = c.items();
        let server = serve(&items).await;
        let node_user = format!("system:node:{h}");
        let live = pod_delete(&mut items, im_h, &node_user);
        assert_denied_429(&answer(&server, &live).await, "the node's delete of a running pod");
        object(&mut items, "Pod", im_h)["metadata"]["deletionTimestamp"] = json!("2026-12-07T10:04:40Z");
        object(&mut items, "Pod", im_h)["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        for user in [node_user.as_str(), ADMIN] {
            let mut review = pod_delete(&mut items, im_h, user);
            review["request"]["options"]["gracePeriodSeconds"] = json!(0);
            assert_allowed_quietly(&answer(&server, &review).await, user);
        }
    }
}
