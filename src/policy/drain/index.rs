//! The drain index: for every node, the volumes that would keep a drain of it from finishing,
//! kept current as watch events arrive, so that an eviction decision costs what its answer
//! prints. A verdict is [`volume_unsafe`] (the code [`super::analyze_node`] runs), recomputed
//! whenever an object it reads changes; time never changes it, so nothing expires.

use super::analysis::{override_text, volume_unsafe};
use super::instances::volume_of_engine_name;
use super::sites::Sites;
use crate::cluster::name::{NameHashSet, NameMap};
use crate::cluster::nameset::{self, Index, NameSet};
use crate::cluster::{Change, ClusterView, Derived, Engine, InstanceManager, Name, Node, Pod, Replica};
use crate::policy::Policy;

/// Per node, the volumes whose verdict is not safe (before the node's override), for both
/// values of `drain.protectStoppedReplicas`.
#[derive(Clone, Debug, Default)]
pub struct DrainIndex {
    /// `drain.protectStoppedReplicas: true`: node -> volumes.
    strict: Index,
    /// `drain.protectStoppedReplicas: false` (a subset of `strict`: ignoring stopped replicas
    /// only ever makes a volume safer).
    lenient: Index,
    /// Volume -> the nodes whose `strict` set holds it.
    placed: Index,
    /// Where instance managers run engine and engine-frontend entries; unmapped ones per node.
    pub(super) sites: Sites,
    /// Volume -> its own override reason, for the Volumes whose allow-drain annotation is set:
    /// a decision reads the few there are here instead of each blocking volume's object.
    overrides: NameMap<Name, String>,
    dirty: NameHashSet<Name>,
    all_dirty: bool,
}

impl DrainIndex {
    /// The volumes (in name order) that are not safe when `node` is drained under `policy`,
    /// overrides not applied (`None`: none).
    pub fn unsafe_set(&self, node: &str, policy: &Policy) -> Option<&NameSet> {
        let sets = if policy.drain.protect_stopped_replicas { &self.strict } else { &self.lenient };
        sets.get(node)
    }

    /// [`super::analyze_node_with`] reduced to the volumes that are not safe: the same
    /// blocking and overridden reports, without the safe ones.
    pub fn analyze(
        &self,
        view: &ClusterView,
        node: &str,
        policy: &Policy,
        now: std::time::SystemTime,
        node_override: Option<String>,
    ) -> super::NodeAnalysis {
        let volumes = self.unsafe_set(node, policy).into_iter().flatten();
        let volumes = volumes.map(|v| (v.to_string(), self.sites.of_volume_on(view, v, node)));
        super::analyze_volumes(view, node, volumes, self.sites.unmapped_on(node), policy, now, node_override)
    }

    /// The override reason on the Volume `volume` itself, if set ([`super::override_reason`]).
    pub fn volume_override(&self, volume: &str) -> Option<&str> {
        self.overrides.get(volume).map(String::as_str)
    }

    fn mark(&mut self, volume: Option<&Name>) {
        if let Some(v) = volume.filter(|v| !v.is_empty()) {
            self.sites.mark_volume(v);
            if !self.dirty.contains(v) {
                self.dirty.insert(v.clone());
            }
        }
    }

    /// [`Self::mark`] for a volume named by a slice of another name.
    fn mark_str(&mut self, volume: Option<&str>) {
        if let Some(v) = volume.filter(|v| !v.is_empty()) {
            self.sites.mark_volume(v);
            if !self.dirty.contains(v) {
                self.dirty.insert(Name::new(v));
            }
        }
    }

    fn mark_replicas_on(&mut self, view: &ClusterView, node: &str) {
        for r in view.replicas_on_node(node) {
            self.mark(r.volume_name());
        }
    }

    /// Marks what a change of instance manager `name`'s state affects: the replicas on its node
    /// (`node`, when known) and those that use it.
    fn mark_instance_manager_users(&mut self, view: &ClusterView, name: &str, node: Option<&str>) {
        if let Some(node) = node {
            self.mark_replicas_on(view, node);
        }
        for r in view.replicas_using_instance_manager(name) {
            self.mark(r.volume_name());
        }
    }

    fn recompute(&mut self, view: &ClusterView, volume: &Name) {
        let mut in_ims = self.sites.of_volume(view, volume);
        let mut candidates: NameSet = in_ims.keys().cloned().collect();
        for node in view.replicas_of_volume(volume).filter_map(Replica::node_name) {
            candidates.insert(node.clone());
        }
        for node in view.engines_of_volume(volume).filter_map(Engine::node_name) {
            candidates.insert(node.clone());
        }
        let before = self.placed.remove(volume.as_str()).unwrap_or_default();
        for node in before.iter().filter(|n| !candidates.contains(n)) {
            nameset::del(&mut self.strict, node, volume);
            nameset::del(&mut self.lenient, node, volume);
        }
        let mut placed = NameSet::default();
        for node in &candidates {
            let kinds = in_ims.remove(node.as_str()).unwrap_or_default();
            let (strict, lenient) = volume_unsafe(view, node, volume, &kinds);
            // Ignoring stopped replicas only ever makes a volume safer.
            let lenient = strict && lenient;
            set(&mut self.strict, node, volume, strict);
            set(&mut self.lenient, node, volume, lenient);
            if strict {
                placed.insert(node.clone());
            }
        }
        if !placed.is_empty() {
            self.placed.insert(volume.clone(), placed);
        }
    }

