//! `longhorn.io/v1beta2` Replica, indexed by node, volume and instance manager.

use super::super::builtin::{keep, BuiltIn};
use super::super::name::Name;
use super::super::objects::Replica;
use super::super::resource::{longhorn, ConfirmRead, Resource};
use super::{Kind, Listed};

impl Kind for Replica {
    const RESOURCE: Resource =
        longhorn(Self::KIND, "Replica", "replicas", "replicas.longhorn.io", ConfirmRead::NodeAndVolumesElsewhere);

    fn index(builtin: &mut BuiltIn, name: &Name, r: &Self, add: bool) {
        keep(&mut builtin.replicas_by_node, r.node_name(), name, add);
        keep(&mut builtin.replicas_by_volume, r.volume_name(), name, add);
        let im = Some(&r.status.instance_manager_name).filter(|n| !n.is_empty());
        keep(&mut builtin.replicas_by_instance_manager, im, name, add);
    }
}
