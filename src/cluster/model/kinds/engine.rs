//! `longhorn.io/v1beta2` Engine, indexed by node and volume; the rebuilding ones kept apart.

use super::super::builtin::{keep, BuiltIn};
use super::super::name::Name;
use super::super::objects::Engine;
use super::super::resource::{longhorn, ConfirmRead, Resource};
use super::{Kind, Listed};

impl Kind for Engine {
    const RESOURCE: Resource =
        longhorn(Self::KIND, "Engine", "engines", "engines.longhorn.io", ConfirmRead::NodeAndVolumes);

    fn index(builtin: &mut BuiltIn, name: &Name, e: &Self, add: bool) {
        keep(&mut builtin.engines_by_node, e.node_name(), name, add);
        keep(&mut builtin.engines_by_volume, e.volume_name(), name, add);
        if !add {
            builtin.rebuilding.remove(name.as_str());
        } else if e.status.rebuild_status.values().any(|rs| rs.is_rebuilding) {
            builtin.rebuilding.insert(name.clone());
        }
    }
}
