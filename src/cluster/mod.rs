//! The cluster view: one read-only, indexed picture of the objects policy decisions read.
//!
//! A [`ClusterView`] is filled either from a snapshot file ([`snapshot`]) or from watch caches
//! ([`watch`]); the policy code only asks it questions. Every question is answered from a
//! map or a secondary index, never by scanning all objects of a kind.

pub mod client;
pub mod confirm;
pub mod objects;
pub mod readset;
pub mod snapshot;
pub mod stats;
pub mod watch;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::{Duration, SystemTime};

pub use objects::*;

/// Where the view's data came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A snapshot file: the snapshot is the truth, it never goes stale.
    Snapshot(String),
    /// Live watches against the API server.
    Watch,
    /// Built in code (tests, confirmation reads).
    Direct,
}

/// How current the view is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Freshness {
    pub source: Source,
    /// True once every watched kind has finished its initial list.
    pub synced: bool,
    /// When the least recently updated kind last received data (initial list, event or
    /// confirmation read): the view is as old as its oldest kind, so one failing watch makes
    /// the whole view age. `None` until every kind has received data.
    pub updated_at: Option<SystemTime>,
    /// Objects (`kind/name`) the watches saw but could not read; while any is listed the view
    /// is not trusted for an allow.
    pub unreadable: Vec<String>,
    /// Kinds whose watch failed (API server unreachable, `410 Gone`, ...) and has neither been
    /// relisted nor delivered an event since: the view is stale whatever its age.
    pub failing: Vec<&'static str>,
}

impl Freshness {
    /// How old the view's data is at `now` (zero for snapshots; `None` before the first sync).
    pub fn age(&self, now: SystemTime) -> Option<Duration> {
        match self.source {
            Source::Snapshot(_) => Some(Duration::ZERO),
            _ => self.updated_at.map(|t| now.duration_since(t).unwrap_or(Duration::ZERO)),
        }
    }

    /// True when the data may be relied on for an allow at `now` given the bound `max_age`:
    /// synced, every object readable, no watch failing, and every kind updated within `max_age`.
    pub fn is_fresh(&self, now: SystemTime, max_age: Duration) -> bool {
        self.synced
            && self.unreadable.is_empty()
            && self.failing.is_empty()
            && self.age(now).is_some_and(|a| a <= max_age)
    }
}

/// Progress of one rebuild as first seen at a given value, for stall detection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgressMark {
    pub progress: i64,
    /// When the view first saw the rebuild at this progress value.
    pub since: SystemTime,
}

type Index = HashMap<String, BTreeSet<String>>;

/// The read-only cluster picture with secondary indexes.
#[derive(Clone, Debug)]
pub struct ClusterView {
    nodes: HashMap<String, Node>,
    pods: HashMap<(String, String), Pod>,
    storage_classes: HashMap<String, StorageClass>,
    volumes: HashMap<String, Volume>,
    replicas: HashMap<String, Replica>,
    engines: HashMap<String, Engine>,
    longhorn_nodes: HashMap<String, LonghornNode>,
    settings: HashMap<String, Setting>,
    instance_managers: HashMap<String, InstanceManager>,
    replicas_by_node: Index,
    replicas_by_volume: Index,
    engines_by_volume: Index,
    engines_by_node: Index,
    instance_managers_by_node: Index,
    /// (engine name, rebuild address) -> when its progress value was first seen.
    rebuild_marks: HashMap<(String, String), ProgressMark>,
    source: Source,
    synced: bool,
    /// When each kind last received data.
    kind_updated: HashMap<ObjectKind, SystemTime>,
    /// Names of watched objects, by kind, that could not be read.
    unreadable: HashMap<ObjectKind, BTreeSet<String>>,
    /// Kinds whose watch failed and that have neither been relisted nor had an event since.
    failing: BTreeSet<ObjectKind>,
}

impl ClusterView {
    /// An empty view with the given source; not yet synced.
    pub fn new(source: Source) -> Self {
        Self {
            nodes: HashMap::new(),
            pods: HashMap::new(),
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
            rebuild_marks: HashMap::new(),
            source,
            synced: false,
            kind_updated: HashMap::new(),
            unreadable: HashMap::new(),
            failing: BTreeSet::new(),
        }
    }

    /// A synced view holding exactly `objects`, as a snapshot or confirmation read gives it.
    pub fn from_objects(source: Source, objects: impl IntoIterator<Item = Object>, now: SystemTime) -> Self {
        let mut view = Self::new(source);
        for o in objects {
            view.upsert(o, now);
        }
        view.mark_synced(now);
        view
    }

    // ---- updates (used by the snapshot loader and the watchers) ----

