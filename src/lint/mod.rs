//! `longhorn-guard lint`: the replica and settings rules over manifests, without a cluster.
//!
//! Every object is checked by the webhook's own [`crate::policy::validate`] with a synthetic
//! CREATE request, against a view holding only the Settings found in the same input (so a
//! Volume with `numberOfReplicas: 0` resolves `default-replica-count` when the input has it).

pub mod source;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use serde::Serialize;
use serde_json::{json, Value};

use crate::admission::{AdmissionRequest, GroupVersionKind, GroupVersionResource, Operation, UserInfo};
use crate::cluster::{ClusterView, Object, ObjectKind, Source};
use crate::decision::Decision;
use crate::policy::replicas::PREFIX;
use crate::policy::{self, Policy};
pub use source::{Input, InputError};

/// Arguments of `longhorn-guard lint`.
#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// Policy file (YAML); defaults apply when absent.
    #[arg(long, value_name = "FILE", env = "LONGHORN_GUARD_POLICY")]
    pub policy: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: LintFormat,
    /// Files or folders of manifests (YAML, JSON, Lists, `helm template` output, Helm values);
    /// `-` reads stdin.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LintFormat {
    Text,
    Json,
}

/// How serious a finding is.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The webhook would allow with this warning.
    Warning,
    /// The webhook would deny (`replicas.action: deny`): exit 1.
    Deny,
    /// The input cannot be read or the object is not valid: exit 2.
    Error,
}

/// One line of lint output.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Finding {
    pub path: String,
    /// 1-based; 0 when unknown (an unreadable file).
    pub line: usize,
    pub kind: String,
    pub name: String,
    pub severity: Severity,
    pub message: String,
}

impl Finding {
    /// `path:line: kind/name: message`, with `denied: ` / `error: ` before deny-level and
    /// invalid-object messages. Unreadable input has no kind/name: `path[:line]: error: reason`.
    pub fn text(&self) -> String {
        let tag = match self.severity {
            Severity::Warning => "",
            Severity::Deny => "denied: ",
            Severity::Error => "error: ",
        };
        let at = if self.line > 0 { format!("{}:{}", self.path, self.line) } else { self.path.clone() };
        if self.kind.is_empty() {
            format!("{at}: {tag}{}", self.message)
        } else {
            format!("{at}: {}/{}: {tag}{}", self.kind, self.name, self.message)
        }
    }
}

/// Everything one lint run found, in input order.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// Inputs read (files, stdin).
    pub inputs: usize,
}

impl Report {
    /// 2 when any input or object was unreadable, else 1 when a deny-level finding exists,
    /// else 0.
    pub fn exit_code(&self) -> u8 {
        match self.findings.iter().map(|f| f.severity).max() {
            Some(Severity::Error) => 2,
            Some(Severity::Deny) => 1,
            _ => 0,
        }
    }

    /// The text output: one line per finding.
    pub fn text(&self) -> String {
        self.findings.iter().map(|f| f.text() + "\n").collect()
    }

    /// The JSON output: an array of `{path,line,kind,name,severity,message}`, pretty-printed.
    pub fn json(&self) -> String {
        let mut s = serde_json::to_string_pretty(&self.findings).unwrap_or_else(|_| "[]".into());
        s.push('\n');
        s
    }

    fn count(&self, s: Severity) -> usize {
        self.findings.iter().filter(|f| f.severity == s).count()
    }
}

/// Runs the command. Exit 0: nothing or only warnings; 1: a deny-level finding; 2: unreadable
/// input or policy.
pub fn run(args: LintArgs) -> ExitCode {
    let policy = match Policy::load(args.policy.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("longhorn-guard lint: policy: {e}");
            return ExitCode::from(2);
        }
    };
    let report = lint_paths(&args.paths, &policy, &mut std::io::stdin());
    let out = match args.format {
        LintFormat::Text => report.text(),
        LintFormat::Json => {
            format!("{}\n", serde_json::to_string_pretty(&report.findings).unwrap_or_default())
        }
    };
    if let Err(e) = crate::output::stdout(&out) {
        eprintln!("longhorn-guard lint: {e}");
        return ExitCode::from(2);
    }
    eprintln!(
        "longhorn-guard lint: {} input(s), {} warning(s), {} denied, {} error(s)",
        report.inputs,
        report.count(Severity::Warning),
        report.count(Severity::Deny),
        report.count(Severity::Error)
    );
    ExitCode::from(report.exit_code())
}

