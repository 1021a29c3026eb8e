//! Derived state the view keeps current: a [`Derived`] sees every typed [`Change`] as it is
//! applied and recomputes what it marked in [`Derived::flush`], once per batch. The rules hand
//! theirs to the view ([`ClusterView::derive`]) and find it again with [`ClusterView::derived`].

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
