//! The cluster view: one read-only, indexed picture of the objects policy decisions read,
//! filled from a snapshot file or from watches; every question is answered from a map or an index.

pub mod derived;
mod freshness;
pub mod proof;
mod proven;
mod queries;
pub mod relist;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::SystemTime;

use super::model::builtin::BuiltIn;
use super::model::*;

pub use derived::{Derivations, Derived};
pub use freshness::{Freshness, Source};
pub use proven::Unproven;
pub use relist::Relist;

/// The read-only cluster picture with secondary indexes.
#[derive(Clone, Debug, Default)]
pub struct ClusterView {
    stores: Stores,
    /// The secondary indexes the view's questions are answered from.
    builtin: BuiltIn,
    /// Derived state kept current with every change, handed in by the rules that read it.
    derived: Derivations,
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
        Self { source, ..Self::default() }
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

    /// The view keeping `derived` current from now on, each told of every object the view
    /// holds as new (dated `now`), then flushed: the same state as if the view had held them
    /// from its first object on. A state of a type the view keeps already is dropped: that one
    /// is current, and a second would double every update.
    pub fn derive(mut self, mut derived: Derivations, now: SystemTime) -> Self {
        let type_of = |d: &dyn Derived| (d as &dyn std::any::Any).type_id();
        derived.0.retain(|d| !self.derived.0.iter().any(|kept| type_of(&**kept) == type_of(&**d)));
        for d in &mut derived.0 {
            for kind in ObjectKind::ALL {
                on_kind!(kind, K => {
                    for (name, o) in K::store(&self.stores).iter() {
                        d.apply(&self, K::change(Diff { name, old: None, new: Some(o) }), now);
                    }
                })
            }
            d.flush(&self);
        }
        self.derived.0.append(&mut derived.0);
        self
    }

    /// The derived state of type `T`, if the view keeps one.
    pub fn derived<T: Derived>(&self) -> Option<&T> {
        self.derived.0.iter().find_map(|i| (&**i as &dyn std::any::Any).downcast_ref::<T>())
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
        on_kind!(object.kind(), K => self.put_kind(K::unwrap(object).expect("an object of its kind"), now))
    }

    fn put_kind<K: Kind>(&mut self, object: Box<K>, now: SystemTime) {
        let name = object.meta().name.clone().unwrap_or_default();
        let namespace = object.meta().namespace.clone().unwrap_or_default();
        let old = self.unindex::<K>(&namespace, &name);
        self.clear_unreadable(K::KIND, &name);
        K::index(&mut self.builtin, &name, &object, true);
        K::store_mut(&mut self.stores).insert(namespace.clone(), name.clone(), object);
        self.notify(|d, v| {
            let new = K::store(&v.stores).get(&namespace, &name);
            d.apply(v, K::change(Diff { name: &name, old: old.as_deref(), new }), now)
        });
    }

    /// Removes an object (no-op when absent), keeping every index consistent.
    pub fn remove(&mut self, kind: ObjectKind, namespace: Option<&str>, name: &str) {
        self.take(kind, namespace, name);
        self.flush_indexes();
    }

    /// [`Self::remove`] without flushing the derived indexes.
    pub(crate) fn take(&mut self, kind: ObjectKind, namespace: Option<&str>, name: &str) {
        on_kind!(kind, K => self.take_kind::<K>(namespace.unwrap_or_default(), name))
    }

    fn take_kind<K: Kind>(&mut self, namespace: &str, name: &str) {
        let old = self.unindex::<K>(namespace, name);
        self.clear_unreadable(K::KIND, name);
        if let Some(old) = old {
            let now = SystemTime::now();
            self.notify(|d, v| d.apply(v, K::change(Diff { name, old: Some(&old), new: None }), now));
        }
    }

    /// Takes an object out of its store and the built-in indexes, returning it.
    fn unindex<K: Kind>(&mut self, namespace: &str, name: &str) -> Option<Box<K>> {
        let old = K::store_mut(&mut self.stores).remove(namespace, name)?;
        K::index(&mut self.builtin, &old.meta().name.clone().unwrap_or_default(), &old, false);
        Some(old)
    }

    /// The store of kind `K`: its objects by name (and namespace).
    pub fn objects<K: Kind>(&self) -> &Store<K> {
        K::store(&self.stores)
    }
}

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