/// Lints files, folders and `-` (read from `stdin`).
pub fn lint_paths(paths: &[PathBuf], policy: &Policy, stdin: &mut dyn std::io::Read) -> Report {
    let (inputs, errors) = source::collect(paths, stdin);
    let mut report = lint_inputs(&inputs, policy);
    let mut unreadable: Vec<Finding> = errors.into_iter().map(input_error).collect();
    unreadable.append(&mut report.findings);
    report.findings = unreadable;
    report
}

fn input_error(e: InputError) -> Finding {
    Finding {
        path: e.path,
        line: e.line.unwrap_or(0),
        kind: String::new(),
        name: String::new(),
        severity: Severity::Error,
        message: e.reason,
    }
}

/// What to check and where it sits.
struct Target {
    path: String,
    /// The text the object came from, for field lines.
    input: usize,
    first: usize,
    last: usize,
    /// A List item's name: field lines are searched after it.
    anchor: Option<String>,
    kind: String,
    name: String,
    /// Set for objects derived from Helm values or chart ConfigMaps: the key whose line to
    /// report, and keep the rule's subject in messages.
    key: Option<String>,
    resource: (&'static str, &'static str),
    object: Value,
}

/// Lints already-read inputs.
pub fn lint_inputs(inputs: &[Input], policy: &Policy) -> Report {
    let mut findings = Vec::new();
    let mut targets = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        match source::documents(input) {
            Ok(docs) => {
                for doc in docs {
                    let mut items = Vec::new();
                    flatten(&doc.value, None, &mut items);
                    for (value, anchor) in items {
                        classify(i, input, &doc, value, anchor, &mut targets, &mut findings);
                    }
                }
            }
            Err(e) => findings.push(input_error(e)),
        }
    }
    let global = settings_view(targets.iter());
    let mut own: Option<(usize, ClusterView)> = None;
    for t in &targets {
        // Settings of the object's own input win over those of other inputs.
        if own.as_ref().is_none_or(|(i, _)| *i != t.input) {
            let mut view = global.clone();
            for o in setting_objects(targets.iter().filter(|x| x.input == t.input)) {
                view.upsert(o, SystemTime::now());
            }
            own = Some((t.input, view));
        }
        let view = own.as_ref().map(|(_, v)| v).unwrap_or(&global);
        let decision = policy::validate(&request(t), view, policy, SystemTime::now());
        findings.extend(decision_findings(t, &decision, &inputs[t.input].text));
    }
    findings.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    Report { findings, inputs: inputs.len() }
}

