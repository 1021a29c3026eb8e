//! The read-set: the one declaration of the kinds the view holds ([`RESOURCES`]), which the
//! watches, the confirmation reads and the snapshot loader all take, and of the Settings a drain
//! decision reads ([`DRAIN_SETTINGS`]), exactly what a confirmation reads.

/// Longhorn setting naming the storage network (`<ns>/<nad>` or empty).
pub const STORAGE_NETWORK_SETTING: &str = "storage-network";
/// Longhorn setting naming the current instance-manager image (picks the instance manager of
/// a replica while an upgrade runs old and new side by side).
pub const DEFAULT_INSTANCE_MANAGER_IMAGE_SETTING: &str = "default-instance-manager-image";
/// Longhorn kinds (`longhorn.io/v1beta2`) only `check cluster` reads, never the drain view: the
/// snapshot loader skips them without a log line.
pub const CHECK_ONLY_KINDS: [&str; 3] = ["BackupTarget", "RecurringJob", "Snapshot"];
/// Every Setting a drain decision reads; a confirmation reads exactly these.
pub const DRAIN_SETTINGS: [&str; 2] = [STORAGE_NETWORK_SETTING, DEFAULT_INSTANCE_MANAGER_IMAGE_SETTING];

pub use super::kinds::RESOURCES;
pub use super::resource::{
    longhorn, ConfirmRead, Resource, INSTANCE_MANAGER_LIST_PAGE, INSTANCE_MANAGER_POD_LABEL,
};

/// The `apiVersion` the view reads `type_name` of `api_version`'s group at, when that is
/// another version: such an object is one the view would use, written at a version it cannot
/// read.
pub fn read_version_of(api_version: &str, type_name: &str) -> Option<String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.type_name == type_name && r.version != version)
        .map(Resource::api_version)
}

/// True for a Setting a drain decision reads.
pub fn is_drain_setting(name: &str) -> bool {
    DRAIN_SETTINGS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::model::{ObjectKind, LONGHORN_API_VERSION};

    #[test]
    fn one_entry_per_kind_in_kind_order() {
        for (i, kind) in ObjectKind::ALL.into_iter().enumerate() {
            assert_eq!(RESOURCES[i].kind, kind);
            assert_eq!(kind.resource().kind, kind);
        }
    }

    #[test]
    fn kinds_are_recognised_as_the_model_names_them() {
        for r in &RESOURCES {
            assert_eq!(ObjectKind::from_type(&r.api_version(), r.type_name), Some(r.kind), "{r:?}");
        }
        assert_eq!(ObjectKind::Replica.resource().api_version(), LONGHORN_API_VERSION);
        assert_eq!(ObjectKind::from_type("apps/v1", "Deployment"), None);
        assert_eq!(ObjectKind::from_type("longhorn.io/v1beta1", "Volume"), None);
    }

    #[test]
    fn paths_and_selectors() {
        assert_eq!(ObjectKind::Node.resource().list_path(), "/api/v1/nodes");
        assert_eq!(ObjectKind::Pod.resource().list_path(), "/api/v1/namespaces/longhorn-system/pods");
        assert_eq!(ObjectKind::StorageClass.resource().list_path(), "/apis/storage.k8s.io/v1/storageclasses");
        assert_eq!(
            ObjectKind::LonghornNode.resource().list_path(),
            "/apis/longhorn.io/v1beta2/namespaces/longhorn-system/nodes"
        );
        assert_eq!(INSTANCE_MANAGER_POD_LABEL, ("longhorn.io/component", "instance-manager"));
        assert!(is_drain_setting("default-instance-manager-image"));
        assert!(!is_drain_setting("default-replica-count"));
    }
}
