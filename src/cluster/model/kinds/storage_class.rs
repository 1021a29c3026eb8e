//! `storage.k8s.io/v1` StorageClass: replica counts of new volumes.

use super::super::objects::StorageClass;
use super::super::resource::{ConfirmRead, Resource};
use super::{Kind, Listed};

impl Kind for StorageClass {
    const RESOURCE: Resource = Resource {
        kind: Self::KIND,
        group: "storage.k8s.io",
        version: "v1",
        type_name: "StorageClass",
        plural: "storageclasses",
        display: "storageclasses.storage.k8s.io",
        namespace: None,
        confirm: ConfirmRead::Skip,
    };
}
