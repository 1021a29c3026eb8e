//! The init gate's MutatingAdmissionPolicy (`longhorn-guard gate-policy`): the shipped
//! manifests are its output, it never uses the JSONPatch form that panics kube-apiserver
//! v1.36.2, and its regular expressions read the networks annotation as `parse_networks` does.
//! (That its injection equals the webhook's, pod by pod, is checked on a real API server:
//! e2e/gate-policy.sh, part of `make e2e`.)

use std::path::Path;

use longhorn_guard::gate::networks::parse_networks;
use longhorn_guard::mutate::gate_policy::{cel, render, render_yaml, GatePolicyError};
use longhorn_guard::policy::Policy;
use regex::Regex;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn base_policy() -> Policy {
    Policy::load(Some(&root().join("manifests/base/policy.yaml"))).unwrap()
}

#[test]
fn shipped_manifests_are_the_rendered_policy() {
    let want = render_yaml(&base_policy().gate).unwrap();
    let got = read("manifests/components/gate-policy/gate-policy.yaml");
    assert!(
        got == want,
        "manifests/components/gate-policy/gate-policy.yaml is not what `longhorn-guard gate-policy \
         --policy manifests/base/policy.yaml` prints: run `make gate-policy`"
    );
    // The chart's copy is a link to it.
    assert_eq!(read("charts/longhorn-guard/files/gate-policy.yaml"), want);
}

fn gate_policy_cli(policy: &Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_longhorn-guard"))
        .args(["gate-policy", "--policy"])
        .arg(policy)
        .output()
        .unwrap()
}

