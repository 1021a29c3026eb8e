//! `longhorn-guard lint` over the shipped samples (examples/lint) and temporary folders:
//! output lines and exit status, through the real binary.

use crate::support::run;

use std::path::Path;
use std::process::{Command, Output};

use longhorn_guard::lint::{lint_inputs, lint_paths, Input, Severity};
use longhorn_guard::policy::Policy;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_longhorn-guard");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn lint(args: &[&str]) -> Output {
    Command::new(BIN).arg("lint").args(args).current_dir(ROOT).output().unwrap()
}

fn lint_stdin(args: &[&str], stdin: &str) -> Output {
    run::with_stdin(Command::new(BIN).arg("lint").args(args).current_dir(ROOT), stdin.as_bytes())
}

fn lines(o: &Output) -> Vec<String> {
    String::from_utf8(o.stdout.clone()).unwrap().lines().map(str::to_string).collect()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap()
}

const M: &str = "examples/lint/manifests";

fn expected_manifest_lines(deny: bool) -> Vec<String> {
    let d = if deny { "denied: " } else { "" };
    vec![
        format!("{M}/helm-template.yaml:11: Setting/default-replica-count: {d}default-replica-count v1=2: 2 replicas tolerate 1 node failure; policy minimum is 3"),
        format!("{M}/helm-template.yaml:28: StorageClass/longhorn: {d}numberOfReplicas=2 tolerates 1 node failure; policy minimum is 3"),
        format!("{M}/helm-values.yaml:4: HelmValues/persistence.defaultClassReplicaCount: {d}storageclass longhorn: numberOfReplicas=2 tolerates 1 node failure; policy minimum is 3"),
        format!("{M}/helm-values.yaml:7: HelmValues/defaultSettings.defaultReplicaCount: 2 is a number; Longhorn 1.10+ charts require a string, e.g. \"2\" (longhorn#11940)"),
        format!("{M}/helm-values.yaml:7: HelmValues/defaultSettings.defaultReplicaCount: {d}default-replica-count=2 (all engines): 2 replicas tolerate 1 node failure; policy minimum is 3"),
        // Warnings keep the 40-character name whole within 120 characters with a shorter
        // text; denials carry the full text.
        format!("{M}/list.json:15: Volume/pvc-9b8a7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d: {d}numberOfReplicas=2 tolerates 1 node failure; {}", if deny { "policy minimum is 3" } else { "minimum 3" }),
        format!("{M}/low-replica.yaml:7: Setting/default-replica-count: {d}default-replica-count=2 (all engines): 2 replicas tolerate 1 node failure; policy minimum is 3"),
        format!("{M}/low-replica.yaml:16: Volume/scratch: {d}numberOfReplicas=1 has no redundancy; policy minimum is 3"),
        format!("{M}/low-replica.yaml:26: Volume/uses-default: numberOfReplicas=0 means default-replica-count v1=2; policy minimum is 3"),
        format!("{M}/low-replica.yaml:36: Volume/local-cache: strict-local keeps 1 replica; every drain of its node will block"),
        format!("{M}/low-replica.yaml:37: Volume/local-cache: {d}numberOfReplicas=1 has no redundancy; policy minimum is 3"),
        format!("{M}/low-replica.yaml:46: StorageClass/longhorn-1-replica: {d}numberOfReplicas=1 has no redundancy; policy minimum is 3"),
        format!("{M}/low-replica.yaml:54: Setting/node-drain-policy: node-drain-policy=always-allow: Longhorn stops blocking drains; longhorn-guard still blocks unsafe ones"),
        format!("{M}/low-replica.yaml:61: Setting/storage-network: storage-network=kube-system/storage-net: recreates all instance managers; the init gate guards start-up"),
    ]
}

#[test]
fn shipped_samples_warn_and_exit_0() {
    let o = lint(&[M]);
    assert_eq!(lines(&o), expected_manifest_lines(false));
    assert_eq!(code(&o), 0, "warnings only");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("5 input(s), 14 warning(s), 0 denied, 0 error(s)"), "{stderr}");
}

#[test]
fn good_manifests_have_no_findings() {
    let o = lint(&[&format!("{M}/good.yaml")]);
    assert_eq!(lines(&o), Vec::<String>::new());
    assert_eq!(code(&o), 0);
}

