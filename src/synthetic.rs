//! A healthy, fully attached synthetic Longhorn cluster of any size, as the API objects
//! `kubectl get -o json` prints, for the scale harness, `make bench-https` and tests.
//!
//! `nodes` nodes (each: a core Node, a Longhorn Node with one disk, a running aio v1
//! InstanceManager and its Running pod) and `volumes` volumes with three replicas each, all
//! healthy (`RW` in the engine's `replicaModeMap`, `healthyAt` set). Replica `r` of volume `v`
//! is on node `(v + r) mod nodes`, so each node holds about `3 × volumes / nodes` replicas.
//! Volumes are attached (engine running) on every node but the last, the
//! [`Synthetic::storage_node`]: evicting its instance manager is safe, evicting any other one
//! is denied (attached volumes). Every instance manager lists its engines and replicas in
//! `status.instanceEngines` / `status.instanceReplicas`. Every object carries the label
//! [`LABEL`]`=true`.
//!
//!
//! This file holds the layout: the sizes, where each object sits, what it is called and its
//! address; `objects` writes the objects from it.

pub mod checks;
mod objects;

/// Label key set to `"true"` on every synthetic object (the harness deletes by it).
pub const LABEL: &str = "longhorn-guard-scale";
/// Replicas per volume.
pub const REPLICAS: usize = 3;
/// Most nodes a synthetic cluster may have.
pub const MAX_NODES: usize = 5_000;
/// Most volumes a synthetic cluster may have.
pub const MAX_VOLUMES: usize = 1_000_000;

/// Why a synthetic cluster cannot be built with the sizes asked for.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SyntheticError {
    #[error("nodes must be {REPLICAS}..={MAX_NODES} (3 replicas on distinct nodes), got {0}")]
    Nodes(usize),
    #[error("volumes must be 1..={MAX_VOLUMES}, got {0}")]
    Volumes(usize),
    #[error("engines on the first node must be 0..=volumes ({volumes}), got {engines}")]
    FirstNodeEngines { engines: usize, volumes: usize },
}

/// One group of objects; [`Group::ALL`] is a valid creation order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    StorageClass,
    Setting,
    Node,
    LonghornNode,
    InstanceManager,
    InstanceManagerPod,
    Volume,
    Engine,
    Replica,
}

impl Group {
    /// Every group, in an order that creates nothing before what it names.
    pub const ALL: [Group; 9] = [
        Self::StorageClass,
        Self::Setting,
        Self::Node,
        Self::LonghornNode,
        Self::InstanceManager,
        Self::InstanceManagerPod,
        Self::Volume,
        Self::Engine,
        Self::Replica,
    ];

    /// Where the API server keeps this group's objects.
    pub fn resource(self) -> Resource {
        let (group, version, kind, plural, namespaced) = match self {
            Self::StorageClass => ("storage.k8s.io", "v1", "StorageClass", "storageclasses", false),
            Self::Setting => ("longhorn.io", "v1beta2", "Setting", "settings", true),
            Self::Node => ("", "v1", "Node", "nodes", false),
            Self::LonghornNode => ("longhorn.io", "v1beta2", "Node", "nodes", true),
            Self::InstanceManager => ("longhorn.io", "v1beta2", "InstanceManager", "instancemanagers", true),
            Self::InstanceManagerPod => ("", "v1", "Pod", "pods", true),
            Self::Volume => ("longhorn.io", "v1beta2", "Volume", "volumes", true),
            Self::Engine => ("longhorn.io", "v1beta2", "Engine", "engines", true),
            Self::Replica => ("longhorn.io", "v1beta2", "Replica", "replicas", true),
        };
        Resource { group, version, kind, plural, namespaced }
    }

    /// True for objects whose `status` the API server only takes through the status
    /// subresource (everything but Settings' `value` and the StorageClass).
    pub fn has_status(self) -> bool {
        !matches!(self, Self::StorageClass)
    }
}

/// An API resource: group (empty for core), version, kind, plural, and whether it is namespaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

/// The shape of a synthetic cluster; objects are generated on demand, one group at a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Synthetic {
    nodes: usize,
    volumes: usize,
    /// When set, exactly this many volumes (the first ones) run their engine on node 0 and the
    /// others on nodes 1 to `nodes - 2` in turn; else volume `v` runs on `v mod (nodes - 1)`.
    first_node_engines: Option<usize>,
    /// RFC 3339 time of the cluster's objects (conditions, pods, snapshots); each replica became
    /// healthy a few seconds apart after it ([`Synthetic::healthy_since`]).
    pub timestamp: String,
}

