//! What in the input gets checked: Longhorn Settings and Volumes, StorageClasses, Helm values
//! and the Longhorn chart's ConfigMaps, each turned into a [`Target`] that remembers where it
//! sits (file, lines, List item) so findings land on the line of their field.

use serde_json::{json, Value};

use super::source::{self, Input};
use super::{Finding, Severity};

/// What to check and where it sits.
pub(super) struct Target {
    pub(super) path: String,
    /// The text the object came from, for field lines.
    pub(super) input: usize,
    pub(super) first: usize,
    pub(super) last: usize,
    /// A List item's name: field lines are searched after it.
    pub(super) anchor: Option<String>,
    pub(super) kind: String,
    pub(super) name: String,
    /// Set for objects derived from Helm values or chart ConfigMaps: the key whose line to
    /// report, and keep the rule's subject in messages.
    pub(super) key: Option<String>,
    pub(super) resource: (&'static str, &'static str),
    pub(super) object: Value,
}

/// Expands `List`s (any `*List` with `items`) and top-level arrays into their items, each
/// with its name as anchor.
pub(super) fn flatten<'a>(v: &'a Value, anchor: Option<String>, out: &mut Vec<(&'a Value, Option<String>)>) {
    let is_list = v.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"));
    let items = match v {
        Value::Array(items) => Some(items),
        _ => v.get("items").and_then(Value::as_array).filter(|_| is_list),
    };
    let Some(items) = items else {
        out.push((v, anchor));
        return;
    };
    for item in items {
        let name = item.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string);
        flatten(item, name, out);
    }
}

const SETTINGS: (&str, &str) = ("longhorn.io", "settings");
const VOLUMES: (&str, &str) = ("longhorn.io", "volumes");
const STORAGE_CLASSES: (&str, &str) = ("storage.k8s.io", "storageclasses");

pub(super) fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// Turns one manifest into targets: Longhorn Settings and Volumes, StorageClasses, Helm
/// values, and the Longhorn chart's `longhorn-default-setting` / `longhorn-storageclass`
/// ConfigMaps. Other kinds are skipped.
pub(super) fn classify(
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
    let base = |kind: &str, name: String, key: Option<&str>, resource, object: Value| Target {
        path: input.path.clone(),
        input: i,
        first: doc.first,
        last: doc.last,
        anchor: anchor.clone(),
        kind: kind.to_string(),
        name,
        key: key.map(str::to_string),
        resource,
        object,
    };
    match (group, kind) {
        ("longhorn.io", "Setting") => targets.push(base(kind, name, None, SETTINGS, v.clone())),
        ("longhorn.io", "Volume") => targets.push(base(kind, name, None, VOLUMES, v.clone())),
        ("storage.k8s.io", "StorageClass") => {
            targets.push(base(kind, name, None, STORAGE_CLASSES, v.clone()))
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
                match crate::yaml::from_str::<Value>(text) {
                    Ok(Value::Object(map)) => {
                        let read = ["default-replica-count", "node-drain-policy", "storage-network"];
                        for (setting, value) in map.into_iter().filter(|(s, _)| read.contains(&s.as_str())) {
                            let object = synthetic_setting(&setting, &scalar_string(&value));
                            targets.push(base("Setting", setting.clone(), Some(&setting), SETTINGS, object));
                        }
                    }
                    Ok(Value::Null) => {}
                    Ok(_) => {
                        error("data.default-setting.yaml is not a map of setting names to values".into())
                    }
                    Err(e) => error(format!("data.default-setting.yaml: {}", crate::yaml::message(&e))),
                }
            } else if name == "longhorn-storageclass" {
                let text = str_at(v, "/data/storageclass.yaml");
                match crate::yaml::from_multiple::<Value>(text) {
                    Ok(docs) => {
                        for sc in docs.into_iter().filter(|d| str_at(d, "/kind") == "StorageClass") {
                            let sc_name = str_at(&sc, "/metadata/name").to_string();
                            let key = Some("numberOfReplicas");
                            targets.push(base("StorageClass", sc_name, key, STORAGE_CLASSES, sc));
                        }
                    }
                    Err(e) => error(format!("data.storageclass.yaml: {}", crate::yaml::message(&e))),
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
type MakeTarget<'a> = dyn Fn(&str, String, Option<&str>, (&'static str, &'static str), Value) -> Target + 'a;

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
            let lines = source::Lines::new(&input.text);
            let line = source::find_key_line(&lines, doc.first, doc.last, key, None).unwrap_or(doc.first);
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
        targets.push(base("HelmValues", name, Some(key), SETTINGS, object));
    }
    if let Some(n) = persistence.and_then(|p| p.get("defaultClassReplicaCount")).filter(|x| !x.is_null()) {
        let object = json!({
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "longhorn"},
            "provisioner": crate::policy::replicas::LONGHORN_PROVISIONER,
            "parameters": {"numberOfReplicas": scalar_string(n)},
        });
        let (name, key) = ("persistence.defaultClassReplicaCount", "defaultClassReplicaCount");
        targets.push(base("HelmValues", name.into(), Some(key), STORAGE_CLASSES, object));
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
