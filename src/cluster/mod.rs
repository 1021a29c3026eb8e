//! The cluster view: one read-only, indexed picture of the objects policy decisions read.
//!
//! A [`ClusterView`] is filled either from a snapshot file ([`snapshot`]) or from watch caches
//! ([`watch`]); the policy code only asks it questions. Every question is answered from a
//! map or a secondary index, never by scanning all objects of a kind.

pub mod client;
pub mod confirm;
pub mod draining;
mod freshness;
pub mod index;
mod kinds;
pub mod meta;
pub mod name;
pub mod nameset;
pub mod objects;
pub mod probe;
pub mod proof;
mod proven;
mod queries;
pub mod readset;
pub mod relist;
pub mod snapshot;
mod stamp;
pub mod stats;
pub mod watch;
pub mod watched;
mod workloads;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use nameset::{add, del, Index};
use std::time::SystemTime;

pub use draining::Draining;
pub use freshness::{Freshness, Source};
pub use index::ViewIndex;
pub use objects::*;
pub use proven::Unproven;
pub use relist::Relist;

/// Progress of one rebuild as first seen at a given value, for stall detection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgressMark {
    pub progress: i64,
    /// When the view first saw the rebuild at this progress value.
    pub since: SystemTime,
}

/// The read-only cluster picture with secondary indexes.
#[derive(Clone, Debug)]
pub struct ClusterView {
    nodes: Kind<Node>,
    /// Namespace -> name -> pod.
    pods: HashMap<Name, Kind<Pod>>,
    /// How many of `pods` are instance-manager pods.
    instance_manager_pods: usize,
    storage_classes: Kind<StorageClass>,
    volumes: Kind<Volume>,
    replicas: Kind<Replica>,
    engines: Kind<Engine>,
    longhorn_nodes: Kind<LonghornNode>,
    settings: Kind<Setting>,
    instance_managers: Kind<InstanceManager>,
    replicas_by_node: Index,
    replicas_by_volume: Index,
    engines_by_volume: Index,
    engines_by_node: Index,
    instance_managers_by_node: Index,
    /// Replicas by `status.instanceManagerName`.
    replicas_by_instance_manager: Index,
    /// Derived state kept current with every change (e.g. the drain index).
    indexes: index::Indexes,
    /// (engine name, rebuild address) -> when its progress value was first seen.
    rebuild_marks: HashMap<(String, String), ProgressMark>,
    /// Engines whose status reports a rebuild in progress (for the stalled-rebuild metric).
    rebuilding: BTreeSet<Name>,
    source: Source,
    synced: bool,
    /// When each kind last received data.
    kind_updated: HashMap<ObjectKind, SystemTime>,
    /// When each kind last received data, on the monotonic clock ([`Freshness::monotonic_age`]).
    kind_seen: HashMap<ObjectKind, std::time::Instant>,
    /// Names of watched objects, by kind, that could not be read.
    unreadable: HashMap<ObjectKind, BTreeSet<String>>,
    /// Kinds whose watch failed and that have not been listed again since.
    failing: BTreeSet<ObjectKind>,
    /// How far each kind's watch has delivered, against the probes ([`proof`]).
    proofs: proof::Proofs,
    /// Failing kinds whose watch was only interrupted: its next BOOKMARK clears them.
    interrupted: BTreeSet<ObjectKind>,
    /// When a consistent read (a probe or a confirmation) was last answered ([`ClusterView::note_read_answered`]).
    read_answered: Option<std::time::Instant>,
}

impl ClusterView {
    /// An empty view with the given source; not yet synced. It keeps the drain index
    /// ([`crate::policy::drain::DrainIndex`]) current from the first object on.
    pub fn new(source: Source) -> Self {
        Self {
            nodes: HashMap::new(),
            pods: HashMap::new(),
            instance_manager_pods: 0,
            storage_classes: HashMap::new(),
            volumes: HashMap::new(),
            replicas: HashMap::new(),
            engines: HashMap::new(),
            longhorn_nodes: HashMap::new(),
            settings: HashMap::new(),
            instance_managers: HashMap::new(),
            replicas_by_node: Index::new(),
            replicas_by_volume: Index::new(),
            engines_by_volume: Index::new(),
            engines_by_node: Index::new(),
            instance_managers_by_node: Index::new(),
            replicas_by_instance_manager: Index::new(),
            indexes: index::Indexes(vec![Box::new(crate::policy::drain::DrainIndex::default())]),
            rebuild_marks: HashMap::new(),
            rebuilding: BTreeSet::new(),
            source,
            synced: false,
            kind_updated: HashMap::new(),
            kind_seen: HashMap::new(),
            unreadable: HashMap::new(),
            failing: BTreeSet::new(),
            proofs: proof::Proofs::default(),
            interrupted: BTreeSet::new(),
            read_answered: None,
        }
    }

