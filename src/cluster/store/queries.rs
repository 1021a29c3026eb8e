//! The questions a [`ClusterView`] answers: lookups by name and through its secondary indexes,
//! never a scan of all objects of a kind.

use super::nameset::iter_index;
use super::*;

impl ClusterView {
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.objects::<Node>().get("", name)
    }

    /// True/false when the Kubernetes node is known, `None` when it is not in the view.
    pub fn is_node_cordoned(&self, name: &str) -> Option<bool> {
        self.node(name).map(|n| n.spec.unschedulable.unwrap_or(false))
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Pod> {
        self.objects::<Pod>().get(namespace, name)
    }

    /// How many instance-manager pods the view holds.
    pub fn instance_manager_pod_count(&self) -> usize {
        self.builtin.instance_manager_pods
    }

    pub fn storage_class(&self, name: &str) -> Option<&StorageClass> {
        self.objects::<StorageClass>().get("", name)
    }

    pub fn volume(&self, name: &str) -> Option<&Volume> {
        self.objects::<Volume>().get("", name)
    }

    pub fn replica(&self, name: &str) -> Option<&Replica> {
        self.objects::<Replica>().get("", name)
    }

    /// Replicas whose node is `node`, in name order.
    pub fn replicas_on_node<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a Replica> + 'a {
        iter_index(&self.builtin.replicas_by_node, node).filter_map(|n| self.replica(n))
    }

    /// Replicas of volume `volume`, in name order.
    pub fn replicas_of_volume<'a>(&'a self, volume: &str) -> impl Iterator<Item = &'a Replica> + 'a {
        iter_index(&self.builtin.replicas_by_volume, volume).filter_map(|n| self.replica(n))
    }

    /// How many replicas name `node` (without walking them).
    pub fn replica_count_on_node(&self, node: &str) -> usize {
        self.builtin.replicas_by_node.get(node).map_or(0, nameset::NameSet::len)
    }

    /// Replicas whose `status.instanceManagerName` is `instance_manager`, in name order.
    pub fn replicas_using_instance_manager<'a>(
        &'a self,
        instance_manager: &str,
    ) -> impl Iterator<Item = &'a Replica> + 'a {
        iter_index(&self.builtin.replicas_by_instance_manager, instance_manager)
            .filter_map(|n| self.replica(n))
    }

    /// Every volume name the view knows of: Volumes, and volumes named by replicas or engines
    /// (each once, in no particular order).
    pub fn volume_names(&self) -> impl Iterator<Item = &str> {
        let volumes = self.objects::<Volume>();
        let mut names: Vec<&str> = volumes.iter().map(|(v, _)| v.as_str()).collect();
        for index in [&self.builtin.replicas_by_volume, &self.builtin.engines_by_volume] {
            names.extend(index.keys().filter(|v| volumes.get("", v).is_none()).map(Name::as_str));
        }
        names.sort_unstable();
        names.dedup();
        names.into_iter()
    }

    pub fn engine(&self, name: &str) -> Option<&Engine> {
        self.objects::<Engine>().get("", name)
    }

    /// Engines of a volume, in name order (normally one; two during a live migration).
    pub fn engines_of_volume<'a>(&'a self, volume: &str) -> impl Iterator<Item = &'a Engine> + 'a {
        iter_index(&self.builtin.engines_by_volume, volume).filter_map(|n| self.engine(n))
    }

    /// The engine of a volume: the active one if any, else the first by name.
    pub fn engine_of(&self, volume: &str) -> Option<&Engine> {
        self.engines_of_volume(volume)
            .find(|e| e.spec.active)
            .or_else(|| self.engines_of_volume(volume).next())
    }

    /// Engines whose status reports a rebuild in progress, in name order (a maintained index:
    /// the stalled-rebuild metric reads it without walking every engine).
    pub fn engines_rebuilding(&self) -> impl Iterator<Item = &Engine> {
        self.builtin.rebuilding.iter().filter_map(|n| self.engine(n))
    }

    /// Engines whose node is `node`, in name order.
    pub fn engines_on_node<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a Engine> + 'a {
        iter_index(&self.builtin.engines_by_node, node).filter_map(|n| self.engine(n))
    }

    pub fn longhorn_node(&self, name: &str) -> Option<&LonghornNode> {
        self.objects::<LonghornNode>().get("", name)
    }

    /// Every Longhorn node (a small set: one per Kubernetes node).
    pub fn longhorn_nodes(&self) -> impl Iterator<Item = &LonghornNode> {
        self.objects::<LonghornNode>().values()
    }

    /// The value of a Longhorn setting.
    pub fn setting(&self, name: &str) -> Option<&str> {
        self.objects::<Setting>().get("", name).map(|s| s.value.as_str())
    }

    pub fn instance_manager(&self, name: &str) -> Option<&InstanceManager> {
        self.objects::<InstanceManager>().get("", name)
    }

    /// Every instance manager (one or two per node).
    pub fn instance_managers(&self) -> impl Iterator<Item = &InstanceManager> {
        self.objects::<InstanceManager>().values()
    }

    /// Instance managers on a node, in name order.
    pub fn instance_managers_on_node<'a>(
        &'a self,
        node: &str,
    ) -> impl Iterator<Item = &'a InstanceManager> + 'a {
        iter_index(&self.builtin.instance_managers_by_node, node).filter_map(|n| self.instance_manager(n))
    }

    /// Clones of the objects of `kind` whose metadata `keep` accepts (a scan of the kind).
    pub fn select(&self, kind: ObjectKind, keep: &dyn Fn(&Meta) -> bool) -> Vec<Object> {
        on_kind!(kind, K => {
            let store = self.objects::<K>();
            store.values().filter(|o| keep(o.meta())).map(|o| K::wrap(Box::new(o.clone()))).collect()
        })
    }

    /// Object counts by kind, for logs and metrics.
    pub fn counts(&self) -> Vec<(ObjectKind, usize)> {
        ObjectKind::ALL
            .into_iter()
            .map(|kind| (kind, on_kind!(kind, K => self.objects::<K>().len())))
            .collect()
    }
}
