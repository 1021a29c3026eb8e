//! What a kind declares of its API resource ([`Resource`]): group, version, kind, plural,
//! namespace, and how a confirmation reads it ([`ConfirmRead`]). Each kind's file under
//! `kinds/` fills one in; the read-set ([`super::readset`]) lists them all.

use super::{ObjectKind, COMPONENT_LABEL, INSTANCE_MANAGER_COMPONENT, LONGHORN_NAMESPACE};

/// Instance managers per page whenever the whole kind is listed: each names every engine and
/// replica it runs, so large pages set the peak memory of a sync (docs/scale.md).
pub const INSTANCE_MANAGER_LIST_PAGE: u32 = 4;

/// The label of instance-manager pods (`longhorn.io/component=instance-manager`).
pub const INSTANCE_MANAGER_POD_LABEL: (&str, &str) = (COMPONENT_LABEL, INSTANCE_MANAGER_COMPONENT);

/// How a confirmation for node N reads one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfirmRead {
    /// The whole kind in one LIST, narrowed to objects with this label (key, value) if any
    /// (small kinds: a few objects per node).
    Whole(Option<(&'static str, &'static str)>),
    /// Objects labelled `longhornnode=N` (to find N's volumes), then, with the volume kinds,
    /// every object of those volumes (engines: they change node as volumes attach, so both
    /// reads may hold one, and the later read's copy is kept).
    NodeAndVolumes,
    /// As `NodeAndVolumes`, but the per-volume read skips objects on N (`longhornnode!=N`): the
    /// node's read holds those (replicas: a replica's node is set once, when it is scheduled).
    NodeAndVolumesElsewhere,
    /// Objects of N's volumes (`longhornvolume in (...)`).
    Volumes,
    /// N's objects (label `longhorn.io/node=N`) whole, the others as the Table of the CRD's
    /// printer columns (instance managers: their instance lists matter only on N).
    NodeAndSummary,
    /// Read whole, and only when N has no Kubernetes Node (then a Longhorn node of that name is
    /// what makes N known).
    WhenNodeUnknown,
    /// Not read: drain decisions do not look at this kind.
    Skip,
}

impl ConfirmRead {
    /// Read by node first (`longhornnode=N`).
    pub fn by_node(self) -> bool {
        matches!(self, Self::NodeAndVolumes | Self::NodeAndVolumesElsewhere)
    }

    /// Read per volume (`longhornvolume in (...)`).
    pub fn by_volume(self) -> bool {
        matches!(self, Self::Volumes | Self::NodeAndVolumes | Self::NodeAndVolumesElsewhere)
    }
}

/// One kind the view holds: its API resource, where it lives, how a confirmation reads it.
#[derive(Clone, Copy, Debug)]
pub struct Resource {
    pub kind: ObjectKind,
    /// API group (`""` for the core group).
    pub group: &'static str,
    pub version: &'static str,
    /// The `kind` field of its objects.
    pub type_name: &'static str,
    pub plural: &'static str,
    /// How logs and metrics name it, e.g. `replicas.longhorn.io`.
    pub display: &'static str,
    /// `None` for cluster-scoped kinds, else the namespace watched and read.
    pub namespace: Option<&'static str>,
    pub confirm: ConfirmRead,
}

impl Resource {
    /// `apiVersion` of its objects (`v1`, `storage.k8s.io/v1`, `longhorn.io/v1beta2`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The collection path a LIST or WATCH goes to, e.g.
    /// `/apis/longhorn.io/v1beta2/namespaces/longhorn-system/replicas`.
    pub fn list_path(&self) -> String {
        let root = if self.group.is_empty() { "/api".to_string() } else { format!("/apis/{}", self.group) };
        match self.namespace {
            Some(ns) => format!("{root}/{}/namespaces/{ns}/{}", self.version, self.plural),
            None => format!("{root}/{}/{}", self.version, self.plural),
        }
    }
}

/// A Longhorn kind's entry (`longhorn.io/v1beta2`, in `longhorn-system`).
pub const fn longhorn(
    kind: ObjectKind,
    type_name: &'static str,
    plural: &'static str,
    display: &'static str,
    confirm: ConfirmRead,
) -> Resource {
    Resource {
        kind,
        group: "longhorn.io",
        version: "v1beta2",
        type_name,
        plural,
        display,
        namespace: Some(LONGHORN_NAMESPACE),
        confirm,
    }
}