    /// Inserts or replaces an object, keeping every index consistent. `now` dates rebuild
    /// progress changes (stall detection) and the view's freshness.
    pub fn upsert(&mut self, object: Object, now: SystemTime) {
        let name = object.name().to_string();
        let kind = object.kind();
        self.unindex(kind, object.metadata().namespace.as_deref(), &name);
        self.clear_unreadable(kind, &name);
        match object {
            Object::Node(o) => {
                self.nodes.insert(name, o);
            }
            Object::Pod(o) => {
                let ns = o.metadata.namespace.clone().unwrap_or_default();
                self.pods.insert((ns, name), o);
            }
            Object::StorageClass(o) => {
                self.storage_classes.insert(name, o);
            }
            Object::Volume(o) => {
                self.volumes.insert(name, o);
            }
            Object::Replica(o) => {
                if let Some(node) = o.node() {
                    add(&mut self.replicas_by_node, node, &name);
                }
                if let Some(vol) = o.volume() {
                    add(&mut self.replicas_by_volume, vol, &name);
                }
                self.replicas.insert(name, o);
            }
            Object::Engine(o) => {
                if let Some(node) = o.node() {
                    add(&mut self.engines_by_node, node, &name);
                }
                if let Some(vol) = o.volume() {
                    add(&mut self.engines_by_volume, vol, &name);
                }
                self.track_rebuilds(&name, &o, now);
                self.engines.insert(name, o);
            }
            Object::LonghornNode(o) => {
                self.longhorn_nodes.insert(name, o);
            }
            Object::Setting(o) => {
                self.settings.insert(name, o);
            }
            Object::InstanceManager(o) => {
                if !o.spec.node_id.is_empty() {
                    add(&mut self.instance_managers_by_node, &o.spec.node_id, &name);
                }
                self.instance_managers.insert(name, o);
            }
        }
        self.touch_kind(kind, now);
    }

    /// Removes an object (no-op when absent), keeping every index consistent.
    pub fn remove(&mut self, kind: ObjectKind, namespace: Option<&str>, name: &str) {
        self.unindex(kind, namespace, name);
        self.clear_unreadable(kind, name);
        if kind == ObjectKind::Engine {
            self.rebuild_marks.retain(|(e, _), _| e != name);
        }
    }

    fn unindex(&mut self, kind: ObjectKind, namespace: Option<&str>, name: &str) {
        match kind {
            ObjectKind::Node => {
                self.nodes.remove(name);
            }
            ObjectKind::Pod => {
                self.pods.remove(&(namespace.unwrap_or_default().to_string(), name.to_string()));
            }
            ObjectKind::StorageClass => {
                self.storage_classes.remove(name);
            }
            ObjectKind::Volume => {
                self.volumes.remove(name);
            }
            ObjectKind::Replica => {
                if let Some(old) = self.replicas.remove(name) {
                    if let Some(node) = old.node() {
                        del(&mut self.replicas_by_node, node, name);
                    }
                    if let Some(vol) = old.volume() {
                        del(&mut self.replicas_by_volume, vol, name);
                    }
                }
            }
            ObjectKind::Engine => {
                if let Some(old) = self.engines.remove(name) {
                    if let Some(node) = old.node() {
                        del(&mut self.engines_by_node, node, name);
                    }
                    if let Some(vol) = old.volume() {
                        del(&mut self.engines_by_volume, vol, name);
                    }
                }
            }
            ObjectKind::LonghornNode => {
                self.longhorn_nodes.remove(name);
            }
            ObjectKind::Setting => {
                self.settings.remove(name);
            }
            ObjectKind::InstanceManager => {
                if let Some(old) = self.instance_managers.remove(name) {
                    del(&mut self.instance_managers_by_node, &old.spec.node_id, name);
                }
            }
        }
    }

