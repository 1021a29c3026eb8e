//! [`Object`], one typed object of any kind the view holds, and [`ObjectKind`], which kind.

use serde_json::Value;

use super::objects::*;

/// One object of a kind longhorn-guard understands, boxed: a list of objects costs a pointer
/// each, and the view keeps the box it is given.
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    Node(Box<Node>),
    Pod(Box<Pod>),
    StorageClass(Box<StorageClass>),
    Volume(Box<Volume>),
    Replica(Box<Replica>),
    Engine(Box<Engine>),
    LonghornNode(Box<LonghornNode>),
    Setting(Box<Setting>),
    InstanceManager(Box<InstanceManager>),
}

/// Which kind an object is, telling the two kinds named `Node` apart by apiVersion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    Node,
    Pod,
    StorageClass,
    Volume,
    Replica,
    Engine,
    LonghornNode,
    Setting,
    InstanceManager,
}

impl ObjectKind {
    /// Every kind the cluster view holds.
    pub const ALL: [ObjectKind; 9] = [
        Self::Node,
        Self::Pod,
        Self::StorageClass,
        Self::Volume,
        Self::Replica,
        Self::Engine,
        Self::LonghornNode,
        Self::Setting,
        Self::InstanceManager,
    ];

    /// The kind for an `apiVersion`/`kind` pair, or `None` for kinds longhorn-guard ignores.
    pub fn from_type(api_version: &str, kind: &str) -> Option<Self> {
        match (api_version, kind) {
            ("v1", "Node") => Some(Self::Node),
            ("v1", "Pod") => Some(Self::Pod),
            ("storage.k8s.io/v1", "StorageClass") => Some(Self::StorageClass),
            (LONGHORN_API_VERSION, "Volume") => Some(Self::Volume),
            (LONGHORN_API_VERSION, "Replica") => Some(Self::Replica),
            (LONGHORN_API_VERSION, "Engine") => Some(Self::Engine),
            (LONGHORN_API_VERSION, "Node") => Some(Self::LonghornNode),
            (LONGHORN_API_VERSION, "Setting") => Some(Self::Setting),
            (LONGHORN_API_VERSION, "InstanceManager") => Some(Self::InstanceManager),
            _ => None,
        }
    }

    /// True for Longhorn's own kinds (group `longhorn.io`).
    pub fn is_longhorn(self) -> bool {
        !matches!(self, Self::Node | Self::Pod | Self::StorageClass)
    }

    /// A short human name, e.g. `replicas.longhorn.io`.
    pub fn display(self) -> &'static str {
        match self {
            Self::Node => "nodes",
            Self::Pod => "pods",
            Self::StorageClass => "storageclasses.storage.k8s.io",
            Self::Volume => "volumes.longhorn.io",
            Self::Replica => "replicas.longhorn.io",
            Self::Engine => "engines.longhorn.io",
            Self::LonghornNode => "nodes.longhorn.io",
            Self::Setting => "settings.longhorn.io",
            Self::InstanceManager => "instancemanagers.longhorn.io",
        }
    }
}

impl Object {
    /// Parses a typed object of a known kind from its JSON form.
    pub fn from_value(kind: ObjectKind, value: Value) -> Result<Self, serde_json::Error> {
        Ok(match kind {
            ObjectKind::Node => Self::Node(serde_json::from_value(value)?),
            ObjectKind::Pod => Self::Pod(serde_json::from_value(value)?),
            ObjectKind::StorageClass => Self::StorageClass(serde_json::from_value(value)?),
            ObjectKind::Volume => Self::Volume(serde_json::from_value(value)?),
            ObjectKind::Replica => Self::Replica(serde_json::from_value(value)?),
            ObjectKind::Engine => Self::Engine(serde_json::from_value(value)?),
            ObjectKind::LonghornNode => Self::LonghornNode(serde_json::from_value(value)?),
            ObjectKind::Setting => Self::Setting(serde_json::from_value(value)?),
            ObjectKind::InstanceManager => Self::InstanceManager(serde_json::from_value(value)?),
        })
    }

    pub fn kind(&self) -> ObjectKind {
        match self {
            Self::Node(_) => ObjectKind::Node,
            Self::Pod(_) => ObjectKind::Pod,
            Self::StorageClass(_) => ObjectKind::StorageClass,
            Self::Volume(_) => ObjectKind::Volume,
            Self::Replica(_) => ObjectKind::Replica,
            Self::Engine(_) => ObjectKind::Engine,
            Self::LonghornNode(_) => ObjectKind::LonghornNode,
            Self::Setting(_) => ObjectKind::Setting,
            Self::InstanceManager(_) => ObjectKind::InstanceManager,
        }
    }

    pub fn metadata(&self) -> &Meta {
        match self {
            Self::Node(o) => &o.metadata,
            Self::Pod(o) => &o.metadata,
            Self::StorageClass(o) => &o.metadata,
            Self::Volume(o) => &o.metadata,
            Self::Replica(o) => &o.metadata,
            Self::Engine(o) => &o.metadata,
            Self::LonghornNode(o) => &o.metadata,
            Self::Setting(o) => &o.metadata,
            Self::InstanceManager(o) => &o.metadata,
        }
    }

    pub fn metadata_mut(&mut self) -> &mut Meta {
        match self {
            Self::Node(o) => &mut o.metadata,
            Self::Pod(o) => &mut o.metadata,
            Self::StorageClass(o) => &mut o.metadata,
            Self::Volume(o) => &mut o.metadata,
            Self::Replica(o) => &mut o.metadata,
            Self::Engine(o) => &mut o.metadata,
            Self::LonghornNode(o) => &mut o.metadata,
            Self::Setting(o) => &mut o.metadata,
            Self::InstanceManager(o) => &mut o.metadata,
        }
    }

    /// The object's name ("" when absent).
    pub fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or("")
    }
}