impl Synthetic {
    /// A cluster of `nodes` nodes and `volumes` volumes (3 replicas each).
    pub fn new(nodes: usize, volumes: usize) -> Result<Self, SyntheticError> {
        if !(REPLICAS..=MAX_NODES).contains(&nodes) {
            return Err(SyntheticError::Nodes(nodes));
        }
        if !(1..=MAX_VOLUMES).contains(&volumes) {
            return Err(SyntheticError::Volumes(volumes));
        }
        Ok(Self { nodes, volumes, first_node_engines: None, timestamp: "2026-11-30T10:00:00Z".to_string() })
    }

    /// The same cluster with exactly `engines` volumes attached on node 0 (the others on nodes
    /// 1 to `nodes - 2`): evicting node 0's instance manager then strands exactly `engines`
    /// volumes.
    pub fn with_first_node_engines(mut self, engines: usize) -> Result<Self, SyntheticError> {
        if engines > self.volumes {
            return Err(SyntheticError::FirstNodeEngines { engines, volumes: self.volumes });
        }
        self.first_node_engines = Some(engines);
        Ok(self)
    }

    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// When replica `r` of volume `v` became healthy (`healthyAt`, `lastHealthyAt`, its time in
    /// the engine's `replicaTransitionTimeMap`): one second apart per replica after
    /// [`Synthetic::timestamp`], as a real cluster's replicas each have their own (a view that
    /// shares equal strings must not look smaller here than on a real cluster).
    pub fn healthy_since(&self, v: usize, r: usize) -> String {
        let base =
            time::OffsetDateTime::parse(&self.timestamp, &time::format_description::well_known::Rfc3339)
                .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
        let t = base + time::Duration::seconds((v * REPLICAS + r) as i64);
        t.format(&time::format_description::well_known::Rfc3339).unwrap_or_else(|_| self.timestamp.clone())
    }

    pub fn volumes(&self) -> usize {
        self.volumes
    }

    /// Name of node `n` (core and Longhorn Node alike).
    pub fn node_name(n: usize) -> String {
        format!("scale-node-{n:03}")
    }

    /// Name of node `n`'s instance manager, which is also its pod's name.
    pub fn instance_manager_name(n: usize) -> String {
        format!("instance-manager-5ca1e{n:027x}")
    }

    /// Name of volume `v`.
    pub fn volume_name(v: usize) -> String {
        format!("pvc-scale-{v:07}")
    }

    /// The node volume `v` is attached on (its engine runs there): never the storage node.
    pub fn attached_node(&self, v: usize) -> usize {
        match self.first_node_engines {
            Some(first) if v < first => 0,
            Some(first) => 1 + (v - first) % (self.nodes - 2),
            None => v % (self.nodes - 1),
        }
    }

    /// The volumes attached on node `n`, in increasing order.
    fn attached_on(&self, n: usize) -> Box<dyn Iterator<Item = usize>> {
        let volumes = self.volumes;
        match (n, self.first_node_engines) {
            (n, _) if n >= self.storage_node() => Box::new(std::iter::empty()),
            (0, Some(first)) => Box::new(0..first),
            (n, Some(first)) => Box::new((first + n - 1..volumes).step_by(self.nodes - 2)),
            (n, None) => Box::new((n..volumes).step_by(self.nodes - 1)),
        }
    }

    /// The node that holds replicas and no engine (the last one): draining it is safe.
    pub fn storage_node(&self) -> usize {
        self.nodes - 1
    }

    /// The node of replica `r` of volume `v`: node `v mod nodes` and the next two.
    pub fn replica_node(&self, v: usize, r: usize) -> usize {
        (v + r) % self.nodes
    }

    /// How many replicas node `n` holds.
    pub fn replicas_on_node(&self, n: usize) -> usize {
        (0..REPLICAS).map(|r| self.volumes_with(n, r).count()).sum()
    }

    /// Volumes with replica `r` on node `n`, in increasing order.
    fn volumes_with(&self, n: usize, r: usize) -> impl Iterator<Item = usize> {
        let first = (n + self.nodes - r % self.nodes) % self.nodes;
        (first..self.volumes).step_by(self.nodes)
    }

    fn ip(n: usize) -> String {
        format!("10.{}.{}.{}", 42 + n / 62_500, (n / 250) % 250, n % 250 + 1)
    }

    /// The replica's `ip:port`; ports stay in 10000..60000 (they only need to be consistent).
    fn replica_address(&self, v: usize, r: usize) -> String {
        let port = 10_000 + ((v / self.nodes) * REPLICAS + r) % 50_000;
        format!("{}:{port}", Self::ip(self.replica_node(v, r)))
    }

    fn replica_name(v: usize, r: usize) -> String {
        format!("{}-r-{r:08x}", Self::volume_name(v))
    }

    fn engine_name(v: usize) -> String {
        format!("{}-e-0", Self::volume_name(v))
    }

    fn disk_uuid(n: usize) -> String {
        format!("5ca1e000-0000-4000-8000-{n:012x}")
    }
}

#[cfg(test)]
mod tests;