/// Expands `List`s (any `*List` with `items`) and top-level arrays into their items, each
/// with its name as anchor.
fn flatten<'a>(v: &'a Value, anchor: Option<String>, out: &mut Vec<(&'a Value, Option<String>)>) {
    let is_list = v.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"))
        && v.get("items").is_some_and(Value::is_array);
    if let Value::Array(items) = v {
        for item in items {
            let name = item.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string);
            flatten(item, name, out);
        }
        return;
    }
    match v.get("items").and_then(Value::as_array) {
        Some(items) if is_list => {
            for item in items {
                let name = item.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string);
                flatten(item, name, out);
            }
        }
        _ => out.push((v, anchor)),
    }
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// Turns one manifest into targets: Longhorn Settings and Volumes, StorageClasses, Helm
/// values, and the Longhorn chart's `longhorn-default-setting` / `longhorn-storageclass`
/// ConfigMaps. Other kinds are skipped.
#[allow(clippy::too_many_arguments)]
fn classify(
    i: usize,
    input: &Input,
    doc: &source::Document,
    v: &Value,
    anchor: Option<String>,
    targets: &mut Vec<Target>,
    findings: &mut Vec<Finding>,
) {
    if !v.is_object() {
        return;
    }
    let api_version = str_at(v, "/apiVersion");
    let kind = str_at(v, "/kind");
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let name = str_at(v, "/metadata/name").to_string();
    let base = |kind: &str, name: String, key: Option<String>, resource, object: Value| Target {
        path: input.path.clone(),
        input: i,
        first: doc.first,
        last: doc.last,
        anchor: anchor.clone(),
        kind: kind.to_string(),
        name,
        key,
        resource,
        object,
    };
    match (group, kind) {
        ("longhorn.io", "Setting") => {
            targets.push(base(kind, name, None, ("longhorn.io", "settings"), v.clone()))
        }
        ("longhorn.io", "Volume") => {
            targets.push(base(kind, name, None, ("longhorn.io", "volumes"), v.clone()))
        }
        ("storage.k8s.io", "StorageClass") => {
            targets.push(base(kind, name, None, ("storage.k8s.io", "storageclasses"), v.clone()))
        }
        ("", "ConfigMap") if api_version == "v1" => {
            let mut error = |message: String| {
                findings.push(Finding {
                    path: input.path.clone(),
                    line: doc.first,
                    kind: "ConfigMap".into(),
                    name: name.clone(),
                    severity: Severity::Error,
                    message,
                })
            };
            if name == "longhorn-default-setting" {
                let text = str_at(v, "/data/default-setting.yaml");
                match serde_saphyr::from_str::<Value>(text) {
                    Ok(Value::Object(map)) => {
                        for (setting, value) in map {
                            if ["default-replica-count", "node-drain-policy", "storage-network"]
                                .contains(&setting.as_str())
                            {
                                let value = scalar_string(&value);
                                targets.push(base(
                                    "Setting",
                                    setting.clone(),
                                    Some(setting.clone()),
                                    ("longhorn.io", "settings"),
                                    synthetic_setting(&setting, &value),
                                ));
                            }
                        }
                    }
                    Ok(Value::Null) => {}
                    Ok(_) => {
                        error("data.default-setting.yaml is not a map of setting names to values".into())
                    }
                    Err(e) => error(format!("data.default-setting.yaml: {}", one_line(&e.to_string()))),
                }
            } else if name == "longhorn-storageclass" {
                let text = str_at(v, "/data/storageclass.yaml");
                match serde_saphyr::from_multiple::<Value>(text) {
                    Ok(docs) => {
                        for sc in docs.into_iter().filter(|d| str_at(d, "/kind") == "StorageClass") {
                            let sc_name = str_at(&sc, "/metadata/name").to_string();
                            targets.push(base(
                                "StorageClass",
                                sc_name,
                                Some("numberOfReplicas".into()),
                                ("storage.k8s.io", "storageclasses"),
                                sc,
                            ));
                        }
                    }
                    Err(e) => error(format!("data.storageclass.yaml: {}", one_line(&e.to_string()))),
                }
            }
        }
        ("", "") if api_version.is_empty() && anchor.is_none() => {
            helm_values(v, &base, targets, findings, input, doc);
        }
        _ => {}
    }
}

/// Builds a target from kind, name, line key, resource and object.
type MakeTarget<'a> =
    dyn Fn(&str, String, Option<String>, (&'static str, &'static str), Value) -> Target + 'a;

/// A Longhorn Helm values file: `defaultSettings.*` and `persistence.defaultClassReplicaCount`.
fn helm_values(
    v: &Value,
    base: &MakeTarget<'_>,
    targets: &mut Vec<Target>,
    findings: &mut Vec<Finding>,
    input: &Input,
    doc: &source::Document,
) {
    let settings = v.get("defaultSettings").filter(|s| s.is_object());
    let persistence = v.get("persistence").filter(|s| s.is_object());
    if settings.is_none() && persistence.is_none() {
        return;
    }
    for (key, setting) in [
        ("defaultReplicaCount", "default-replica-count"),
        ("nodeDrainPolicy", "node-drain-policy"),
        ("storageNetwork", "storage-network"),
    ] {
        let Some(value) = settings.and_then(|s| s.get(key)).filter(|x| !x.is_null()) else { continue };
        let name = format!("defaultSettings.{key}");
        if key == "defaultReplicaCount" && value.is_number() {
            let line =
                source::find_key_line(&input.text, doc.first, doc.last, key, None).unwrap_or(doc.first);
            findings.push(Finding {
                path: input.path.clone(),
                line,
                kind: "HelmValues".into(),
                name: name.clone(),
                severity: Severity::Warning,
                message: format!(
                    "{value} is a number; Longhorn 1.10+ charts require a string, e.g. \"{}\" (longhorn#11940)",
                    crate::policy::replicas::suggested_count(value)
                ),
            });
        }
        let object = synthetic_setting(setting, &scalar_string(value));
        targets.push(base("HelmValues", name, Some(key.to_string()), ("longhorn.io", "settings"), object));
    }
    if let Some(n) = persistence.and_then(|p| p.get("defaultClassReplicaCount")).filter(|x| !x.is_null()) {
        let object = json!({
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "longhorn"},
            "provisioner": crate::policy::replicas::LONGHORN_PROVISIONER,
            "parameters": {"numberOfReplicas": scalar_string(n)},
        });
        targets.push(base(
            "HelmValues",
            "persistence.defaultClassReplicaCount".into(),
            Some("defaultClassReplicaCount".into()),
            ("storage.k8s.io", "storageclasses"),
            object,
        ));
    }
}

