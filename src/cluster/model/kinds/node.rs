//! Core `v1` Node: cordons and drain taints.

use super::super::objects::Node;
use super::super::resource::{ConfirmRead, Resource};
use super::{Kind, Listed};

impl Kind for Node {
    const RESOURCE: Resource = Resource {
        kind: Self::KIND,
        group: "",
        version: "v1",
        type_name: "Node",
        plural: "nodes",
        display: "nodes",
        namespace: None,
        confirm: ConfirmRead::Whole(None),
    };
}
