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

use super::{Object, ObjectKind, SharedView};

/// One watched kind: what to ask the API server for and where.
#[derive(Clone, Debug)]
pub struct Target {
    pub kind: ObjectKind,
    pub resource: ApiResource,
    /// `None` for cluster-wide.
    pub namespace: Option<&'static str>,
}

/// Every kind the view holds, as the read-set declares it.
pub fn targets() -> Vec<Target> {
    super::readset::RESOURCES
        .iter()
        .map(|r| Target {
            kind: r.kind,
            resource: ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(r.group, r.version, r.type_name),
                r.plural,
            ),
            namespace: r.namespace,
        })
        .collect()
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
    let mut pending: std::collections::HashMap<ObjectKind, (Vec<Object>, Vec<String>)> = Default::default();
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
                pending.insert(kind, Default::default());
            }
            Event::InitApply(o) => {
                let (objects, unreadable) = pending.entry(kind).or_default();
                match convert(kind, o) {
                    Ok(obj) => objects.push(obj),
                    Err(name) => unreadable.push(name),
                }
            }
            Event::InitDone => {
                let (objects, unreadable) = pending.remove(&kind).unwrap_or_default();
                let n = objects.len();
                let first = listed.insert(kind);
                let all_listed = listed.len() == total;
                view.update(|v| {
                    v.replace_kind(kind, objects, now);
                    for name in &unreadable {
                        v.note_unreadable(kind, name);
                    }
                    if first && all_listed {
                        v.mark_synced(now);
                    }
                });
                tracing::info!(kind = kind.display(), objects = n, "listed");
                if first && all_listed {
                    tracing::info!("cluster view synced: every watched kind is listed");
                }
            }
            Event::Apply(o) => match convert(kind, o) {
                Ok(obj) => view.update(|v| v.upsert(obj, now)),
                // Keep the last readable version; allows are confirmed until this clears.
                Err(name) => view.update(|v| {
                    v.note_unreadable(kind, &name);
                    v.touch_kind(kind, now);
                }),
            },
            Event::Delete(o) => {
                let ns = o.metadata.namespace.clone();
                let name = o.metadata.name.clone().unwrap_or_default();
                view.update(|v| {
                    v.remove(kind, ns.as_deref(), &name);
                    v.touch_kind(kind, now);
                });
            }
        }
    }
}

/// The typed object of a watched `DynamicObject`, or its name (after a log line) when it
/// does not fit the model.
fn convert(kind: ObjectKind, o: DynamicObject) -> Result<Object, String> {
    let name = o.metadata.name.clone().unwrap_or_default();
    let value = serde_json::to_value(&o).map_err(|e| {
        tracing::warn!(kind = kind.display(), name, error = %e, "cannot read watched object");
        name.clone()
    })?;
    Object::from_value(kind, value).map_err(|e| {
        tracing::warn!(
            kind = kind.display(),
            name,
            error = %e,
            "watched object does not parse; drain allows are confirmed with the API server until it does"
        );
        name.clone()
    })
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
    fn unreadable_objects_make_the_view_untrusted_until_read_again() {
        let now = SystemTime::now();
        let mut v = ClusterView::new(Source::Watch);
        for kind in ObjectKind::ALL {
            v.replace_kind(kind, Vec::new(), now);
        }
        v.mark_synced(now);
        let bound = std::time::Duration::from_secs(5);
        assert!(v.freshness().is_fresh(now, bound));
        v.note_unreadable(ObjectKind::Replica, "r1");
        assert_eq!(v.freshness().unreadable, ["replicas.longhorn.io/r1"]);
        assert!(!v.freshness().is_fresh(now, bound));
        v.upsert(replica("r1", "n1"), now);
        assert!(v.freshness().is_fresh(now, bound));
        v.note_unreadable(ObjectKind::Replica, "r2");
        v.remove(ObjectKind::Replica, Some("longhorn-system"), "r2");
        assert!(v.freshness().is_fresh(now, bound));
    }

    #[test]
    fn the_view_is_as_old_as_its_least_recently_updated_kind() {
        let t0 = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let mut v = ClusterView::new(Source::Watch);
        for kind in ObjectKind::ALL {
            v.replace_kind(kind, Vec::new(), t0);
        }
        v.mark_synced(t0);
        // Every kind but Replica keeps receiving events; the replica watch is broken.
        let later = t0 + std::time::Duration::from_secs(60);
        for kind in ObjectKind::ALL.into_iter().filter(|k| *k != ObjectKind::Replica) {
            v.touch_kind(kind, later);
        }
        assert_eq!(v.freshness().age(later), Some(std::time::Duration::from_secs(60)));
        assert!(!v.freshness().is_fresh(later, std::time::Duration::from_secs(5)));
        v.replace_kind(ObjectKind::Replica, vec![replica("r1", "n1")], later);
        assert!(v.freshness().is_fresh(later, std::time::Duration::from_secs(5)));
    }

    #[test]
    fn every_kind_is_watched_once() {
        let kinds: BTreeSet<ObjectKind> = targets().iter().map(|t| t.kind).collect();
        assert_eq!(kinds.len(), targets().len());
        assert_eq!(kinds.len(), ClusterView::new(Source::Watch).counts().len());
    }
}
