//! The cluster layer, in three sub-layers that import one way (docs/layers.md): the object
//! model ([`model`]: the watched kinds and their types), the view that holds and indexes them
//! ([`store`]: [`ClusterView`] and its questions) and the ways it is filled ([`sync`]: watches,
//! snapshot, probes). The rest of the crate names their items through this module.

pub mod model;
pub mod store;
pub mod sync;

pub use model::*;
pub use store::*;
pub use sync::*;
