//! `longhorn.io/v1beta2` InstanceManager, indexed by node; listed a few at a time.

use super::super::builtin::{keep, BuiltIn};
use super::super::name::Name;
use super::super::objects::InstanceManager;
use super::super::resource::{longhorn, ConfirmRead, Resource, INSTANCE_MANAGER_LIST_PAGE};
use super::{Kind, Listed};

impl Kind for InstanceManager {
    const RESOURCE: Resource = longhorn(
        Self::KIND,
        "InstanceManager",
        "instancemanagers",
        "instancemanagers.longhorn.io",
        ConfirmRead::NodeAndSummary,
    );
    const PAGE_SIZE: u32 = INSTANCE_MANAGER_LIST_PAGE;

    fn index(builtin: &mut BuiltIn, name: &Name, im: &Self, add: bool) {
        let node = Some(&im.spec.node_id).filter(|n| !n.is_empty());
        keep(&mut builtin.instance_managers_by_node, node, name, add);
    }
}
