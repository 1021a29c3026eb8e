//! Core `v1` Pod: the instance-manager pods in `longhorn-system` (a snapshot may hold pods of
//! every namespace).

use super::super::builtin::BuiltIn;
use super::super::name::Name;
use super::super::objects::{Pod, LONGHORN_NAMESPACE};
use super::super::resource::{ConfirmRead, Resource, INSTANCE_MANAGER_POD_LABEL};
use super::{Kind, Listed};

impl Kind for Pod {
    const RESOURCE: Resource = Resource {
        kind: Self::KIND,
        group: "",
        version: "v1",
        type_name: "Pod",
        plural: "pods",
        display: "pods",
        namespace: Some(LONGHORN_NAMESPACE),
        confirm: ConfirmRead::Whole(Some(INSTANCE_MANAGER_POD_LABEL)),
    };
    const BY_NAMESPACE: bool = true;

    fn index(builtin: &mut BuiltIn, _name: &Name, pod: &Self, add: bool) {
        if pod.is_instance_manager() {
            let n = &mut builtin.instance_manager_pods;
            *n = if add { *n + 1 } else { *n - 1 };
        }
    }
}