fn scalar_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn synthetic_setting(name: &str, value: &str) -> Value {
    json!({
        "apiVersion": crate::cluster::LONGHORN_API_VERSION,
        "kind": "Setting",
        "metadata": {"name": name, "namespace": crate::cluster::LONGHORN_NAMESPACE},
        "value": value,
    })
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A view holding the given Settings (the last one of a name wins).
fn settings_view<'a>(targets: impl Iterator<Item = &'a Target>) -> ClusterView {
    ClusterView::from_objects(Source::Direct, setting_objects(targets), SystemTime::now())
}

fn setting_objects<'a>(targets: impl Iterator<Item = &'a Target>) -> Vec<Object> {
    targets
        .filter(|t| t.resource.1 == "settings")
        .filter_map(|t| Object::from_value(ObjectKind::Setting, t.object.clone()).ok())
        .collect()
}

/// The CREATE request the API server would send for the target.
fn request(t: &Target) -> AdmissionRequest {
    let version = str_at(&t.object, "/apiVersion").rsplit('/').next().unwrap_or("").to_string();
    let kind = str_at(&t.object, "/kind").to_string();
    let namespace = t.object.pointer("/metadata/namespace").and_then(Value::as_str).map(str::to_string);
    AdmissionRequest {
        uid: "lint".into(),
        kind: GroupVersionKind { group: t.resource.0.into(), version: version.clone(), kind },
        resource: GroupVersionResource { group: t.resource.0.into(), version, resource: t.resource.1.into() },
        sub_resource: None,
        request_kind: None,
        request_resource: None,
        request_sub_resource: None,
        name: Some(str_at(&t.object, "/metadata/name").to_string()),
        namespace,
        operation: Operation::Create,
        user_info: UserInfo { username: "longhorn-guard-lint".into(), ..UserInfo::default() },
        object: Some(t.object.clone()),
        old_object: None,
        dry_run: Some(true),
        options: None,
    }
}

/// Findings for one decision, each placed on the line of its field.
fn decision_findings(t: &Target, d: &Decision, text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |severity: Severity, field_key: Option<&str>, message: String| {
        let key = t.key.as_deref().or(field_key);
        let line = key
            .and_then(|k| source::find_key_line(text, t.first, t.last, k, t.anchor.as_deref()))
            .unwrap_or(t.first);
        out.push(Finding {
            path: t.path.clone(),
            line,
            kind: t.kind.clone(),
            name: t.name.clone(),
            severity,
            message,
        });
    };
    if let Some(st) = d.status.as_ref().filter(|_| !d.allowed) {
        if d.rule == "bad-request" {
            let why = st.message.rsplit_once("malformed: ").map(|(_, w)| w).unwrap_or(&st.message);
            add(Severity::Error, None, format!("not a valid {}: {why}", t.kind));
        } else if st.causes.is_empty() {
            add(Severity::Deny, None, tidy(t, &st.message));
        } else {
            for c in &st.causes {
                add(Severity::Deny, c.field.rsplit('.').next(), tidy(t, &c.message));
            }
        }
    }
    for w in &d.warnings {
        let key = if w.contains("strict-local") {
            "dataLocality"
        } else if t.resource.1 == "settings" {
            "value"
        } else {
            "numberOfReplicas"
        };
        add(Severity::Warning, Some(key), tidy(t, w));
    }
    out
}

/// Drops the `longhorn-guard: ` prefix, and the `volume NAME: ` / `storageclass NAME: `
/// subject the output line already names.
fn tidy(t: &Target, message: &str) -> String {
    let m = message.strip_prefix(PREFIX).unwrap_or(message);
    if t.kind != "HelmValues" && (m.starts_with("volume ") || m.starts_with("storageclass ")) {
        if let Some((_, rest)) = m.split_once(": ") {
            return rest.to_string();
        }
    }
    m.to_string()
}