    /// A synced view holding exactly `objects`, as a snapshot or confirmation read gives it.
    pub fn from_objects(source: Source, objects: impl IntoIterator<Item = Object>, now: SystemTime) -> Self {
        let mut view = Self::new(source);
        for o in objects {
            view.put(o, now);
        }
        view.flush_indexes();
        view.touch(now);
        view.mark_synced();
        view
    }

    // ---- derived indexes ----

    /// Installs a derived index, built from the view as it is now and kept current after.
    pub fn add_index(&mut self, mut index: Box<dyn ViewIndex>) {
        index.rebuild(self);
        self.indexes.0.push(index);
    }

    /// The installed index of type `T`, if any.
    pub fn index<T: ViewIndex>(&self) -> Option<&T> {
        self.indexes.0.iter().find_map(|i| i.as_any().downcast_ref::<T>())
    }

    fn notify(&mut self, f: impl Fn(&mut dyn ViewIndex, &ClusterView)) {
        if self.indexes.0.is_empty() {
            return;
        }
        let mut indexes = std::mem::take(&mut self.indexes);
        for i in &mut indexes.0 {
            f(i.as_mut(), self);
        }
        self.indexes = indexes;
    }

    pub(crate) fn flush_indexes(&mut self) {
        self.notify(|i, v| i.flush(v));
    }

    // ---- updates (used by the snapshot loader and the watchers) ----

    /// Inserts or replaces an object, keeping every index consistent. `now` dates rebuild
    /// progress changes (stall detection) and the view's freshness.
    pub fn upsert(&mut self, object: Object, now: SystemTime) {
        self.put(object, now);
        self.flush_indexes();
    }

    /// [`Self::upsert`] without flushing the derived indexes (a batch flushes once).
    pub(crate) fn put(&mut self, object: Object, now: SystemTime) {
        let kind = object.kind();
        self.put_quietly(object, now);
        self.touch_kind(kind, now);
    }

    /// [`Self::put`] without recording that the kind received data (a relist records its
    /// list's start once).
    pub(crate) fn put_quietly(&mut self, mut object: Object, now: SystemTime) {
        object.metadata_mut().resource_version = None;
        let name = object.metadata().name.clone().unwrap_or_default();
        let kind = object.kind();
        let old = self.unindex(kind, object.metadata().namespace.as_deref(), &name);
        self.clear_unreadable(kind, &name);
        match object {
            Object::Node(o) => {
                self.nodes.insert(name.clone(), o);
            }
            Object::Pod(o) => {
                let ns = o.metadata.namespace.clone().unwrap_or_default();
                self.instance_manager_pods += usize::from(o.is_instance_manager());
                self.pods.entry(ns).or_default().insert(name.clone(), o);
            }
            Object::StorageClass(o) => {
                self.storage_classes.insert(name.clone(), o);
            }
            Object::Volume(o) => {
                self.volumes.insert(name.clone(), o);
            }
            Object::Replica(o) => {
                if let Some(node) = o.node_name() {
                    add(&mut self.replicas_by_node, node, &name);
                }
                if let Some(vol) = o.volume_name() {
                    add(&mut self.replicas_by_volume, vol, &name);
                }
                if !o.status.instance_manager_name.is_empty() {
                    add(&mut self.replicas_by_instance_manager, &o.status.instance_manager_name, &name);
                }
                self.replicas.insert(name.clone(), o);
            }
            Object::Engine(o) => {
                if let Some(node) = o.node_name() {
                    add(&mut self.engines_by_node, node, &name);
                }
                if let Some(vol) = o.volume_name() {
                    add(&mut self.engines_by_volume, vol, &name);
                }
                self.track_rebuilds(&name, &o, now);
                if o.status.rebuild_status.values().any(|rs| rs.is_rebuilding) {
                    self.rebuilding.insert(name.clone());
                }
                self.engines.insert(name.clone(), o);
            }
            Object::LonghornNode(o) => {
                self.longhorn_nodes.insert(name.clone(), o);
            }
            Object::Setting(o) => {
                self.settings.insert(name.clone(), o);
            }
            Object::InstanceManager(o) => {
                if !o.spec.node_id.is_empty() {
                    add(&mut self.instance_managers_by_node, &o.spec.node_id, &name);
                }
                self.instance_managers.insert(name.clone(), o);
            }
        }
        self.notify(|i, v| i.apply(v, kind, &name, old.as_ref()));
    }