#[test]
fn deny_policy_exits_1() {
    let o = lint(&["--policy", "examples/lint/policy-deny.yaml", M]);
    assert_eq!(lines(&o), expected_manifest_lines(true));
    assert_eq!(code(&o), 1);
    // Only warnings left in the good file: still 0 under deny.
    let o = lint(&["--policy", "examples/lint/policy-deny.yaml", &format!("{M}/good.yaml")]);
    assert_eq!(code(&o), 0);
}

#[test]
fn malformed_input_exits_2_with_path_and_reason() {
    let o = lint(&["examples/lint/malformed"]);
    assert_eq!(
        lines(&o),
        [
            "examples/lint/malformed/bad-object.yaml:2: Volume/bad-count: error: not a valid Volume: invalid type: string \"three\", expected i64",
            "examples/lint/malformed/broken.yaml:6: error: YAML syntax error: unclosed bracket '['",
        ]
    );
    assert_eq!(code(&o), 2);
    // Unreadable input wins over deny-level findings.
    let o = lint(&["--policy", "examples/lint/policy-deny.yaml", M, "examples/lint/no-such-file.yaml"]);
    assert_eq!(code(&o), 2);
    assert_eq!(
        lines(&o)[0],
        "examples/lint/no-such-file.yaml: error: cannot read: No such file or directory (os error 2)"
    );
}

#[test]
fn bad_policy_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "replicas:\n  minimum: 0\n").unwrap();
    let o = lint(&["--policy", policy.to_str().unwrap(), M]);
    assert_eq!(code(&o), 2);
    assert!(lines(&o).is_empty());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("replicas.minimum must be 1..20 (Longhorn's replica range), got 0"), "{stderr}");
}

#[test]
fn json_format() {
    let o = lint(&["--format", "json", &format!("{M}/low-replica.yaml")]);
    assert_eq!(code(&o), 0);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 8);
    assert_eq!(
        arr[1],
        serde_json::json!({
            "path": format!("{M}/low-replica.yaml"), "line": 16, "kind": "Volume", "name": "scratch",
            "severity": "warning", "message": "numberOfReplicas=1 has no redundancy; policy minimum is 3"
        })
    );
    let o = lint(&[
        "--format",
        "json",
        "--policy",
        "examples/lint/policy-deny.yaml",
        &format!("{M}/low-replica.yaml"),
    ]);
    assert_eq!(code(&o), 1);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[1]["severity"], "deny");
    assert_eq!(v[2]["severity"], "warning", "numberOfReplicas=0 is never denied");
}

#[test]
fn helm_template_on_stdin() {
    let text = "\
---
# Source: longhorn/templates/storageclass.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: longhorn-storageclass
data:
  storageclass.yaml: |
    kind: StorageClass
    apiVersion: storage.k8s.io/v1
    metadata:
      name: longhorn
    provisioner: driver.longhorn.io
    parameters:
      numberOfReplicas: \"1\"
---
---
# Source: app/templates/sc.yaml
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
provisioner: driver.longhorn.io
parameters:
  numberOfReplicas: \"2\"
  dataLocality: best-effort
";
    let o = lint_stdin(&["-"], text);
    assert_eq!(
        lines(&o),
        [
            "-:15: StorageClass/longhorn: numberOfReplicas=1 has no redundancy; policy minimum is 3",
            "-:25: StorageClass/fast: numberOfReplicas=2 tolerates 1 node failure; policy minimum is 3",
        ]
    );
    assert_eq!(code(&o), 0);
}

#[test]
fn temp_folder_recursion_extensions_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("nested/deeper");
    std::fs::create_dir_all(&sub).unwrap();
    let list = "apiVersion: v1\nkind: List\nitems:\n\
- apiVersion: longhorn.io/v1beta2\n  kind: Volume\n  metadata:\n    name: a\n  spec:\n    numberOfReplicas: 3\n\
- apiVersion: longhorn.io/v1beta2\n  kind: Volume\n  metadata:\n    name: b\n  spec:\n    numberOfReplicas: 1\n";
    std::fs::write(sub.join("list.yml"), list).unwrap();
    // Not a manifest extension: skipped in folders.
    std::fs::write(sub.join("notes.txt"), "numberOfReplicas: 1 {{{").unwrap();
    // Unknown kinds are not flagged.
    std::fs::write(
        dir.path().join("deploy.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replicas: 1\n",
    )
    .unwrap();
    let o = Command::new(BIN).arg("lint").arg(dir.path()).output().unwrap();
    let shown = dir.path().join("nested/deeper/list.yml").display().to_string();
    assert_eq!(
        lines(&o),
        [format!("{shown}:15: Volume/b: numberOfReplicas=1 has no redundancy; policy minimum is 3")]
    );
    assert_eq!(code(&o), 0);
    // A folder with no manifest at all: a render step that failed, not a pass.
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("README.md"), "not a manifest\n").unwrap();
    let o = Command::new(BIN).arg("lint").arg(empty.path()).output().unwrap();
    assert_eq!(code(&o), 2);
    assert_eq!(
        lines(&o),
        [format!(
            "{}: error: empty input: no *.yaml, *.yml or *.json file in the folder (did the step that renders it fail?)",
            empty.path().display()
        )]
    );
}