    /// Replaces every object of `kind` with `objects` (a watch's completed (re)list): objects
    /// absent from the new list are removed, the rest upserted, so rebuild progress marks of
    /// engines that are still there survive the relist.
    pub fn replace_kind(&mut self, kind: ObjectKind, objects: Vec<Object>, now: SystemTime) {
        let keep: std::collections::HashSet<(String, String)> = objects
            .iter()
            .map(|o| (o.metadata().namespace.clone().unwrap_or_default(), o.name().to_string()))
            .collect();
        let existing: Vec<(String, String)> = match kind {
            ObjectKind::Pod => self.pods.keys().cloned().collect(),
            ObjectKind::Node => self.nodes.keys().map(|n| (String::new(), n.clone())).collect(),
            ObjectKind::StorageClass => {
                self.storage_classes.keys().map(|n| (String::new(), n.clone())).collect()
            }
            ObjectKind::Volume => self.volumes.values().map(|o| key_of(&o.metadata)).collect(),
            ObjectKind::Replica => self.replicas.values().map(|o| key_of(&o.metadata)).collect(),
            ObjectKind::Engine => self.engines.values().map(|o| key_of(&o.metadata)).collect(),
            ObjectKind::LonghornNode => self.longhorn_nodes.values().map(|o| key_of(&o.metadata)).collect(),
            ObjectKind::Setting => self.settings.values().map(|o| key_of(&o.metadata)).collect(),
            ObjectKind::InstanceManager => {
                self.instance_managers.values().map(|o| key_of(&o.metadata)).collect()
            }
        };
        for (ns, name) in existing {
            if !keep.contains(&(ns.clone(), name.clone())) {
                self.remove(kind, Some(&ns), &name);
            }
        }
        self.unreadable.remove(&kind);
        self.failing.remove(&kind);
        for o in objects {
            self.upsert(o, now);
        }
        self.touch_kind(kind, now);
    }

    /// Records that the watch of `kind` failed: until the kind is relisted
    /// ([`ClusterView::replace_kind`]) or its resumed watch delivers an event
    /// ([`ClusterView::note_watch_recovered`]) the view may lack events and is not fresh,
    /// however recently it received data.
    pub fn note_watch_failed(&mut self, kind: ObjectKind) {
        self.failing.insert(kind);
    }

    /// Records that the watch of `kind` delivered an event after a failure: it resumed from
    /// its resource version, so the stream is continuous and the kind current again.
    pub fn note_watch_recovered(&mut self, kind: ObjectKind) {
        self.failing.remove(&kind);
    }

    /// Records that the view holds a complete initial list of every kind.
    pub fn mark_synced(&mut self, now: SystemTime) {
        self.synced = true;
        self.touch(now);
    }

    /// Records that data for every kind arrived at `now` (a snapshot or a confirmation read).
    pub fn touch(&mut self, now: SystemTime) {
        for kind in ObjectKind::ALL {
            self.touch_kind(kind, now);
        }
    }

    /// Records that data for `kind` arrived at `now` (an event or a completed list).
    pub fn touch_kind(&mut self, kind: ObjectKind, now: SystemTime) {
        let t = self.kind_updated.entry(kind).or_insert(now);
        if *t < now {
            *t = now;
        }
    }

    /// Records that a watched object could not be read. The previous version (if any) stays
    /// in the view, and the view is not trusted for allows until the object is read again,
    /// deleted, or its kind relisted.
    pub fn note_unreadable(&mut self, kind: ObjectKind, name: &str) {
        self.unreadable.entry(kind).or_default().insert(name.to_string());
    }

    fn clear_unreadable(&mut self, kind: ObjectKind, name: &str) {
        if let Some(set) = self.unreadable.get_mut(&kind) {
            set.remove(name);
            if set.is_empty() {
                self.unreadable.remove(&kind);
            }
        }
    }

    fn track_rebuilds(&mut self, engine: &str, new: &Engine, now: SystemTime) {
        self.rebuild_marks.retain(|(e, addr), _| e != engine || new.status.rebuild_status.contains_key(addr));
        for (addr, rs) in &new.status.rebuild_status {
            let key = (engine.to_string(), addr.clone());
            match self.rebuild_marks.get(&key) {
                Some(mark) if mark.progress == rs.progress => {}
                _ => {
                    self.rebuild_marks.insert(key, ProgressMark { progress: rs.progress, since: now });
                }
            }
        }
    }

    // ---- questions ----

    /// How current the view is: source, sync state, the age of its oldest kind, unreadable objects.
    pub fn freshness(&self) -> Freshness {
        let updated_at = ObjectKind::ALL
            .iter()
            .map(|k| self.kind_updated.get(k).copied())
            .collect::<Option<Vec<SystemTime>>>()
            .and_then(|times| times.into_iter().min());
        let mut unreadable: Vec<String> = self
            .unreadable
            .iter()
            .flat_map(|(k, names)| names.iter().map(move |n| format!("{}/{n}", k.display())))
            .collect();
        unreadable.sort();
        let failing = self.failing.iter().map(|k| k.display()).collect();
        Freshness { source: self.source.clone(), synced: self.synced, updated_at, unreadable, failing }
    }

    /// Core Node by name.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// True/false when the Kubernetes node is known, `None` when it is not in the view.
    pub fn is_node_cordoned(&self, name: &str) -> Option<bool> {
        self.nodes.get(name).map(|n| n.spec.unschedulable.unwrap_or(false))
    }

