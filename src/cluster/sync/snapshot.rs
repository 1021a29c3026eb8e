//! Loading a [`ClusterView`] from a snapshot file: a Kubernetes `List` in JSON or YAML, or
//! multi-document YAML, exactly as `kubectl get ... -o json|yaml` prints it.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use super::{ClusterView, Object, ObjectKind, Source};

mod items;
pub use items::{items_of, ItemsError};

/// Why a snapshot could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not valid JSON or YAML: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{path}: {item}: {message}")]
    Item { path: PathBuf, item: String, message: String },
    /// Nothing in the file is an object longhorn-guard reads: an empty view would allow every
    /// drain, so it is refused (a `kubectl get ... > file` that failed leaves such a file).
    #[error("{path}: holds no object longhorn-guard reads (Nodes, Pods, StorageClasses, Longhorn objects): is it empty, or not a cluster snapshot?")]
    Empty { path: PathBuf },
    /// Kubernetes objects but not one Longhorn object: every drain would look safe, so it is
    /// refused (the `longhorn-system` half of a snapshot recipe that failed leaves such a file).
    #[error("{path}: holds no Longhorn object (longhorn.io Volumes, Replicas, Engines, InstanceManagers, Nodes, Settings), so every drain would look safe: was longhorn-system read? (`kubectl -n longhorn-system get volumes.longhorn.io,...` may have failed)")]
    NoLonghorn { path: PathBuf },
}

/// Refuses snapshot contents a decision cannot rest on: nothing longhorn-guard reads, or no
/// Longhorn object at all (a cluster with Longhorn installed always has its Settings, Nodes and
/// instance managers).
pub fn check_contents(path: &Path, objects: &[Object]) -> Result<(), SnapshotError> {
    if objects.is_empty() {
        return Err(SnapshotError::Empty { path: path.to_path_buf() });
    }
    if !objects.iter().any(|o| o.kind().is_longhorn()) {
        return Err(SnapshotError::NoLonghorn { path: path.to_path_buf() });
    }
    Ok(())
}

/// Reads a snapshot file into a synced view whose source is that file.
pub fn load(path: &Path) -> Result<ClusterView, SnapshotError> {
    load_observing(path, || (), |_, _| {}).map(|(view, ())| view)
}

/// [`load`], showing `observe` every item, with a state of its own, before it is read into the
/// view (`serve --state` takes the `check cluster` inventory from the same pass). The state
/// starts over from `init()` whenever the reading does (a JSON document that turns out not to
/// be one List is read again as YAML documents), so no item is counted twice. The view's rules
/// are unchanged: an item the view cannot read fails the load.
pub fn load_observing<S>(
    path: &Path,
    init: impl Fn() -> S,
    observe: impl FnMut(&mut S, &Value),
) -> Result<(ClusterView, S), SnapshotError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| SnapshotError::Read { path: path.to_path_buf(), source })?;
    parse_observing(&text, path, init, observe)
}

/// Parses snapshot text (`path` only names the source in messages and the view).
pub fn parse(text: &str, path: &Path) -> Result<ClusterView, SnapshotError> {
    parse_observing(text, path, || (), |_, _| {}).map(|(view, ())| view)
}

fn parse_observing<S>(
    text: &str,
    path: &Path,
    init: impl Fn() -> S,
    mut observe: impl FnMut(&mut S, &Value),
) -> Result<(ClusterView, S), SnapshotError> {
    let (objects, state) = items_of(
        text,
        || (Vec::new(), init()),
        |(objects, state), label, item| {
            observe(state, &item);
            if let Some(o) = to_object(item, &label)? {
                objects.push(o);
            }
            Ok(())
        },
    )
    .map_err(|e| SnapshotError::from_items(path, e))?;
    check_contents(path, &objects)?;
    let view =
        ClusterView::from_objects(Source::Snapshot(path.display().to_string()), objects, SystemTime::now());
    tracing::debug!(path = %path.display(), counts = ?view.counts(), "loaded cluster snapshot");
    Ok((view, state))
}

impl SnapshotError {
    /// The error for `path` when its items could not all be read.
    pub fn from_items(path: &Path, e: ItemsError) -> Self {
        match e {
            ItemsError::Syntax(message) => Self::Syntax { path: path.to_path_buf(), message },
            ItemsError::Item { label, message } => {
                Self::Item { path: path.to_path_buf(), item: label, message }
            }
        }
    }
}

