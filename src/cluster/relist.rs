//! Applying a watch's completed (re)list to the view without holding two copies of a kind.
//!
//! A relist mostly repeats what the view already holds. The watcher asks [`ClusterView::holds`]
//! for each listed object and buffers only the key ([`Relist::keep`]) of those the view holds
//! unchanged, and the object itself only when it is new or changed ([`Relist::changed`]), so
//! the peak during a relist is the view plus one key per listed object plus the changed objects
//! (and one page of the API server's answer). [`ClusterView::apply_relist`] then removes what the
//! list no longer names and upserts the changed objects, updating derived indexes once.

use std::collections::HashSet;
use std::time::{Instant, SystemTime};

use super::{ClusterView, Meta, Name, Object, ObjectKind};

/// A (namespace, name) key; the namespace is empty for cluster-scoped kinds.
pub type Key = (Name, Name);

/// The key of an object.
pub fn key_of(meta: &Meta) -> Key {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

/// One kind's (re)list as it arrives, page by page.
#[derive(Debug, Default)]
pub struct Relist {
    /// Every listed object's key.
    pub keep: HashSet<Key>,
    /// Listed objects the view does not hold as they are.
    pub changed: Vec<Object>,
}

impl Relist {
    /// Adds one listed object, keeping it only when `view` does not already hold it as it is.
    pub fn push(&mut self, view: &ClusterView, object: Object) {
        self.keep.insert(key_of(object.metadata()));
        if !view.holds(&object) {
            self.changed.push(object);
        }
    }
}

impl ClusterView {
    /// True when the view holds exactly this object (as the view stores it: without a
    /// resourceVersion).
    pub fn holds(&self, object: &Object) -> bool {
        if object.metadata().resource_version.is_some() {
            return false;
        }
        let name = object.name();
        match object {
            Object::Node(o) => self.nodes.get(name).is_some_and(|v| v == o),
            Object::Pod(o) => {
                self.pod(o.metadata.namespace.as_deref().unwrap_or_default(), name).is_some_and(|v| v == &**o)
            }
            Object::StorageClass(o) => self.storage_classes.get(name).is_some_and(|v| v == o),
            Object::Volume(o) => self.volumes.get(name).is_some_and(|v| v == o),
            Object::Replica(o) => self.replicas.get(name).is_some_and(|v| v == o),
            Object::Engine(o) => self.engines.get(name).is_some_and(|v| v == o),
            Object::LonghornNode(o) => self.longhorn_nodes.get(name).is_some_and(|v| v == o),
            Object::Setting(o) => self.settings.get(name).is_some_and(|v| v == o),
            Object::InstanceManager(o) => self.instance_managers.get(name).is_some_and(|v| v == o),
        }
    }

    /// Replaces every object of `kind` with `objects` (a watch's completed (re)list): objects
    /// absent from the new list are removed, the rest upserted, so rebuild progress marks of
    /// engines that are still there survive the relist. Derived indexes are updated once.
    pub fn replace_kind(&mut self, kind: ObjectKind, objects: Vec<Object>, now: SystemTime) {
        let keep = objects.iter().map(|o| key_of(o.metadata())).collect();
        self.apply_relist(kind, Relist { keep, changed: objects }, now);
    }

    /// [`Self::replace_kind`] from a [`Relist`]: objects whose key it does not keep are
    /// removed, its changed objects upserted (an object the view holds unchanged needs nothing).
    pub fn apply_relist(&mut self, kind: ObjectKind, relist: Relist, now: SystemTime) {
        self.apply_relist_listed(kind, relist, now, Instant::now());
    }

    /// [`Self::apply_relist`] of a list that started at `started` (wall clock) and
    /// `started_mono` (monotonic): the kind's data is as old as the list's start, however long
    /// its pages took (every page shows the state at the first one), so that is its time.
    pub fn apply_relist_listed(
        &mut self,
        kind: ObjectKind,
        relist: Relist,
        started: SystemTime,
        started_mono: Instant,
    ) {
        let Relist { keep, changed } = relist;
        let gone: Vec<Key> = self.keys(kind).filter(|k| !keep.contains(k)).collect();
        drop(keep);
        for (ns, name) in gone {
            self.take(kind, Some(&ns), &name);
        }
        self.unreadable.remove(&kind);
        self.failing.remove(&kind);
        self.interrupted.remove(&kind);
        for o in changed {
            self.put_quietly(o, started);
        }
        self.flush_indexes();
        self.touch_kind_at(kind, started, started_mono);
    }

    /// The keys of every object of `kind` the view holds.
    fn keys(&self, kind: ObjectKind) -> Box<dyn Iterator<Item = Key> + '_> {
        let cluster = |n: &Name| (Name::default(), n.clone());
        match kind {
            ObjectKind::Pod => Box::new(
                self.pods.iter().flat_map(|(ns, pods)| pods.keys().map(move |n| (ns.clone(), n.clone()))),
            ),
            ObjectKind::Node => Box::new(self.nodes.keys().map(cluster)),
            ObjectKind::StorageClass => Box::new(self.storage_classes.keys().map(cluster)),
            ObjectKind::Volume => Box::new(self.volumes.values().map(|o| key_of(&o.metadata))),
            ObjectKind::Replica => Box::new(self.replicas.values().map(|o| key_of(&o.metadata))),
            ObjectKind::Engine => Box::new(self.engines.values().map(|o| key_of(&o.metadata))),
            ObjectKind::LonghornNode => Box::new(self.longhorn_nodes.values().map(|o| key_of(&o.metadata))),
            ObjectKind::Setting => Box::new(self.settings.values().map(|o| key_of(&o.metadata))),
            ObjectKind::InstanceManager => {
                Box::new(self.instance_managers.values().map(|o| key_of(&o.metadata)))
            }
        }
    }
}
