//! Applying a watch's completed (re)list without holding two copies of a kind: the watcher
//! buffers only the keys of objects the view holds unchanged ([`Relist::keep`]) and the new or
//! changed objects ([`Relist::changed`]); [`ClusterView::apply_relist`] applies them at once.

use std::collections::HashSet;
use std::time::{Instant, SystemTime};

use super::{on_kind, ClusterView, Listed, Meta, Name, Object, ObjectKind};

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
        let namespace = object.metadata().namespace.as_deref().unwrap_or_default();
        on_kind!(object.kind(), K => K::peek(object).is_some_and(|o| self.objects::<K>().get(namespace, name) == Some(o)))
    }

    /// Replaces every object of `kind` with `objects` (a watch's completed (re)list): objects
    /// absent from the new list are removed, the rest upserted, so rebuild progress marks of
    /// engines that are still there survive the relist. Derived indexes are updated once.
    pub fn replace_kind(&mut self, kind: ObjectKind, objects: Vec<Object>, now: SystemTime) {
        let keep = objects.iter().map(|o| key_of(o.metadata())).collect();
        self.apply_relist(kind, Relist { keep, changed: objects }, now, Instant::now());
    }

    /// [`Self::replace_kind`] from a [`Relist`]: objects whose key it does not keep are
    /// removed, its changed objects upserted (an object the view holds unchanged needs nothing).
    /// The list started at `started` (wall clock) and `started_mono` (monotonic): the kind's
    /// data is as old as the list's start, however long its pages took (every page shows the
    /// state at the first one), so that is its time.
    pub fn apply_relist(
        &mut self,
        kind: ObjectKind,
        relist: Relist,
        started: SystemTime,
        started_mono: Instant,
    ) {
        let Relist { keep, changed } = relist;
        let gone: Vec<Key> = on_kind!(kind, K => {
            self.objects::<K>().values().map(|o| key_of(o.meta())).filter(|k| !keep.contains(k)).collect()
        });
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
}
