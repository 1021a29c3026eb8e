//! The object model: the kinds the view holds ([`kinds`]), their lean types ([`objects`]) and
//! what each declares of its API resource and its keys in the view's built-in indexes.

pub(super) mod builtin;
pub mod draining;
pub mod kinds;
pub mod meta;
pub mod name;
pub mod nameset;
pub mod objects;
pub mod readset;
mod resource;
mod stamp;
mod workloads;

pub use draining::Draining;
pub use kinds::*;
pub use objects::*;
