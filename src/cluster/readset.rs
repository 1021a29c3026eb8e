//! The read-set: the one declaration of what the cluster view holds and what a drain decision
//! reads (kinds, their API resources, how a confirmation reads each, and Settings by name).
//!
//! The watches ([`super::watch::targets`]), the confirmation reads ([`super::confirm`]) and the
//! snapshot loader ([`super::snapshot`]) all take their kinds from [`RESOURCES`]; the drain
//! analysis reads only the Settings in [`DRAIN_SETTINGS`], which is exactly what a confirmation
//! reads, so a confirmed decision and a cached one see the same state.

use super::{ObjectKind, COMPONENT_LABEL, INSTANCE_MANAGER_COMPONENT, LONGHORN_NAMESPACE};

/// Longhorn setting naming the storage network (`<ns>/<nad>` or empty).
pub const STORAGE_NETWORK_SETTING: &str = "storage-network";
/// Longhorn setting naming the current instance-manager image (picks the instance manager of
/// a replica while an upgrade runs old and new side by side).
pub const DEFAULT_INSTANCE_MANAGER_IMAGE_SETTING: &str = "default-instance-manager-image";
/// Longhorn kinds (`longhorn.io/v1beta2`) only `check cluster` reads, never the drain view: the
/// snapshot loader skips them without a log line.
pub const CHECK_ONLY_KINDS: [&str; 3] = ["BackupTarget", "RecurringJob", "Snapshot"];
/// Instance managers per page whenever the whole kind is listed (the watch's lists, `check
/// cluster`'s reads). An instance manager's status names every engine and replica it runs,
/// about 1.5 MB of JSON each at 10,000 volumes on 30 nodes: at kube's default of 500 per page
/// one 45 MB body held them all, which set the peak memory of a sync or relist (75-89 MiB at
/// 10,000 volumes; 50-56 MiB at four per page). The other kinds keep 500 per page.
pub const INSTANCE_MANAGER_LIST_PAGE: u32 = 4;
/// Every Setting a drain decision reads; a confirmation reads exactly these.
pub const DRAIN_SETTINGS: [&str; 2] = [STORAGE_NETWORK_SETTING, DEFAULT_INSTANCE_MANAGER_IMAGE_SETTING];

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

    /// True when a drain decision reads this kind (a confirmation reads it).
    pub fn drain_reads(&self) -> bool {
        self.confirm != ConfirmRead::Skip
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

pub use super::kinds::RESOURCES;

/// The read-set entry of a kind.
pub fn resource(kind: ObjectKind) -> &'static Resource {
    // RESOURCES follows ObjectKind::ALL, so the position is the discriminant (tested below).
    kind.resource()
}

/// The kind of an object with this `apiVersion`/`kind`, or `None` for kinds the view does not
/// hold (the snapshot loader skips those).
pub fn kind_of(api_version: &str, type_name: &str) -> Option<ObjectKind> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.type_name == type_name)
        .map(|r| r.kind)
}

/// The `apiVersion` the view reads `type_name` of `api_version`'s group at, when that is
/// another version: such an object is one the view would use, written at a version it cannot
/// read.
pub fn read_version_of(api_version: &str, type_name: &str) -> Option<String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    RESOURCES.iter().find(|r| r.group == group && r.type_name == type_name && r.version != version).map(|r| {
        if r.group.is_empty() {
            r.version.to_string()
        } else {
            format!("{}/{}", r.group, r.version)
        }
    })
}

/// True for a Setting a drain decision reads.
pub fn is_drain_setting(name: &str) -> bool {
    DRAIN_SETTINGS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::LONGHORN_API_VERSION;

    #[test]
    fn one_entry_per_kind_in_kind_order() {
        for (i, kind) in ObjectKind::ALL.into_iter().enumerate() {
            assert_eq!(RESOURCES[i].kind, kind);
            assert_eq!(resource(kind).kind, kind);
        }
    }

    #[test]
    fn kinds_are_recognised_as_the_model_names_them() {
        for r in &RESOURCES {
            assert_eq!(kind_of(&r.api_version(), r.type_name), Some(r.kind), "{r:?}");
            assert_eq!(ObjectKind::from_type(&r.api_version(), r.type_name), Some(r.kind));
        }
        assert_eq!(resource(ObjectKind::Replica).api_version(), LONGHORN_API_VERSION);
        assert_eq!(kind_of("apps/v1", "Deployment"), None);
        assert_eq!(kind_of("longhorn.io/v1beta1", "Volume"), None);
    }

    #[test]
    fn paths_and_selectors() {
        assert_eq!(resource(ObjectKind::Node).list_path(), "/api/v1/nodes");
        assert_eq!(resource(ObjectKind::Pod).list_path(), "/api/v1/namespaces/longhorn-system/pods");
        assert_eq!(resource(ObjectKind::StorageClass).list_path(), "/apis/storage.k8s.io/v1/storageclasses");
        assert_eq!(
            resource(ObjectKind::LonghornNode).list_path(),
            "/apis/longhorn.io/v1beta2/namespaces/longhorn-system/nodes"
        );
        assert_eq!(INSTANCE_MANAGER_POD_LABEL, ("longhorn.io/component", "instance-manager"));
        assert!(is_drain_setting("default-instance-manager-image"));
        assert!(!is_drain_setting("default-replica-count"));
        assert!(!resource(ObjectKind::StorageClass).drain_reads());
    }
}
