//! The questions a [`ClusterView`] answers: lookups by name and through its secondary indexes,
//! never a scan of all objects of a kind.

use super::nameset::iter_index;
use super::*;

impl ClusterView {
    /// Core Node by name.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name).map(AsRef::as_ref)
    }

    /// True/false when the Kubernetes node is known, `None` when it is not in the view.
    pub fn is_node_cordoned(&self, name: &str) -> Option<bool> {
        self.nodes.get(name).map(|n| n.spec.unschedulable.unwrap_or(false))
    }

    /// Pod by namespace and name.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Pod> {
        self.pods.get(namespace)?.get(name).map(AsRef::as_ref)
    }

    /// How many instance-manager pods the view holds.
    pub fn instance_manager_pod_count(&self) -> usize {
        self.instance_manager_pods
    }

    pub fn storage_class(&self, name: &str) -> Option<&StorageClass> {
        self.storage_classes.get(name).map(AsRef::as_ref)
    }

    pub fn volume(&self, name: &str) -> Option<&Volume> {
        self.volumes.get(name).map(AsRef::as_ref)
    }

    pub fn replica(&self, name: &str) -> Option<&Replica> {
        self.replicas.get(name).map(AsRef::as_ref)
    }

    /// Replicas whose node is `node`, in name order.
    pub fn replicas_on_node<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a Replica> + 'a {
        iter_index(&self.replicas_by_node, node).filter_map(|n| self.replica(n))
    }

    /// Replicas of volume `volume`, in name order.
    pub fn replicas_of_volume<'a>(&'a self, volume: &str) -> impl Iterator<Item = &'a Replica> + 'a {
        iter_index(&self.replicas_by_volume, volume).filter_map(|n| self.replica(n))
    }

    /// How many replicas name `node` (without walking them).
    pub fn replica_count_on_node(&self, node: &str) -> usize {
        self.replicas_by_node.get(node).map_or(0, nameset::NameSet::len)
    }

    /// Replicas whose `status.instanceManagerName` is `instance_manager`, in name order.
    pub fn replicas_using_instance_manager<'a>(
        &'a self,
        instance_manager: &str,
    ) -> impl Iterator<Item = &'a Replica> + 'a {
        iter_index(&self.replicas_by_instance_manager, instance_manager).filter_map(|n| self.replica(n))
    }

    /// Every volume name the view knows of: Volumes, and volumes named by replicas or engines
    /// (each once, in no particular order).
    pub fn volume_names(&self) -> impl Iterator<Item = &str> {
        let mut names: Vec<&str> = self.volumes.keys().map(Name::as_str).collect();
        for index in [&self.replicas_by_volume, &self.engines_by_volume] {
            names.extend(index.keys().filter(|v| !self.volumes.contains_key(*v)).map(Name::as_str));
        }
        names.sort_unstable();
        names.dedup();
        names.into_iter()
    }

    pub fn engine(&self, name: &str) -> Option<&Engine> {
        self.engines.get(name).map(AsRef::as_ref)
    }

    /// Engines of a volume, in name order (normally one; two during a live migration).
    pub fn engines_of_volume<'a>(&'a self, volume: &str) -> impl Iterator<Item = &'a Engine> + 'a {
        iter_index(&self.engines_by_volume, volume).filter_map(|n| self.engine(n))
    }

    /// The engine of a volume: the active one if any, else the first by name.
    pub fn engine_of(&self, volume: &str) -> Option<&Engine> {
        self.engines_of_volume(volume)
            .find(|e| e.spec.active)
            .or_else(|| self.engines_of_volume(volume).next())
    }

    /// Every engine (not for request paths).
    pub fn engines(&self) -> impl Iterator<Item = &Engine> {
        self.engines.values().map(AsRef::as_ref)
    }

    /// Engines whose status reports a rebuild in progress, in name order (a maintained index:
    /// the stalled-rebuild metric reads it without walking every engine).
    pub fn engines_rebuilding(&self) -> impl Iterator<Item = &Engine> {
        self.rebuilding.iter().filter_map(|n| self.engine(n))
    }

    /// Engines whose node is `node`, in name order.
    pub fn engines_on_node<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a Engine> + 'a {
        iter_index(&self.engines_by_node, node).filter_map(|n| self.engine(n))
    }

    /// Longhorn Node by name.
    pub fn longhorn_node(&self, name: &str) -> Option<&LonghornNode> {
        self.longhorn_nodes.get(name).map(AsRef::as_ref)
    }

    /// Every Longhorn node (a small set: one per Kubernetes node).
    pub fn longhorn_nodes(&self) -> impl Iterator<Item = &LonghornNode> {
        self.longhorn_nodes.values().map(AsRef::as_ref)
    }

    /// The value of a Longhorn setting.
    pub fn setting(&self, name: &str) -> Option<&str> {
        self.settings.get(name).map(|s| s.value.as_str())
    }

    pub fn instance_manager(&self, name: &str) -> Option<&InstanceManager> {
        self.instance_managers.get(name).map(AsRef::as_ref)
    }

    /// Every instance manager (one or two per node).
    pub fn instance_managers(&self) -> impl Iterator<Item = &InstanceManager> {
        self.instance_managers.values().map(AsRef::as_ref)
    }

    /// Instance managers on a node, in name order.
    pub fn instance_managers_on_node<'a>(
        &'a self,
        node: &str,
    ) -> impl Iterator<Item = &'a InstanceManager> + 'a {
        iter_index(&self.instance_managers_by_node, node).filter_map(|n| self.instance_manager(n))
    }

    /// Clones of the objects of `kind` whose metadata `keep` accepts (a scan of the kind).
    pub fn select(&self, kind: ObjectKind, keep: &dyn Fn(&Meta) -> bool) -> Vec<Object> {
        fn pick<T: Clone>(
            of: &Kind<T>,
            keep: &dyn Fn(&Meta) -> bool,
            meta: fn(&T) -> &Meta,
            wrap: fn(Box<T>) -> Object,
        ) -> Vec<Object> {
            of.values().filter(|o| keep(meta(o))).map(|o| wrap(o.clone())).collect()
        }
        match kind {
            ObjectKind::Node => pick(&self.nodes, keep, |o| &o.metadata, Object::Node),
            ObjectKind::Pod => {
                self.pods.values().flat_map(|pods| pick(pods, keep, |o| &o.metadata, Object::Pod)).collect()
            }
            ObjectKind::StorageClass => {
                pick(&self.storage_classes, keep, |o| &o.metadata, Object::StorageClass)
            }
            ObjectKind::Volume => pick(&self.volumes, keep, |o| &o.metadata, Object::Volume),
            ObjectKind::Replica => pick(&self.replicas, keep, |o| &o.metadata, Object::Replica),
            ObjectKind::Engine => pick(&self.engines, keep, |o| &o.metadata, Object::Engine),
            ObjectKind::LonghornNode => {
                pick(&self.longhorn_nodes, keep, |o| &o.metadata, Object::LonghornNode)
            }
            ObjectKind::Setting => pick(&self.settings, keep, |o| &o.metadata, Object::Setting),
            ObjectKind::InstanceManager => {
                pick(&self.instance_managers, keep, |o| &o.metadata, Object::InstanceManager)
            }
        }
    }

    /// Object counts by kind, for logs and metrics.
    pub fn counts(&self) -> Vec<(ObjectKind, usize)> {
        vec![
            (ObjectKind::Node, self.nodes.len()),
            (ObjectKind::Pod, self.pods.values().map(HashMap::len).sum()),
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