/// Splits text into JSON values: one JSON document, or one or more YAML documents.
/// Empty YAML documents (a bare `---`) are skipped.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, String> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Ok(v) = serde_json::from_str::<Value>(text) {
            return Ok(vec![v]);
        }
    }
    let docs: Vec<Value> = crate::yaml::from_multiple(text).map_err(|e| crate::yaml::message(&e))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Expands `List`s (`kind: List` or any `*List` with `items`) into their items, labelling
/// each for error messages.
pub(crate) fn flatten(doc: Value, label: &str, out: &mut Vec<(String, Value)>) {
    let is_list = doc.get("items").is_some_and(Value::is_array)
        && doc.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"));
    if is_list {
        if let Value::Object(mut map) = doc {
            if let Some(Value::Array(items)) = map.remove("items") {
                for (i, item) in items.into_iter().enumerate() {
                    flatten(item, &format!("{label}, item {i}"), out);
                }
            }
        }
    } else {
        out.push((label.to_string(), doc));
    }
}

/// Checks that a snapshot item is a Kubernetes object: a map with `apiVersion` and `kind`.
pub fn check_item(item: &Value) -> Result<(), String> {
    if !item.is_object() {
        return Err(format!("expected an object, found {}", crate::yaml::json_type(item)));
    }
    let has = |k: &str| item.get(k).and_then(Value::as_str).is_some_and(|s| !s.is_empty());
    if !has("apiVersion") || !has("kind") {
        let name = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("<no name>");
        return Err(format!("{name}: missing apiVersion or kind"));
    }
    Ok(())
}

/// Refuses an item of a kind a decision reads written at a version it cannot read: skipping it
/// could turn a denial into an allow (a snapshot without its replicas).
pub fn check_version(item: &Value) -> Result<(), String> {
    let api_version = item.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = item.get("kind").and_then(Value::as_str).unwrap_or_default();
    if ObjectKind::from_type(api_version, kind).is_some() {
        return Ok(());
    }
    let Some(read) = super::readset::read_version_of(api_version, kind) else {
        return Ok(());
    };
    let name = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("<no name>");
    Err(format!(
        "{kind} {name} is {api_version}; longhorn-guard reads {kind} as {read} \
         (what `kubectl get -o yaml` prints from a cluster that serves it)"
    ))
}