#[test]
fn empty_named_input_is_an_error_but_an_empty_file_in_a_folder_is_not() {
    // A render step that failed leaves nothing on stdin: exit 2, not a silent pass.
    for text in ["", "\n  \n", "# Source: longhorn/templates/x.yaml\n---\n---\n"] {
        let o = lint_stdin(&["-"], text);
        assert_eq!(code(&o), 2, "{text:?}");
        assert_eq!(
            lines(&o),
            ["-: error: empty input: stdin holds no YAML or JSON document (did the step that renders it fail?)"]
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("rendered.yaml");
    std::fs::write(&empty, "# nothing\n").unwrap();
    let o = Command::new(BIN).arg("lint").arg(&empty).output().unwrap();
    assert_eq!(code(&o), 2);
    assert_eq!(
        lines(&o),
        [format!(
            "{}: error: empty input: the file holds no YAML or JSON document (did the step that renders it fail?)",
            empty.display()
        )]
    );
    // Found by walking a folder, the same file is skipped: a placeholder is not an error.
    let o = Command::new(BIN).arg("lint").arg(dir.path()).output().unwrap();
    assert_eq!((code(&o), lines(&o).len()), (0, 0));
    // An empty List is a document: nothing to say.
    let o = lint_stdin(&["-"], "apiVersion: v1\nkind: List\nitems: []\n");
    assert_eq!((code(&o), lines(&o).len()), (0, 0));
}

#[test]
fn helm_values_string_and_number_forms() {
    let policy = Policy::default();
    let input = |text: &str| vec![Input { path: "values.yaml".into(), text: text.into() }];
    // 1.10+ string form, per engine: only the low engine is named; no number warning.
    let r = lint_inputs(
        &input("defaultSettings:\n  defaultReplicaCount: '{\"v1\":\"3\",\"v2\":\"1\"}'\n"),
        &policy,
    );
    assert_eq!(
        r.text(),
        "values.yaml:2: HelmValues/defaultSettings.defaultReplicaCount: default-replica-count v2=1: no redundancy, one node failure loses data; policy minimum is 3\n"
    );
    // A number at the minimum: only the chart-type warning.
    let r = lint_inputs(
        &input("defaultSettings:\n  defaultReplicaCount: 3\npersistence:\n  defaultClassReplicaCount: 3\n"),
        &policy,
    );
    assert_eq!(
        r.text(),
        "values.yaml:2: HelmValues/defaultSettings.defaultReplicaCount: 3 is a number; Longhorn 1.10+ charts require a string, e.g. \"3\" (longhorn#11940)\n"
    );
    assert_eq!(r.exit_code(), 0);
    // A number that is no count: the suggestion is a sensible count, not its float rendering.
    let r =
        lint_inputs(&input("defaultSettings:\n  defaultReplicaCount: 99999999999999999999999\n"), &policy);
    let text = r.text();
    assert!(text.contains("require a string, e.g. \"3\" (longhorn#11940)"), "{text}");
    assert!(!text.contains("e.g. \"1e+23\""), "{text}");
    // Protection settings in values.
    let r = lint_inputs(
        &input("defaultSettings:\n  nodeDrainPolicy: always-allow\n  storageNetwork: bad\n"),
        &policy,
    );
    assert_eq!(
        r.text(),
        "values.yaml:2: HelmValues/defaultSettings.nodeDrainPolicy: node-drain-policy=always-allow: Longhorn stops blocking drains; longhorn-guard still blocks unsafe ones\n\
         values.yaml:3: HelmValues/defaultSettings.storageNetwork: storage-network=\"bad\" is not <namespace>/<name>; Longhorn rejects it\n"
    );
    // A YAML document with neither apiVersion/kind nor Longhorn values keys: ignored.
    let r = lint_inputs(&input("replicas:\n  minimum: 3\n"), &policy);
    assert!(r.findings.is_empty());
}

#[test]
fn volume_zero_uses_a_setting_from_the_same_input() {
    let policy = Policy::default();
    let vol =
        "apiVersion: longhorn.io/v1beta2\nkind: Volume\nmetadata:\n  name: v\nspec:\n  numberOfReplicas: 0\n";
    let r = lint_inputs(&[Input { path: "v.yaml".into(), text: vol.into() }], &policy);
    assert_eq!(
        r.text(),
        "v.yaml:6: Volume/v: numberOfReplicas=0 means default-replica-count, not known here; not checked\n"
    );
    let setting = "apiVersion: longhorn.io/v1beta2\nkind: Setting\nmetadata:\n  name: default-replica-count\nvalue: \"3\"\n";
    let r = lint_inputs(
        &[
            Input { path: "s.yaml".into(), text: setting.into() },
            Input { path: "v.yaml".into(), text: vol.into() },
        ],
        &policy,
    );
    assert!(r.findings.is_empty(), "{}", r.text());
}

#[test]
fn json_syntax_errors_and_file_lines() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\n  \"kind\": \"List\",\n  \"items\": [\n}\n").unwrap();
    let r = lint_paths(&[bad], &Policy::default(), &mut std::io::empty());
    assert_eq!(r.exit_code(), 2);
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].severity, Severity::Error);
    assert_eq!(r.findings[0].line, 4);
    assert!(r.findings[0].message.starts_with("JSON syntax error: "), "{}", r.findings[0].message);
    // YAML errors report the file's line, also in a later document.
    let y = dir.path().join("two.yaml");
    std::fs::write(&y, "a: 1\n---\nb: 2\n---\nc: [\n").unwrap();
    let r = lint_paths(&[y], &Policy::default(), &mut std::io::empty());
    assert_eq!(r.exit_code(), 2);
    assert_eq!(r.findings[0].line, 5, "{:?}", r.findings);
    assert!(Path::new(BIN).exists());
}

