//! Derived state that the view keeps current as objects arrive and leave.
//!
//! A [`Derived`] sees every change as it is applied, typed by kind ([`Change`]: the old and the
//! new version of one object), like kubert's `IndexNamespacedResource`; it notes what it must
//! recompute and recomputes it in [`Derived::flush`] once per batch (one event, or one whole
//! relist). The rules that need derived state hand it to the view when the view is made
//! ([`ClusterView::derive`]); the view knows none of them, and they find their state again
//! with [`ClusterView::derived`].

use std::any::Any;
use std::fmt;
use std::time::SystemTime;

use super::kinds::Change;
use super::ClusterView;

/// Derived state kept current with the view.
pub trait Derived: Send + Sync + fmt::Debug + Any {
    /// One object changed; `view` already holds the new version (and no longer the old one).
    /// `now` dates the change.
    fn apply(&mut self, view: &ClusterView, change: Change<'_>, now: SystemTime);
    /// Brings the derived state up to date with every change noted since the last flush.
    fn flush(&mut self, view: &ClusterView);
    /// A copy (views are cloned, e.g. by `lint` to try settings).
    fn clone_box(&self) -> Box<dyn Derived>;
    /// For [`ClusterView::derived`].
    fn as_any(&self) -> &dyn Any;
}

/// The derived states a view keeps.
#[derive(Debug, Default)]
pub struct Derivations(pub(super) Vec<Box<dyn Derived>>);

impl Derivations {
    /// These derived states, each starting empty.
    pub fn new(states: Vec<Box<dyn Derived>>) -> Self {
        Self(states)
    }
}

impl Clone for Derivations {
    fn clone(&self) -> Self {
        Self(self.0.iter().map(|i| i.clone_box()).collect())
    }
}