    fn instance_manager_changed(&mut self, view: &ClusterView, old: Option<&InstanceManager>, name: &str) {
        let new = view.instance_manager(name);
        fn key(m: &InstanceManager) -> [&Name; 5] {
            [&m.spec.node_id, &m.spec.type_, &m.spec.data_engine, &m.spec.image, &m.status.current_state]
        }
        let same_manager = old.zip(new).is_some_and(|(a, b)| key(a) == key(b));
        for entry in self.sites.instance_manager_changed(old, new) {
            self.mark(view.engine(&entry).and_then(Engine::volume_name));
            self.mark_str(volume_of_engine_name(&entry));
        }
        if !same_manager {
            if let Some(im) = old {
                self.mark_replicas_on(view, &im.spec.node_id);
            }
            self.mark_instance_manager_users(view, name, new.map(|im| im.spec.node_id.as_str()));
        }
    }

    fn changed(&mut self, view: &ClusterView, change: Change<'_>) {
        match change {
            Change::Volume(d) => {
                self.mark_str(Some(d.name));
                match d.new.and_then(|v| override_text(&v.metadata)) {
                    Some(reason) => {
                        self.overrides.insert(Name::new(d.name), reason.to_string());
                    }
                    None => {
                        self.overrides.remove(d.name);
                    }
                }
            }
            Change::Replica(d) => {
                self.mark(d.old.and_then(Replica::volume_name));
                self.mark(d.new.and_then(Replica::volume_name));
            }
            Change::Engine(d) => {
                self.mark(d.old.and_then(Engine::volume_name));
                self.mark(d.new.and_then(Engine::volume_name));
                self.mark_str(volume_of_engine_name(d.name));
                self.sites.mark_entry(d.name);
            }
            Change::Node(d) if d.old.map(Node::draining) != d.new.map(Node::draining) => {
                self.mark_replicas_on(view, d.name);
            }
            Change::Pod(d) => {
                // An instance-manager pod starting or ending its termination changes whether
                // the replicas of its node protect.
                let terminating =
                    |p: &Pod| p.is_instance_manager().then(|| p.metadata.deletion_timestamp.is_some());
                let before = d.old.and_then(terminating);
                let now = d.new.and_then(terminating);
                // The first instance-manager pod arriving, or the last leaving, decides whether
                // a missing one means anything (see `facts::instance_manager_pod_down`).
                let is = now.is_some();
                if before.is_some() != is && view.instance_manager_pod_count() == usize::from(is) {
                    self.all_dirty = true;
                } else if before != now {
                    // The pod is its instance manager's (same name): mark what that one marks
                    // when its state changes.
                    let node = view.instance_manager(d.name).map(|im| im.spec.node_id.as_str());
                    self.mark_instance_manager_users(view, d.name, node);
                }
            }
            Change::InstanceManager(d) => self.instance_manager_changed(view, d.old, d.name),
            Change::Setting(d) if d.old.map(|s| s.value.as_str()) != d.new.map(|s| s.value.as_str()) => {
                self.all_dirty = true;
            }
            // Storage classes, Longhorn nodes, the kinds only other checks read, and a Node or
            // Setting change that leaves what the verdicts read as it was.
            _ => {}
        }
    }
}

fn set(sets: &mut Index, node: &Name, volume: &Name, member: bool) {
    if member {
        nameset::add(sets, node, volume);
    } else {
        nameset::del(sets, node, volume);
    }
}

impl Derived for DrainIndex {
    fn apply(&mut self, view: &ClusterView, change: Change<'_>, _now: std::time::SystemTime) {
        self.changed(view, change);
    }

    fn flush(&mut self, view: &ClusterView) {
        if self.all_dirty {
            self.sites.mark_all();
        }
        self.sites.flush(view);
        if self.all_dirty {
            self.all_dirty = false;
            self.dirty.clear();
            self.strict.clear();
            self.lenient.clear();
            self.placed.clear();
            let all: Vec<Name> = view.volume_names().map(Name::new).collect();
            let claimed: Vec<Name> = self.sites.implied_volumes().cloned().collect();
            for v in all.iter().chain(&claimed) {
                self.recompute(view, v);
            }
            return;
        }
        for v in std::mem::take(&mut self.dirty) {
            self.recompute(view, &v);
        }
    }

    fn clone_box(&self) -> Box<dyn Derived> {
        Box::new(self.clone())
    }
}
