//! Derived state that the view keeps current as objects arrive and leave.
//!
//! An index sees every change as it is applied (like kubert's `IndexNamespacedResource`:
//! [`ViewIndex::apply`] and [`ViewIndex::delete`]), notes what it must recompute, and
//! recomputes it in [`ViewIndex::flush`] once per batch (one event, or one whole relist).
//! The policy installs its indexes on a view with [`ClusterView::add_index`] and finds them
//! again with [`ClusterView::index`].

use std::any::Any;
use std::fmt;

use super::{ClusterView, Object, ObjectKind};

/// Derived state kept current with the view.
pub trait ViewIndex: Send + Sync + fmt::Debug + Any {
    /// `kind`/`name` was inserted or replaced; `old` is the version it replaced (`None` when
    /// new). `view` already holds the new version.
    fn apply(&mut self, view: &ClusterView, kind: ObjectKind, name: &str, old: Option<&Object>);
    /// `old` left the view (`view` no longer holds it).
    fn delete(&mut self, view: &ClusterView, old: &Object);
    /// Brings the derived state up to date with every change noted since the last flush.
    fn flush(&mut self, view: &ClusterView);
    /// Recomputes the derived state from the whole view.
    fn rebuild(&mut self, view: &ClusterView);
    /// A copy (views are cloned, e.g. by `lint` to try settings).
    fn clone_box(&self) -> Box<dyn ViewIndex>;
    /// For [`ClusterView::index`].
    fn as_any(&self) -> &dyn Any;
}

/// The indexes a view owns.
#[derive(Debug, Default)]
pub(super) struct Indexes(pub(super) Vec<Box<dyn ViewIndex>>);

impl Clone for Indexes {
    fn clone(&self) -> Self {
        Self(self.0.iter().map(|i| i.clone_box()).collect())
    }
}
