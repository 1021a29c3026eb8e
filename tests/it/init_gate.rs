//! The init-gate mutation on real AdmissionReview bodies: the patch applied with json-patch
//! adds the gate and changes nothing else; it is idempotent and goes over the wire as base64.

use crate::support;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use clap::Parser as _;
use longhorn_guard::admission::{parse_review, AdmissionRequest};
use longhorn_guard::admit::{Admitter, WebhookKind};
use longhorn_guard::cli::{Cli, Command};
use longhorn_guard::cluster::{ClusterView, SharedView, Source};
use longhorn_guard::decision::{clip, Decision, MAX_WARNING_LEN};
use longhorn_guard::mutate::init_gate::{GATE_CONTAINER, PODINFO_VOLUME};
use longhorn_guard::mutate::mutate;
use longhorn_guard::policy::Policy;
use serde_json::{json, Value};

const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";

fn request(name: &str) -> AdmissionRequest {
    parse_review(&support::fixture(name)).unwrap()
}

fn decide(req: &AdmissionRequest, policy: &Policy) -> Decision {
    mutate(req, &ClusterView::new(Source::Direct), policy)
}

fn apply(pod: &Value, d: &Decision) -> Value {
    let mut out = pod.clone();
    json_patch::patch(&mut out, d.patch.as_ref().expect("a patch")).unwrap();
    out
}

/// Removes what the gate added; the rest must equal the input.
fn strip_gate(patched: &Value, original: &Value) -> Value {
    let mut v = patched.clone();
    let spec = v["spec"].as_object_mut().unwrap();
    for (field, name) in [("initContainers", GATE_CONTAINER), ("volumes", PODINFO_VOLUME)] {
        let list = spec.get_mut(field).and_then(Value::as_array_mut).unwrap();
        let before = list.len();
        list.retain(|item| item["name"] != name);
        assert_eq!(list.len(), before - 1, "exactly one {name} in {field}");
        if original["spec"].get(field).is_none() {
            assert!(list.is_empty());
            spec.remove(field);
        }
    }
    v
}

fn gate_of(pod: &Value) -> &Value {
    pod["spec"]["initContainers"].as_array().unwrap().iter().find(|c| c["name"] == GATE_CONTAINER).unwrap()
}

fn ops(d: &Decision) -> Vec<(String, String)> {
    let v = serde_json::to_value(d.patch.as_ref().unwrap()).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|o| (o["op"].as_str().unwrap().into(), o["path"].as_str().unwrap().into()))
        .collect()
}

