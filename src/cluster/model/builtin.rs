//! The view's built-in secondary indexes, which its questions ([`super::queries`]) answer
//! from. Each kind adds and removes its own keys ([`super::kinds::Kind::index`]).

use std::collections::BTreeSet;

use super::name::Name;
use super::nameset::{add, del, Index};

/// The built-in indexes.
#[derive(Clone, Debug, Default)]
pub struct BuiltIn {
    pub replicas_by_node: Index,
    pub replicas_by_volume: Index,
    pub engines_by_volume: Index,
    pub engines_by_node: Index,
    pub instance_managers_by_node: Index,
    /// Replicas by `status.instanceManagerName`.
    pub replicas_by_instance_manager: Index,
    /// How many of the view's pods are instance-manager pods.
    pub instance_manager_pods: usize,
    /// Engines whose status reports a rebuild in progress (for the stalled-rebuild metric).
    pub rebuilding: BTreeSet<Name>,
}

/// Adds `name` under `key` (when there is one), or removes it.
pub fn keep(index: &mut Index, key: Option<&Name>, name: &Name, add_it: bool) {
    match key {
        Some(key) if add_it => add(index, key, name),
        Some(key) => del(index, key, name),
        None => {}
    }
}