/// Converts one item; `Ok(None)` for kinds longhorn-guard does not use.
fn to_object(item: Value, label: &str) -> Result<Option<Object>, String> {
    check_item(&item)?;
    let api_version = item.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    let kind_name = item.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    let name = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("<no name>").to_string();
    let Some(kind) = ObjectKind::from_type(&api_version, &kind_name) else {
        check_version(&item)?;
        if api_version == super::LONGHORN_API_VERSION
            && super::readset::CHECK_ONLY_KINDS.contains(&kind_name.as_str())
        {
            // Read by `check cluster`; a snapshot may hold 100,000 of them.
            return Ok(None);
        }
        tracing::info!(
            item = label,
            api_version,
            kind = kind_name,
            name,
            "skipping a kind the cluster view does not use"
        );
        return Ok(None);
    };
    Object::from_value(kind, item).map(Some).map_err(|e| format!("{kind_name} {name} ({api_version}): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observer_sees_each_item_once_when_json_is_read_again_as_yaml() {
        // A JSON List followed by a second document: streamed as one List first, then read
        // again as YAML documents. The observer's count starts over with it.
        let list = r#"{"apiVersion":"v1","kind":"List","items":[
            {"apiVersion":"longhorn.io/v1beta2","kind":"Volume","metadata":{"name":"v1","namespace":"longhorn-system"}},
            {"apiVersion":"longhorn.io/v1beta2","kind":"Volume","metadata":{"name":"v2","namespace":"longhorn-system"}}]}"#;
        let text = format!("{list}\n---\n{list}\n");
        let (_, seen) = parse_observing(&text, Path::new("t"), || 0, |n, _| *n += 1).unwrap();
        assert_eq!(seen, 4);
        let (_, seen) = parse_observing(list, Path::new("t"), || 0, |n, _| *n += 1).unwrap();
        assert_eq!(seen, 2);
    }

    #[test]
    fn a_core_kind_at_another_version_is_an_error_not_skipped() {
        // Longhorn kinds: it/check_cluster a_kind_the_drain_reads_at_another_version_refuses_the_snapshot.
        let pod = r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v2","kind":"Pod","metadata":{"name":"p"}}]}"#;
        let e = parse(pod, Path::new("t")).unwrap_err().to_string();
        assert!(e.contains("Pod p is v2; longhorn-guard reads Pod as v1"), "{e}");
    }

    #[test]
    fn list_and_multi_document_yaml_give_the_same_objects() {
        let list = r#"{"apiVersion":"v1","kind":"List","items":[
            {"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"spec":{"unschedulable":true}},
            {"apiVersion":"longhorn.io/v1beta2","kind":"Node","metadata":{"name":"n1","namespace":"longhorn-system"}},
            {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"skipped"}}]}"#;
        let yaml = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nspec:\n  unschedulable: true\n---\n\
                    apiVersion: longhorn.io/v1beta2\nkind: Node\nmetadata:\n  name: n1\n  namespace: longhorn-system\n---\n";
        for text in [list, yaml] {
            let view = parse(text, Path::new("t")).unwrap();
            assert_eq!(view.is_node_cordoned("n1"), Some(true));
            assert!(view.longhorn_node("n1").is_some());
            assert!(view.freshness().synced);
        }
    }

    #[test]
    fn malformed_item_names_file_and_item() {
        let text = r#"{"kind":"List","apiVersion":"v1","items":[
            {"apiVersion":"longhorn.io/v1beta2","kind":"Volume","metadata":{"name":"v"},"spec":{"numberOfReplicas":"three"}}]}"#;
        let err = parse(text, Path::new("snap.json")).unwrap_err().to_string();
        assert!(
            err.starts_with("snap.json: document 1, item 0: Volume v (longhorn.io/v1beta2): invalid type"),
            "{err}"
        );
    }

    #[test]
    fn broken_syntax_is_an_error_not_a_panic() {
        for text in ["{\"kind\": ", "a: [b", "- x\n y: :"] {
            assert!(parse(text, Path::new("bad")).is_err(), "{text}");
        }
    }

    #[test]
    fn the_shared_snapshot_reads_the_same_as_yaml_and_as_json() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/cluster");
        let yaml = load(Path::new(&format!("{dir}/snapshot-three-nodes.yaml"))).unwrap();
        let json = load(Path::new(&format!("{dir}/snapshot-three-nodes.json"))).unwrap();
        let want = vec![
            (ObjectKind::Node, 3),
            (ObjectKind::Pod, 3),
            (ObjectKind::StorageClass, 0),
            (ObjectKind::Volume, 3),
            (ObjectKind::Replica, 6),
            (ObjectKind::Engine, 2),
            (ObjectKind::LonghornNode, 3),
            (ObjectKind::Setting, 3),
            (ObjectKind::InstanceManager, 3),
        ];
        for view in [&yaml, &json] {
            // Every other kind the view holds has no object in this snapshot.
            let others = view.counts().into_iter().filter(|(k, _)| !want.iter().any(|(w, _)| w == k));
            assert!(others.clone().all(|(_, n)| n == 0), "{:?}", others.collect::<Vec<_>>());
            let listed: Vec<_> =
                view.counts().into_iter().filter(|(k, _)| want.iter().any(|(w, _)| w == k)).collect();
            assert_eq!(listed, want);
            for (node, cordoned) in [("node-1", false), ("node-2", false), ("node-3", true)] {
                assert_eq!(view.is_node_cordoned(node), Some(cordoned), "{node}");
            }
            let mut on_2: Vec<&str> =
                view.replicas_on_node("node-2").filter_map(|r| r.metadata.name.as_deref()).collect();
            on_2.sort_unstable();
            assert_eq!(
                on_2,
                ["vol-degraded-r-7d8e9f0a", "vol-detached-r-b1c2d3e4", "vol-healthy-r-5e6f7a8b"]
            );
            assert_eq!(view.setting("default-replica-count"), Some(r#"{"v1":"3","v2":"3"}"#));
            assert_eq!(view.setting("node-drain-policy"), Some("block-if-contains-last-replica"));
            assert_eq!(view.setting("storage-network"), Some(""));
        }
        // Object by object, the two files say the same.
        for name in ["vol-degraded", "vol-detached", "vol-healthy"] {
            assert_eq!(yaml.volume(name), json.volume(name), "{name}");
            let names = |v: &ClusterView| {
                let mut n: Vec<String> =
                    v.replicas_of_volume(name).filter_map(|r| r.metadata.name.clone()).collect();
                n.sort();
                n
            };
            assert_eq!(names(&yaml), names(&json), "{name}");
        }
        for engine in ["vol-degraded-e-0", "vol-healthy-e-0"] {
            assert_eq!(yaml.engine(engine), json.engine(engine), "{engine}");
        }
    }
}