#[test]
fn symlink_loops_do_not_hang_and_arrays_are_read() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(dir.path(), dir.path().join("loop")).unwrap();
    let arr = r#"[
  {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "a"},
   "provisioner": "driver.longhorn.io", "parameters": {"numberOfReplicas": "3"}},
  {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "b"},
   "provisioner": "driver.longhorn.io", "parameters": {"numberOfReplicas": "2"}}
]
"#;
    std::fs::write(dir.path().join("arr.json"), arr).unwrap();
    let r = lint_paths(&[dir.path().to_path_buf()], &Policy::default(), &mut std::io::empty());
    let shown = dir.path().join("arr.json").display().to_string();
    assert_eq!(
        r.text(),
        format!(
            "{shown}:5: StorageClass/b: numberOfReplicas=2 tolerates 1 node failure; policy minimum is 3\n"
        )
    );
    assert_eq!(r.inputs, 1);
}

#[test]
fn a_document_that_starts_on_its_separator_line_is_linted() {
    // YAML lets a document start on its `---` line (flow style); it is neither dropped nor
    // taken for an empty input, and its findings and errors carry the file's line numbers.
    let sc = r#"{apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: one}, provisioner: driver.longhorn.io, parameters: {numberOfReplicas: "1"}}"#;
    let deny = "--policy=examples/lint/policy-deny.yaml";
    let o = lint_stdin(
        &[deny, "-"],
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\n--- {sc}\n"),
    );
    assert_eq!(code(&o), 1, "{o:?}");
    assert!(lines(&o)[0].starts_with("-:4: StorageClass/one: denied: numberOfReplicas=1"), "{o:?}");
    // As the only document, after a comment on its line, and with `---` and trailing space.
    let o = lint_stdin(&[deny, "-"], &format!("--- {sc}   \n"));
    assert_eq!(code(&o), 1, "{o:?}");
    let o = lint_stdin(&[deny, "-"], &format!("--- # the class\n{sc}\n"));
    assert_eq!(code(&o), 1, "{o:?}");
    // A block mapping cannot start there: a syntax error at the file's line, never a pass.
    let o = lint_stdin(&[deny, "-"], "a: 1\n---\nb: 2\n--- kind: StorageClass\nmetadata: {name: two}\n");
    assert_eq!(code(&o), 2, "{o:?}");
    assert!(lines(&o)[0].starts_with("-:5: error: YAML syntax error: "), "{o:?}");
}
