//! Filling the view: watches and their relists ([`watch`]), snapshot files ([`snapshot`]),
//! probes ([`probe`]), and the counted API clients and request counters they use.

pub mod client;
pub mod probe;
pub mod snapshot;
pub mod stats;
pub mod watch;
pub mod watched;

use super::model::*;
use super::store::*;