    /// Removes an object (no-op when absent), keeping every index consistent.
    pub fn remove(&mut self, kind: ObjectKind, namespace: Option<&str>, name: &str) {
        self.take(kind, namespace, name);
        self.flush_indexes();
    }

    /// [`Self::remove`] without flushing the derived indexes.
    pub(crate) fn take(&mut self, kind: ObjectKind, namespace: Option<&str>, name: &str) {
        let old = self.unindex(kind, namespace, name);
        self.clear_unreadable(kind, name);
        if kind == ObjectKind::Engine {
            self.rebuild_marks.retain(|(e, _), _| e != name);
        }
        if let Some(old) = old {
            self.notify(|i, v| i.delete(v, &old));
        }
    }

    /// Takes an object out of its map and the secondary indexes, returning it.
    fn unindex(&mut self, kind: ObjectKind, namespace: Option<&str>, name: &str) -> Option<Object> {
        Some(match kind {
            ObjectKind::Node => Object::Node(self.nodes.remove(name)?),
            ObjectKind::Pod => {
                let ns = namespace.unwrap_or_default();
                let pods = self.pods.get_mut(ns)?;
                let old = pods.remove(name)?;
                if pods.is_empty() {
                    self.pods.remove(ns);
                }
                self.instance_manager_pods -= usize::from(old.is_instance_manager());
                Object::Pod(old)
            }
            ObjectKind::StorageClass => Object::StorageClass(self.storage_classes.remove(name)?),
            ObjectKind::Volume => Object::Volume(self.volumes.remove(name)?),
            ObjectKind::Replica => {
                let old = self.replicas.remove(name)?;
                if let Some(node) = old.node() {
                    del(&mut self.replicas_by_node, node, name);
                }
                if let Some(vol) = old.volume() {
                    del(&mut self.replicas_by_volume, vol, name);
                }
                del(&mut self.replicas_by_instance_manager, &old.status.instance_manager_name, name);
                Object::Replica(old)
            }
            ObjectKind::Engine => {
                let old = self.engines.remove(name)?;
                self.rebuilding.remove(name);
                if let Some(node) = old.node() {
                    del(&mut self.engines_by_node, node, name);
                }
                if let Some(vol) = old.volume() {
                    del(&mut self.engines_by_volume, vol, name);
                }
                Object::Engine(old)
            }
            ObjectKind::LonghornNode => Object::LonghornNode(self.longhorn_nodes.remove(name)?),
            ObjectKind::Setting => Object::Setting(self.settings.remove(name)?),
            ObjectKind::InstanceManager => {
                let old = self.instance_managers.remove(name)?;
                del(&mut self.instance_managers_by_node, &old.spec.node_id, name);
                Object::InstanceManager(old)
            }
        })
    }

    fn track_rebuilds(&mut self, engine: &str, new: &Engine, now: SystemTime) {
        self.rebuild_marks.retain(|(e, addr), _| e != engine || new.status.rebuild_status.contains_key(addr));
        for (addr, rs) in &new.status.rebuild_status {
            let key = (engine.to_string(), addr.to_string());
            match self.rebuild_marks.get(&key) {
                Some(mark) if mark.progress == rs.progress => {}
                _ => {
                    self.rebuild_marks.insert(key, ProgressMark { progress: rs.progress, since: now });
                }
            }
        }
    }
}

/// The objects of one kind by name, each in the box it arrived in (a map of large inline
/// values would waste most of its slots' space).
type Kind<T> = HashMap<Name, Box<T>>;

/// A shared, updatable view: watchers write, request handlers read.
#[derive(Clone, Debug)]
pub struct SharedView(Arc<RwLock<ClusterView>>);

impl SharedView {
    pub fn new(view: ClusterView) -> Self {
        Self(Arc::new(RwLock::new(view)))
    }

    /// A read guard; hold it only for one decision.
    pub fn read(&self) -> RwLockReadGuard<'_, ClusterView> {
        self.0.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Applies a change under the write lock.
    pub fn update<R>(&self, f: impl FnOnce(&mut ClusterView) -> R) -> R {
        let mut guard = self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }
}
