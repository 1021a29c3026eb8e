//! `longhorn.io/v1beta2` Node (a Longhorn node).

use super::super::objects::LonghornNode;
use super::super::resource::{longhorn, ConfirmRead, Resource};
use super::{Kind, Listed};

impl Kind for LonghornNode {
    const RESOURCE: Resource =
        longhorn(Self::KIND, "Node", "nodes", "nodes.longhorn.io", ConfirmRead::WhenNodeUnknown);
}