/// The gate's own CLI accepts the injected command line and reads back the networks.
fn gate_cli_networks(gate: &Value) -> Vec<String> {
    let mut argv = vec!["longhorn-guard".to_string()];
    argv.extend(gate["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()));
    argv.extend(["--pod-namespace".into(), "longhorn-system".into(), "--pod-name".into(), "im".into()]);
    let Command::Gate(args) = Cli::try_parse_from(argv).unwrap().command else {
        panic!("not the gate command")
    };
    args.options().unwrap().networks.iter().map(ToString::to_string).collect()
}

#[test]
fn storage_network_pod_gets_the_gate_and_nothing_else_changes() {
    let req = request("pod-create-instance-manager-storage-network-mutating.json");
    let original = req.object.as_deref().cloned().unwrap();
    let d = decide(&req, &Policy::default());
    assert!(d.allowed);
    assert_eq!(d.rule, "init-gate");
    assert!(d.warnings.is_empty());
    // The fixture has volumes (the service-account token) but no init containers.
    assert_eq!(
        ops(&d),
        vec![
            ("add".to_string(), "/spec/initContainers".to_string()),
            ("add".to_string(), "/spec/volumes/-".to_string())
        ]
    );
    let patched = apply(&original, &d);
    assert_eq!(strip_gate(&patched, &original), original);
    assert_eq!(patched["spec"]["containers"], original["spec"]["containers"]);
    assert_eq!(patched["metadata"], original["metadata"]);

    let gate = gate_of(&patched);
    assert_eq!(gate["image"], longhorn_guard::policy::DEFAULT_GATE_IMAGE);
    assert_eq!(gate["command"], json!(["/usr/local/bin/longhorn-guard"]));
    assert_eq!(
        gate["args"],
        json!([
            "gate",
            "--networks",
            "kube-system/storage-net@lhnet1",
            "--timeout",
            "1m",
            "--annotations-file",
            "/etc/longhorn-guard/podinfo/annotations"
        ])
    );
    assert_eq!(gate_cli_networks(gate), vec!["kube-system/storage-net@lhnet1"]);
    assert_eq!(
        gate["env"][0],
        json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}})
    );
    assert_eq!(gate["env"][1]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.namespace");
    let sc = &gate["securityContext"];
    assert_eq!(
        (
            &sc["runAsNonRoot"],
            &sc["runAsUser"],
            &sc["readOnlyRootFilesystem"],
            &sc["allowPrivilegeEscalation"]
        ),
        (&json!(true), &json!(65532), &json!(true), &json!(false))
    );
    assert_eq!(sc["capabilities"], json!({"drop": ["ALL"]}));
    assert_eq!(sc["seccompProfile"], json!({"type": "RuntimeDefault"}));
    assert_eq!(gate["resources"]["limits"], json!({"cpu": "100m", "memory": "64Mi"}));
    // Requests equal to limits: a Guaranteed instance manager (exclusive cores) stays Guaranteed.
    assert_eq!(gate["resources"]["requests"], gate["resources"]["limits"]);
    assert_eq!(gate["terminationMessagePolicy"], "FallbackToLogsOnError");
    // The downward-API volume and the service-account token the instance manager already mounts.
    assert_eq!(
        gate["volumeMounts"],
        json!([
            {"name": PODINFO_VOLUME, "mountPath": "/etc/longhorn-guard/podinfo", "readOnly": true},
            {"name": "kube-api-access-4kd45", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}
        ])
    );
    let vols = patched["spec"]["volumes"].as_array().unwrap();
    assert_eq!(
        vols.last().unwrap(),
        &json!({"name": PODINFO_VOLUME, "downwardAPI": {"items": [
            {"path": "annotations", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations"}}
        ]}})
    );
}

#[test]
fn pod_with_init_containers_and_volumes_gets_the_gate_appended() {
    let req = request("pod-create-instance-manager-with-initcontainers-mutating.json");
    let original = req.object.as_deref().cloned().unwrap();
    let d = decide(&req, &Policy::default());
    assert_eq!(
        ops(&d),
        vec![
            ("add".to_string(), "/spec/initContainers/-".to_string()),
            ("add".to_string(), "/spec/volumes/-".to_string())
        ]
    );
    let patched = apply(&original, &d);
    assert_eq!(strip_gate(&patched, &original), original);
    let init = patched["spec"]["initContainers"].as_array().unwrap();
    assert_eq!(init.len(), 2);
    assert_eq!(init[0], original["spec"]["initContainers"][0]);
    assert_eq!(init[1]["name"], GATE_CONTAINER);
    assert_eq!(init[1]["volumeMounts"][1]["name"], "kube-api-access-4ds5z");
}

#[test]
fn pod_without_volumes_or_token_gets_new_lists() {
    let mut req = request("pod-create-instance-manager-storage-network-mutating.json");
    let obj = req.object.as_mut().unwrap();
    obj["spec"].as_object_mut().unwrap().remove("volumes");
    obj["spec"]["containers"][0].as_object_mut().unwrap().remove("volumeMounts");
    let original = Value::clone(obj);
    let d = decide(&req, &Policy::default());
    assert_eq!(
        ops(&d),
        vec![
            ("add".to_string(), "/spec/initContainers".to_string()),
            ("add".to_string(), "/spec/volumes".to_string())
        ]
    );
    let patched = apply(&original, &d);
    assert_eq!(strip_gate(&patched, &original), original);
    assert_eq!(gate_of(&patched)["volumeMounts"].as_array().unwrap().len(), 1);
}

#[test]
fn mutating_the_output_again_yields_no_patch() {
    for name in [
        "pod-create-instance-manager-storage-network-mutating.json",
        "pod-create-instance-manager-with-initcontainers-mutating.json",
    ] {
        let mut req = request(name);
        let d = decide(&req, &Policy::default());
        let patched = apply(req.object.as_ref().unwrap(), &d);
        req.object = Some(patched.into());
        let again = decide(&req, &Policy::default());
        assert!(again.allowed && again.patch.is_none() && again.warnings.is_empty(), "{name}: {again:?}");
    }
}

#[test]
fn both_annotation_forms() {
    let cases = [
        ("kube-system/storage-net@lhnet1", "kube-system/storage-net@lhnet1"),
        ("storage-net@lhnet1", "longhorn-system/storage-net@lhnet1"),
        ("kube-system/storage-net", "kube-system/storage-net"),
        (
            r#"[{"namespace": "kube-system", "name": "storage-net", "interface": "lhnet1"},{"name": "rwx-net", "interface": "lhnet2"}]"#,
            "kube-system/storage-net@lhnet1,longhorn-system/rwx-net@lhnet2",
        ),
    ];
    for (annotation, want) in cases {
        let mut req = request("pod-create-instance-manager-storage-network-mutating.json");
        req.object.as_mut().unwrap()["metadata"]["annotations"][NETWORKS] = json!(annotation);
        let original = req.object.as_deref().cloned().unwrap();
        let d = decide(&req, &Policy::default());
        let patched = apply(&original, &d);
        assert_eq!(strip_gate(&patched, &original), original, "{annotation}");
        let gate = gate_of(&patched);
        assert_eq!(gate["args"][2], want, "{annotation}");
        assert_eq!(gate_cli_networks(gate).join(","), want);
    }
}

#[test]
fn policy_image_and_timeout_are_used() {
    let policy = Policy::parse("gate:\n  image: registry.local/lg:9\n  timeout: 90s\n").unwrap();
    let req = request("pod-create-instance-manager-storage-network-mutating.json");
    let patched = apply(req.object.as_ref().unwrap(), &decide(&req, &policy));
    let gate = gate_of(&patched);
    assert_eq!(gate["image"], "registry.local/lg:9");
    assert_eq!(gate["args"][4], "1m30s");
}

#[test]
fn no_patch_for_other_pods_or_when_disabled() {
    let default = Policy::default();
    for name in ["pod-create-default.json", "pod-create-instance-manager-mutating.json"] {
        let d = decide(&request(name), &default);
        assert_eq!(
            (d.allowed, d.patch.is_none(), d.warnings.len(), d.rule),
            (true, true, 0, "none"),
            "{name}"
        );
    }
    let base = request("pod-create-instance-manager-storage-network-mutating.json");

    let disabled = Policy::parse("gate:\n  enabled: false\n").unwrap();
    assert!(decide(&base, &disabled).patch.is_none());

    let mut other_ns = base.clone();
    other_ns.namespace = Some("default".into());
    other_ns.object.as_mut().unwrap()["metadata"]["namespace"] = json!("default");
    assert!(decide(&other_ns, &default).patch.is_none());

    let mut not_im = base.clone();
    not_im.object.as_mut().unwrap()["metadata"]["labels"]["longhorn.io/component"] =
        json!("backing-image-manager");
    assert!(decide(&not_im, &default).patch.is_none());

    let mut empty = base.clone();
    empty.object.as_mut().unwrap()["metadata"]["annotations"][NETWORKS] = json!("");
    assert!(decide(&empty, &default).patch.is_none());
}

#[test]
fn malformed_annotation_is_allowed_with_a_warning_and_no_patch() {
    for bad in [r#"[{"namespace": "kube-system", "name": "#, "a/b/c", "kube-system/net@../../x"] {
        let mut req = request("pod-create-instance-manager-storage-network-mutating.json");
        req.object.as_mut().unwrap()["metadata"]["annotations"][NETWORKS] = json!(bad);
        let d = decide(&req, &Policy::default());
        assert!(d.allowed && d.patch.is_none(), "{bad}");
        assert_eq!(d.warnings.len(), 1, "{bad}");
        let w = &d.warnings[0];
        assert!(
            w.starts_with("longhorn-guard: no init gate added: k8s.v1.cni.cncf.io/networks is unreadable: "),
            "{w}"
        );
        assert!(w.chars().count() <= 120, "{w}");
    }
}

#[test]
fn a_pod_field_of_the_wrong_type_is_named_by_its_path_and_never_blocks_the_pod() {
    let mut req = request("pod-create-instance-manager-storage-network-mutating.json");
    req.object.as_mut().unwrap()["spec"]["initContainers"] = json!({"not": "a list"});
    let d = decide(&req, &Policy::default());
    assert!(d.allowed && d.patch.is_none());
    let why = "request.object.spec.initContainers is malformed: invalid type: map, expected a sequence";
    // The warning is cut at 120 characters; the WARN log line has the whole reason.
    assert_eq!(d.details.unreadable.as_deref(), Some(why));
    assert_eq!(d.warnings, [clip(&format!("longhorn-guard: no init gate added: {why}"), MAX_WARNING_LEN)]);
}

#[test]
fn interface_names_that_the_gate_cannot_take_back_get_no_patch() {
    // `,` and `@` separate networks and interfaces in the gate's --networks.
    for iface in ["a@b", "a,b"] {
        let mut req = request("pod-create-instance-manager-storage-network-mutating.json");
        req.object.as_mut().unwrap()["metadata"]["annotations"][NETWORKS] =
            json!(format!(r#"[{{"namespace":"kube-system","name":"storage-net","interface":"{iface}"}}]"#));
        let d = decide(&req, &Policy::default());
        assert!(d.allowed && d.patch.is_none(), "{iface}");
        assert!(d.warnings[0].contains("is unreadable"), "{iface}: {:?}", d.warnings);
    }
}

#[test]
fn a_foreign_volume_under_the_gates_volume_name_gets_no_patch() {
    let mut req = request("pod-create-instance-manager-storage-network-mutating.json");
    let spec = &mut req.object.as_mut().unwrap()["spec"];
    spec["volumes"] = json!([{"name": "longhorn-guard-podinfo", "emptyDir": {}}]);
    let d = decide(&req, &Policy::default());
    assert!(d.allowed && d.patch.is_none());
    assert!(d.warnings[0].contains("already has a volume longhorn-guard-podinfo"), "{:?}", d.warnings);
}

#[test]
fn a_container_already_named_like_the_gate_gets_no_patch() {
    // Names are unique across the pod's container lists: a second one would make the pod invalid.
    for field in ["containers", "ephemeralContainers"] {
        let mut req = request("pod-create-instance-manager-storage-network-mutating.json");
        let spec = &mut req.object.as_mut().unwrap()["spec"];
        let list = spec[field].as_array().cloned().unwrap_or_default();
        let mut list = list;
        list.push(json!({"name": GATE_CONTAINER, "image": "busybox"}));
        spec[field] = Value::Array(list);
        let d = decide(&req, &Policy::default());
        assert!(d.allowed && d.patch.is_none(), "{field}: {d:?}");
        assert_eq!(
            d.warnings,
            [format!("longhorn-guard: no init gate added: spec.{field} already has a container named {GATE_CONTAINER}")]
        );
    }
}

#[test]
fn a_pod_create_without_an_object_is_never_blocked() {
    let mut req = request("pod-create-instance-manager-storage-network-mutating.json");
    req.object = None;
    let d = decide(&req, &Policy::default());
    assert!(d.allowed && d.patch.is_none());
    assert_eq!(d.warnings, ["longhorn-guard: no init gate added: the request has no pod object"]);
    assert_eq!(d.details.unreadable.as_deref(), Some("request.object is missing"));
}

#[tokio::test]
async fn the_patch_goes_over_the_wire_as_base64() {
    let body = support::fixture("pod-create-instance-manager-storage-network-mutating.json");
    let req = parse_review(&body).unwrap();
    let policy = Policy::default();
    let want = serde_json::to_value(decide(&req, &policy).patch.unwrap()).unwrap();
    let admitter = Admitter::new(SharedView::new(ClusterView::new(Source::Direct)), Arc::new(policy), None);
    let admitted = admitter.admit(WebhookKind::Mutate, &body, Duration::from_secs(1)).await.unwrap();
    let json = admitted.response_json();
    let resp = &json["response"];
    assert_eq!(resp["uid"], "4c984e14-0f7b-43f7-9e6e-352c7f312529");
    assert_eq!(resp["allowed"], true);
    assert_eq!(resp["patchType"], "JSONPatch");
    let bytes = base64::engine::general_purpose::STANDARD.decode(resp["patch"].as_str().unwrap()).unwrap();
    let got: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(got, want);
    // Decoded and applied, it yields the gated pod.
    let patch: json_patch::Patch = serde_json::from_value(got).unwrap();
    let mut pod = req.object.clone().unwrap();
    json_patch::patch(&mut pod, &patch).unwrap();
    assert_eq!(gate_of(&pod)["name"], GATE_CONTAINER);

    // Pods without the storage network: no patch on the wire.
    let plain = support::fixture("pod-create-instance-manager-mutating.json");
    let admitted = admitter.admit(WebhookKind::Mutate, &plain, Duration::from_secs(1)).await.unwrap();
    assert!(admitted.response_json()["response"].get("patch").is_none());
    assert_eq!(admitted.response_json()["response"]["allowed"], true);
}