#[test]
fn the_cli_prints_the_rendered_policy() {
    let out = gate_policy_cli(&root().join("manifests/base/policy.yaml"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), render_yaml(&base_policy().gate).unwrap());

    let dir = tempfile::tempdir().unwrap();
    let off = dir.path().join("policy.yaml");
    std::fs::write(&off, "gate: {enabled: false}\n").unwrap();
    let out = gate_policy_cli(&off);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("gate.enabled is false"));

    std::fs::write(&off, "gate: {timeout: 2h}\n").unwrap();
    let out = gate_policy_cli(&off);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn settings_become_the_policys_variables() {
    let mut policy = base_policy();
    policy.gate.image = "registry.local/guard:1.2".into();
    policy.gate.timeout = std::time::Duration::from_secs(90);
    let [map, binding] = render(&policy.gate).unwrap();
    let vars = &map["spec"]["variables"];
    let var = |name: &str| {
        vars.as_array().unwrap().iter().find(|v| v["name"] == name).unwrap()["expression"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(var("image"), "\"registry.local/guard:1.2\"");
    assert_eq!(var("timeout"), "\"1m30s\"");
    assert_eq!(binding["spec"]["policyName"], map["metadata"]["name"]);
    assert_eq!(map["spec"]["failurePolicy"], "Ignore");
    policy.gate.enabled = false;
    assert_eq!(render(&policy.gate).unwrap_err(), GatePolicyError::Disabled);
}

/// Every `JSONPatch{...}` of the mutation: (path, the value's text up to the closing brace's line).
fn patch_ops(expr: &str) -> Vec<(String, String)> {
    let op = Regex::new(r#"JSONPatch\{op: "(\w+)", path: "([^"]*)", value: "#).unwrap();
    op.captures_iter(expr)
        .map(|c| {
            let rest = &expr[c.get(0).unwrap().end()..];
            (format!("{} {}", &c[1], &c[2]), rest.chars().take(40).collect())
        })
        .collect()
}

#[test]
fn the_policy_never_adds_a_list_of_objects_in_one_operation() {
    let [map, _] = render(&base_policy().gate).unwrap();
    let expr = map["spec"]["mutations"][0]["jsonPatch"]["expression"].as_str().unwrap();
    assert_eq!(map["spec"]["mutations"][0]["patchType"], "JSONPatch");
    let ops = patch_ops(expr);
    assert_eq!(
        ops.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        [
            "add /spec/initContainers",
            "add /spec/initContainers/-",
            "add /spec/volumes",
            "add /spec/volumes/-"
        ]
    );
    for (path, value) in &ops {
        let is_item =
            path.ends_with("/-") || path.rsplit('/').next().is_some_and(|p| p.parse::<u32>().is_ok());
        // `add /spec/initContainers` with a list of typed objects panics kube-apiserver v1.36.2.
        assert!(is_item || value.starts_with("[]}"), "{path} adds a non-empty list: {value}");
    }
}

#[test]
fn the_name_and_interface_expressions_are_parse_networks() {
    let name = Regex::new(cel::NAME_RE).unwrap();
    let iface = Regex::new(cel::IFACE_RE).unwrap();
    let iface_ok = |i: &str| iface.is_match(i) && i.len() < 16 && i != "." && i != "..";
    let long = "a".repeat(253);
    let too_long = "a".repeat(254);
    for n in ["storage-net", "a", "a.b-c", "0", &long, &too_long, "-a", "a-", "A", "a_b", "", "é", "a b"] {
        let entry = format!("kube-system/{n}");
        assert_eq!(name.is_match(n), parse_networks(&entry, None).is_ok(), "name {n:?}");
    }
    for i in [
        "lhnet1",
        "eth0.100",
        "a",
        "abcdefghijklmno",
        "abcdefghijklmnop",
        ".",
        "..",
        "...",
        "a/b",
        "a:b",
        "a b",
        "a\tb",
        "a\u{a0}b",
        "a\u{85}b",
        "a\u{2028}",
        "ééééééé",
        "éééééééé",
        "a\u{1}b",
        "\u{3000}",
    ] {
        let entry =
            format!("[{{\"namespace\": \"ns\", \"name\": \"n\", \"interface\": {}}}]", serde_json::json!(i));
        assert_eq!(iface_ok(i), parse_networks(&entry, None).is_ok(), "interface {i:?}");
    }
}

#[test]
fn the_json_form_expressions_read_what_longhorn_writes() {
    let list = Regex::new(&cel::list_re()).unwrap();
    let obj = Regex::new(&cel::object_re()).unwrap();
    for text in [
        r#"[{"namespace": "kube-system", "name": "storage-net", "interface": "lhnet1"}]"#,
        r#"[{"name":"a"},{"NAME":"b","Interface":"x","ips":["10.0.0.1/24"],"mac":"c2:b0:57:49:47:f1"}]"#,
        "[ ]",
        "[\n {\"name\" : \"a\" , \"namespace\":null, \"default-route\": [], \"x\": -1.5e3, \"y\": true}\n]",
    ] {
        assert!(list.is_match(text), "{text}");
        parse_networks(text, Some("longhorn-system")).unwrap();
        let objects = obj.find_iter(text).count();
        assert_eq!(objects, serde_json::from_str::<Vec<serde_json::Value>>(text).unwrap().len(), "{text}");
    }
    // Not JSON lists of objects: parse_networks refuses them too.
    for text in
        [r#"{"name": "a"}"#, r#"[{"name": "a"}"#, r#"["a"]"#, r#"[{"name": "a",}]"#, "[{'name': 'a'}]"]
    {
        assert!(!list.is_match(text), "{text}");
        assert!(parse_networks(text, Some("longhorn-system")).is_err(), "{text}");
    }
}

/// The `--timeout` text of the policy's `timeout` variable for each `gate.timeout` of
/// tests/data/gate-timeouts.json: the webhook's writing (the chart's test reads the same table).
#[test]
fn timeouts_are_written_as_the_webhook_writes_them() {
    let table: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&read("tests/data/gate-timeouts.json")).unwrap();
    for (given, want) in table {
        let policy = Policy::parse(&format!("gate: {{timeout: {given}}}\n")).unwrap();
        let [map, _] = render(&policy.gate).unwrap();
        let var =
            map["spec"]["variables"].as_array().unwrap().iter().find(|v| v["name"] == "timeout").unwrap();
        assert_eq!(var["expression"], serde_json::json!(serde_json::to_string(&want).unwrap()), "{given}");
        let d = longhorn_guard::policy::config::duration::parse(&given).unwrap();
        assert_eq!(longhorn_guard::policy::show(d), want.as_str().unwrap(), "{given}");
    }
}

/// The replica-count ValidatingAdmissionPolicy (`longhorn-guard replicas-policy`): the shipped
/// component is its output, the minimums are its parameter ConfigMap and the binding's action
/// is the policy's. (Its decisions are checked on the real API server: e2e/gate-policy.sh.)
#[test]
fn shipped_replicas_policy_is_the_rendered_one() {
    use longhorn_guard::policy::replicas::admission_policy::{render, render_yaml};
    let policy = base_policy();
    assert_eq!(read("manifests/components/replicas-policy/replicas-policy.yaml"), render_yaml(&policy).unwrap(),
        "manifests/components/replicas-policy/replicas-policy.yaml is not what `longhorn-guard replicas-policy \
         --policy manifests/base/policy.yaml` prints: run `make replicas-policy`");
    let custom = Policy::parse(
        "replicas: {minimum: 4, action: deny, storageClassMinimums: {fast: 2}, namespaceMinimums: {dev: 1}}\n",
    )
    .unwrap();
    let [_, binding, params] = render(&custom);
    assert_eq!(binding["spec"]["validationActions"], serde_json::json!(["Deny"]));
    assert_eq!(
        params["data"],
        serde_json::json!({"minimum": "4", "storageClass.fast": "2", "namespace.dev": "1"})
    );
    let [_, binding, _] = render(&policy);
    assert_eq!(binding["spec"]["validationActions"], serde_json::json!(["Warn"]));
}
