//! Filling the cluster view from live watches (kube reflectors).
//!
//! One `kube::runtime::watcher` per kind (core Nodes, Pods in `longhorn-system`,
//! StorageClasses, and the Longhorn kinds in `longhorn-system`), each object parsed once from
//! the API's JSON straight into its lean type ([`Watched`]). A (re)list is buffered and
//! applied in one step when it completes, so the view never shows half a list; the buffer
//! keeps only the keys of objects the view already holds unchanged ([`Relist`]), so a relist
//! never holds a second full copy of a kind. The view is marked synced once every kind
//! finished its first list. Watch errors are logged and retried with the watcher's default
//! backoff; while no data arrives the view's age keeps growing, which is how the policy tells
//! stale from fresh.

use std::collections::BTreeSet;
use std::time::SystemTime;

use std::borrow::Cow;

use futures::stream::BoxStream;
use futures::{stream, StreamExt as _};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource};
use kube::core::{DynamicResourceScope, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt as _;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::relist::Relist;
use super::{
    Engine, InstanceManager, LonghornNode, Meta, Node, Object, ObjectKind, Pod, Replica, Setting, SharedView,
    StorageClass, Volume,
};

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

/// A lean object type a watch parses straight from the API's JSON.
pub trait Lean: DeserializeOwned + Clone + std::fmt::Debug + Send + Sync + 'static {
    fn meta_mut(&mut self) -> &mut Meta;
    fn into_object(self) -> Object;
}

macro_rules! lean {
    ($($t:ident),*) => {$(
        impl Lean for $t {
            fn meta_mut(&mut self) -> &mut Meta {
                &mut self.metadata
            }
            fn into_object(self) -> Object {
                Object::$t(Box::new(self))
            }
        }
    )*};
}
lean!(Node, Pod, StorageClass, Volume, Replica, Engine, LonghornNode, Setting, InstanceManager);

/// One watched object, parsed once from the API's JSON into its lean type `T`. The kube
/// metadata keeps only what the watcher reads (name, namespace, resourceVersion). An object
/// that does not fit the model keeps only its metadata and the parse error, so one odd
/// object never fails its whole list.
#[derive(Clone, Debug)]
pub struct Watched<T> {
    meta: ObjectMeta,
    object: Result<T, String>,
}

/// What is read of an object that does not fit its model.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct MetaOnly {
    metadata: Meta,
}

fn kube_meta(m: &mut Meta) -> ObjectMeta {
    ObjectMeta {
        name: m.name.as_deref().map(str::to_string),
        namespace: m.namespace.as_deref().map(str::to_string),
        resource_version: m.resource_version.take().map(String::from),
        ..ObjectMeta::default()
    }
}

/// Reads the object as raw JSON text first, so that an object that does not fit still yields
/// its name. The API server writes a watch event's `type` before its `object` (Go struct field
/// order), which lets serde hand the object over unbuffered; an event with `object` first
/// cannot be read this way and fails the watch, which then retries and the view ages (allows
/// are confirmed by reads meanwhile): never a silent allow.
impl<'de, T: Lean> Deserialize<'de> for Watched<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: Box<RawValue> = Deserialize::deserialize(d)?;
        match serde_json::from_str::<T>(raw.get()) {
            Ok(mut t) => Ok(Self { meta: kube_meta(t.meta_mut()), object: Ok(t) }),
            Err(e) => {
                let mut m: MetaOnly = serde_json::from_str(raw.get()).unwrap_or_default();
                Ok(Self { meta: kube_meta(&mut m.metadata), object: Err(e.to_string()) })
            }
        }
    }
}

impl<T> kube::Resource for Watched<T> {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// A watched object reduced to what the view applies: its key and its lean object, or the
/// reason it could not be read.
#[derive(Debug)]
struct Item {
    namespace: Option<String>,
    name: String,
    object: Result<Object, String>,
}

impl<T: Lean> From<Watched<T>> for Item {
    fn from(w: Watched<T>) -> Self {
        Self {
            namespace: w.meta.namespace,
            name: w.meta.name.unwrap_or_default(),
            object: w.object.map(Lean::into_object),
        }
    }
}

type KindEvents = BoxStream<'static, (ObjectKind, Result<Event<Item>, watcher::Error>)>;

/// The event stream of one kind, each object parsed once into the lean type `T`.
fn watch_kind<T: Lean>(client: &kube::Client, t: &Target) -> KindEvents {
    let api: Api<Watched<T>> = match t.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &t.resource),
        None => Api::all_with(client.clone(), &t.resource),
    };
    let kind = t.kind;
    watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .map(move |ev| {
            let ev = ev.map(|e| match e {
                Event::Init => Event::Init,
                Event::InitApply(o) => Event::InitApply(Item::from(o)),
                Event::InitDone => Event::InitDone,
                Event::Apply(o) => Event::Apply(Item::from(o)),
                Event::Delete(o) => Event::Delete(Item::from(o)),
            });
            (kind, ev)
        })
        .boxed()
}