    /// Pod by namespace and name.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Pod> {
        self.pods.get(&(namespace.to_string(), name.to_string()))
    }

    pub fn storage_class(&self, name: &str) -> Option<&StorageClass> {
        self.storage_classes.get(name)
    }

    pub fn volume(&self, name: &str) -> Option<&Volume> {
        self.volumes.get(name)
    }

    pub fn replica(&self, name: &str) -> Option<&Replica> {
        self.replicas.get(name)
    }

    /// Replicas whose node is `node`, in name order.
    pub fn replicas_on_node<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a Replica> + 'a {
        iter_index(&self.replicas_by_node, node).filter_map(|n| self.replicas.get(n))
    }

    /// Replicas of volume `volume`, in name order.
    pub fn replicas_of_volume<'a>(&'a self, volume: &str) -> impl Iterator<Item = &'a Replica> + 'a {
        iter_index(&self.replicas_by_volume, volume).filter_map(|n| self.replicas.get(n))
    }

    pub fn engine(&self, name: &str) -> Option<&Engine> {
        self.engines.get(name)
    }

    /// Engines of a volume, in name order (normally one; two during a live migration).
    pub fn engines_of_volume<'a>(&'a self, volume: &str) -> impl Iterator<Item = &'a Engine> + 'a {
        iter_index(&self.engines_by_volume, volume).filter_map(|n| self.engines.get(n))
    }

    /// The engine of a volume: the active one if any, else the first by name.
    pub fn engine_of(&self, volume: &str) -> Option<&Engine> {
        self.engines_of_volume(volume)
            .find(|e| e.spec.active)
            .or_else(|| self.engines_of_volume(volume).next())
    }

    /// Every engine (for metrics such as stalled rebuilds; not for request paths).
    pub fn engines(&self) -> impl Iterator<Item = &Engine> {
        self.engines.values()
    }

    /// Engines whose node is `node`, in name order.
    pub fn engines_on_node<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a Engine> + 'a {
        iter_index(&self.engines_by_node, node).filter_map(|n| self.engines.get(n))
    }

    /// Longhorn Node by name.
    pub fn longhorn_node(&self, name: &str) -> Option<&LonghornNode> {
        self.longhorn_nodes.get(name)
    }

    /// Every Longhorn node (a small set: one per Kubernetes node).
    pub fn longhorn_nodes(&self) -> impl Iterator<Item = &LonghornNode> {
        self.longhorn_nodes.values()
    }

    /// The value of a Longhorn setting.
    pub fn setting(&self, name: &str) -> Option<&str> {
        self.settings.get(name).map(|s| s.value.as_str())
    }

    pub fn instance_manager(&self, name: &str) -> Option<&InstanceManager> {
        self.instance_managers.get(name)
    }

    /// Instance managers on a node, in name order.
    pub fn instance_managers_on_node<'a>(
        &'a self,
        node: &str,
    ) -> impl Iterator<Item = &'a InstanceManager> + 'a {
        iter_index(&self.instance_managers_by_node, node).filter_map(|n| self.instance_managers.get(n))
    }

    /// When the view first saw this rebuild (engine, `tcp://ip:port`) at its current progress.
    pub fn rebuild_mark(&self, engine: &str, address: &str) -> Option<ProgressMark> {
        self.rebuild_marks.get(&(engine.to_string(), address.to_string())).copied()
    }

    /// Object counts by kind, for logs and metrics.
    pub fn counts(&self) -> Vec<(ObjectKind, usize)> {
        vec![
            (ObjectKind::Node, self.nodes.len()),
            (ObjectKind::Pod, self.pods.len()),
            (ObjectKind::StorageClass, self.storage_classes.len()),
            (ObjectKind::Volume, self.volumes.len()),
            (ObjectKind::Replica, self.replicas.len()),
            (ObjectKind::Engine, self.engines.len()),
            (ObjectKind::LonghornNode, self.longhorn_nodes.len()),
            (ObjectKind::Setting, self.settings.len()),
            (ObjectKind::InstanceManager, self.instance_managers.len()),
        ]
    }
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

fn add(index: &mut Index, key: &str, name: &str) {
    index.entry(key.to_string()).or_default().insert(name.to_string());
}

fn del(index: &mut Index, key: &str, name: &str) {
    if let Some(set) = index.get_mut(key) {
        set.remove(name);
        if set.is_empty() {
            index.remove(key);
        }
    }
}

fn iter_index<'a>(index: &'a Index, key: &str) -> impl Iterator<Item = &'a String> + 'a {
    index.get(key).into_iter().flatten()
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
