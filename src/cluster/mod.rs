//! The cluster view: one read-only, indexed picture of the objects policy decisions read.
//!
//! A [`ClusterView`] is filled either from a snapshot file ([`snapshot`]) or from watch caches
//! ([`watch`]); the policy code only asks it questions. Every question is answered from a
//! map or a secondary index, never by scanning all objects of a kind.

pub mod client;
pub mod derived;
pub mod draining;
mod freshness;
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

pub use derived::{Change, Derivations, Derived, Diff};
pub use draining::Draining;
pub use freshness::{Freshness, Source};
pub use kinds::{Object, ObjectKind};
pub use objects::*;
pub use proven::Unproven;
pub use relist::Relist;

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
    /// Derived state kept current with every change, handed in by the rules that read it.
    derived: Derivations,
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
    /// An empty view with the given source, keeping no derived state; not yet synced.
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
            derived: Derivations::default(),
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

    // ---- derived state ----

    /// The view keeping `derived` current from now on, each told of every object the view
    /// holds as new (dated `now`), then flushed: the same state as if the view had held them
    /// from its first object on.
    pub fn derive(mut self, derived: Derivations, now: SystemTime) -> Self {
        let mut derived = derived;
        for d in &mut derived.0 {
            self.each_object(&mut |change| d.apply(&self, change, now));
            d.flush(&self);
        }
        self.derived.0.append(&mut derived.0);
        self
    }

    /// The derived state of type `T`, if the view keeps one.
    pub fn derived<T: Derived>(&self) -> Option<&T> {
        self.derived.0.iter().find_map(|i| i.as_any().downcast_ref::<T>())
    }

    fn notify(&mut self, f: impl Fn(&mut dyn Derived, &ClusterView)) {
        if self.derived.0.is_empty() {
            return;
        }
        let mut derived = std::mem::take(&mut self.derived);
        for i in &mut derived.0 {
            f(i.as_mut(), self);
        }
        self.derived = derived;
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
        let namespace = object.metadata().namespace.clone();
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
        self.notify(|i, v| i.apply(v, v.change(kind, namespace.as_deref(), &name, old.as_ref()), now));
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
        if let Some(old) = old {
            let now = SystemTime::now();
            self.notify(|i, v| i.apply(v, v.change(kind, namespace, name, Some(&old)), now));
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

    /// The change to `kind`/`namespace`/`name` from `old` to what the view holds now.
    fn change<'a>(
        &'a self,
        kind: ObjectKind,
        namespace: Option<&str>,
        name: &'a str,
        old: Option<&'a Object>,
    ) -> Change<'a> {
        macro_rules! diff {
            ($k:ident, $new:expr) => {
                Change::$k(Diff {
                    name,
                    old: match old {
                        Some(Object::$k(o)) => Some(&**o),
                        _ => None,
                    },
                    new: $new,
                })
            };
        }
        match kind {
            ObjectKind::Node => diff!(Node, self.node(name)),
            ObjectKind::Pod => diff!(Pod, self.pod(namespace.unwrap_or_default(), name)),
            ObjectKind::StorageClass => diff!(StorageClass, self.storage_class(name)),
            ObjectKind::Volume => diff!(Volume, self.volume(name)),
            ObjectKind::Replica => diff!(Replica, self.replica(name)),
            ObjectKind::Engine => diff!(Engine, self.engine(name)),
            ObjectKind::LonghornNode => diff!(LonghornNode, self.longhorn_node(name)),
            ObjectKind::Setting => diff!(Setting, self.settings.get(name).map(AsRef::as_ref)),
            ObjectKind::InstanceManager => diff!(InstanceManager, self.instance_manager(name)),
        }
    }

    /// Every object the view holds, as a change from nothing.
    fn each_object(&self, f: &mut dyn FnMut(Change<'_>)) {
        fn new<'a, K>(name: &'a str, o: &'a K) -> Diff<'a, K> {
            Diff { name, old: None, new: Some(o) }
        }
        for (n, o) in &self.nodes {
            f(Change::Node(new(n, o)));
        }
        for (n, o) in self.pods.values().flatten() {
            f(Change::Pod(new(n, o)));
        }
        for (n, o) in &self.storage_classes {
            f(Change::StorageClass(new(n, o)));
        }
        for (n, o) in &self.volumes {
            f(Change::Volume(new(n, o)));
        }
        for (n, o) in &self.replicas {
            f(Change::Replica(new(n, o)));
        }
        for (n, o) in &self.engines {
            f(Change::Engine(new(n, o)));
        }
        for (n, o) in &self.longhorn_nodes {
            f(Change::LonghornNode(new(n, o)));
        }
        for (n, o) in &self.settings {
            f(Change::Setting(new(n, o)));
        }
        for (n, o) in &self.instance_managers {
            f(Change::InstanceManager(new(n, o)));
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