fn stream_for(client: &kube::Client, t: &Target) -> KindEvents {
    match t.kind {
        ObjectKind::Node => watch_kind::<Node>(client, t),
        ObjectKind::Pod => watch_kind::<Pod>(client, t),
        ObjectKind::StorageClass => watch_kind::<StorageClass>(client, t),
        ObjectKind::Volume => watch_kind::<Volume>(client, t),
        ObjectKind::Replica => watch_kind::<Replica>(client, t),
        ObjectKind::Engine => watch_kind::<Engine>(client, t),
        ObjectKind::LonghornNode => watch_kind::<LonghornNode>(client, t),
        ObjectKind::Setting => watch_kind::<Setting>(client, t),
        ObjectKind::InstanceManager => watch_kind::<InstanceManager>(client, t),
    }
}

/// Runs every watch until the task is dropped, applying events to `view`.
pub async fn run(client: kube::Client, view: SharedView) {
    let all = targets();
    let total = all.len();
    let mut merged = stream::select_all(all.iter().map(|t| stream_for(&client, t)));
    // Per kind being (re)listed: the listed keys and changed objects, and the unreadable names.
    let mut pending: std::collections::HashMap<ObjectKind, (Relist, Vec<String>)> = Default::default();
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
            Event::InitApply(item) => {
                let (relist, unreadable) = pending.entry(kind).or_default();
                match readable(kind, item) {
                    Ok(obj) => relist.push(&view.read(), obj),
                    Err(name) => unreadable.push(name),
                }
            }
            Event::InitDone => {
                let (relist, unreadable) = pending.remove(&kind).unwrap_or_default();
                let (n, changed) = (relist.keep.len(), relist.changed.len());
                let first = listed.insert(kind);
                let all_listed = listed.len() == total;
                view.update(|v| {
                    v.apply_relist(kind, relist, now);
                    for name in &unreadable {
                        v.note_unreadable(kind, name);
                    }
                    if first && all_listed {
                        v.mark_synced(now);
                    }
                });
                tracing::info!(kind = kind.display(), objects = n, changed, "listed");
                if first && all_listed {
                    tracing::info!("cluster view synced: every watched kind is listed");
                }
            }
            Event::Apply(item) => match readable(kind, item) {
                Ok(obj) => view.update(|v| v.upsert(obj, now)),
                // Keep the last readable version; allows are confirmed until this clears.
                Err(name) => view.update(|v| {
                    v.note_unreadable(kind, &name);
                    v.touch_kind(kind, now);
                }),
            },
            Event::Delete(item) => {
                view.update(|v| {
                    v.remove(kind, item.namespace.as_deref(), &item.name);
                    v.touch_kind(kind, now);
                });
            }
        }
    }
}

/// The lean object of a watched item, or its name (after a log line) when it does not fit
/// the model.
fn readable(kind: ObjectKind, item: Item) -> Result<Object, String> {
    item.object.map_err(|error| {
        tracing::warn!(
            kind = kind.display(),
            name = item.name,
            error,
            "watched object does not parse; drain allows are confirmed with the API server until it does"
        );
        item.name
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ClusterView, Name, Source};
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
            v.replicas_on_node("n1").map(|r| r.metadata.name.clone().unwrap()).collect::<Vec<Name>>(),
            ["r2"]
        );
        assert_eq!(v.replicas_on_node("n2").count(), 0);
        assert_eq!(v.replicas_of_volume("v").count(), 2);
        assert!(!v.freshness().synced);
    }

    #[test]
    fn a_relist_buffers_only_what_changed_and_ends_as_a_full_replace() {
        let now = SystemTime::now();
        let mut v = ClusterView::new(Source::Watch);
        v.replace_kind(ObjectKind::Replica, vec![replica("r1", "n1"), replica("r2", "n2")], now);
        let mut relist = Relist::default();
        for o in [replica("r2", "n2"), replica("r3", "n1"), replica("r4", "n4")] {
            relist.push(&v, o);
        }
        relist.push(&v, replica("r3", "n3"));
        assert_eq!(relist.keep.len(), 3);
        let changed: Vec<&str> = relist.changed.iter().map(Object::name).collect();
        assert_eq!(changed, ["r3", "r4", "r3"]);
        v.apply_relist(ObjectKind::Replica, relist, now);
        let mut want = ClusterView::new(Source::Watch);
        want.replace_kind(
            ObjectKind::Replica,
            vec![replica("r2", "n2"), replica("r3", "n3"), replica("r4", "n4")],
            now,
        );
        for name in ["r1", "r2", "r3", "r4"] {
            assert_eq!(v.replica(name), want.replica(name), "{name}");
        }
        for node in ["n1", "n2", "n3", "n4"] {
            assert_eq!(v.replica_count_on_node(node), want.replica_count_on_node(node), "{node}");
        }
        let mut changed_rv = replica("r2", "n2");
        changed_rv.metadata_mut().resource_version = Some("7".into());
        assert!(!v.holds(&changed_rv) && v.holds(&replica("r2", "n2")));
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
