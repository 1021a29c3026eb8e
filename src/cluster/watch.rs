//! Filling the cluster view from live watches (kube reflectors).
//!
//! One `kube::runtime::watcher` per kind (core Nodes, Pods in `longhorn-system`,
//! StorageClasses, and the Longhorn kinds in `longhorn-system`), read as `DynamicObject`s and
//! converted to the lean typed objects. A (re)list is buffered and applied in one step when it
//! completes, so the view never shows half a list. The view is marked synced once every kind
//! finished its first list. Watch errors are logged and retried with the watcher's default
//! backoff; while no data arrives the view's age keeps growing, which is how the policy tells
//! stale from fresh.

use std::collections::BTreeSet;
use std::time::SystemTime;

use futures::{stream, StreamExt as _};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt as _;

use super::{Object, ObjectKind, SharedView, LONGHORN_NAMESPACE};

/// One watched kind: what to ask the API server for and where.
#[derive(Clone, Debug)]
pub struct Target {
    pub kind: ObjectKind,
    pub resource: ApiResource,
    /// `None` for cluster-wide.
    pub namespace: Option<&'static str>,
}

/// Every kind the view holds.
pub fn targets() -> Vec<Target> {
    let core = |kind: ObjectKind, group: &str, version: &str, k: &str, plural: &str, ns| Target {
        kind,
        resource: ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, k), plural),
        namespace: ns,
    };
    let lh = |kind, k: &str, plural: &str| {
        core(kind, "longhorn.io", "v1beta2", k, plural, Some(LONGHORN_NAMESPACE))
    };
    vec![
        core(ObjectKind::Node, "", "v1", "Node", "nodes", None),
        core(ObjectKind::Pod, "", "v1", "Pod", "pods", Some(LONGHORN_NAMESPACE)),
        core(ObjectKind::StorageClass, "storage.k8s.io", "v1", "StorageClass", "storageclasses", None),
        lh(ObjectKind::Volume, "Volume", "volumes"),
        lh(ObjectKind::Replica, "Replica", "replicas"),
        lh(ObjectKind::Engine, "Engine", "engines"),
        lh(ObjectKind::LonghornNode, "Node", "nodes"),
        lh(ObjectKind::Setting, "Setting", "settings"),
        lh(ObjectKind::InstanceManager, "InstanceManager", "instancemanagers"),
    ]
}

/// Runs every watch until the task is dropped, applying events to `view`.
pub async fn run(client: kube::Client, view: SharedView) {
    let all = targets();
    let total = all.len();
    let streams = all.into_iter().map(|t| {
        let api: Api<DynamicObject> = match t.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &t.resource),
            None => Api::all_with(client.clone(), &t.resource),
        };
        let kind = t.kind;
        watcher::watcher(api, watcher::Config::default()).default_backoff().map(move |ev| (kind, ev)).boxed()
    });
    let mut merged = stream::select_all(streams);
    let mut pending: std::collections::HashMap<ObjectKind, Vec<Object>> = Default::default();
    let mut listed: BTreeSet<ObjectKind> = BTreeSet::new();
    while let Some((kind, event)) = merged.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(
                    kind = kind.display(),
                    error = %e,
                    "watch failed; retrying with backoff (the cluster view ages until it recovers)"
                );
                continue;
            }
        };
        let now = SystemTime::now();
        match event {
            Event::Init => {
                pending.insert(kind, Vec::new());
            }
            Event::InitApply(o) => {
                if let Some(obj) = convert(kind, o) {
                    pending.entry(kind).or_default().push(obj);
                }
            }
            Event::InitDone => {
                let objects = pending.remove(&kind).unwrap_or_default();
                let n = objects.len();
                let first = listed.insert(kind);
                let all_listed = listed.len() == total;
                view.update(|v| {
                    v.replace_kind(kind, objects, now);
                    if first && all_listed {
                        v.mark_synced(now);
                    }
                });
                tracing::info!(kind = kind.display(), objects = n, "listed");
                if first && all_listed {
                    tracing::info!("cluster view synced: every watched kind is listed");
                }
            }
            Event::Apply(o) => {
                if let Some(obj) = convert(kind, o) {
                    view.update(|v| v.upsert(obj, now));
                }
            }
            Event::Delete(o) => {
                let ns = o.metadata.namespace.clone();
                let name = o.metadata.name.clone().unwrap_or_default();
                view.update(|v| {
                    v.remove(kind, ns.as_deref(), &name);
                    v.touch(now);
                });
            }
        }
    }
}

/// The typed object of a watched `DynamicObject`; `None` (with a log line) when it does not fit.
fn convert(kind: ObjectKind, o: DynamicObject) -> Option<Object> {
    let name = o.metadata.name.clone().unwrap_or_default();
    let value = match serde_json::to_value(&o) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(kind = kind.display(), name, error = %e, "cannot read watched object; skipped");
            return None;
        }
    };
    match Object::from_value(kind, value) {
        Ok(obj) => Some(obj),
        Err(e) => {
            tracing::warn!(kind = kind.display(), name, error = %e, "watched object does not parse; skipped");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ClusterView, Source};
    use serde_json::json;

    fn replica(name: &str, node: &str) -> Object {
        Object::from_value(
            ObjectKind::Replica,
            json!({"metadata": {"name": name, "namespace": "longhorn-system"},
                   "spec": {"nodeID": node, "volumeName": "v"}}),
        )
        .unwrap()
    }

    #[test]
    fn a_relist_replaces_the_kind_and_keeps_indexes_consistent() {
        let now = SystemTime::now();
        let mut v = ClusterView::new(Source::Watch);
        v.replace_kind(ObjectKind::Replica, vec![replica("r1", "n1"), replica("r2", "n2")], now);
        assert_eq!(v.replicas_on_node("n1").count(), 1);
        v.replace_kind(ObjectKind::Replica, vec![replica("r2", "n1"), replica("r3", "n3")], now);
        assert!(v.replica("r1").is_none());
        assert_eq!(
            v.replicas_on_node("n1").map(|r| r.metadata.name.clone().unwrap()).collect::<Vec<_>>(),
            ["r2"]
        );
        assert_eq!(v.replicas_on_node("n2").count(), 0);
        assert_eq!(v.replicas_of_volume("v").count(), 2);
        assert!(!v.freshness().synced);
    }

    #[test]
    fn every_kind_is_watched_once() {
        let kinds: BTreeSet<ObjectKind> = targets().iter().map(|t| t.kind).collect();
        assert_eq!(kinds.len(), targets().len());
        assert_eq!(kinds.len(), ClusterView::new(Source::Watch).counts().len());
    }
}
