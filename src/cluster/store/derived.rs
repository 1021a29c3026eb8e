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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::cluster::store::Source;

    /// Counts its flushes.
    #[derive(Debug, Default)]
    struct Flushes(Arc<AtomicUsize>);

    impl Derived for Flushes {
        fn apply(&mut self, _: &ClusterView, _: Change<'_>, _: SystemTime) {}
        fn flush(&mut self, _: &ClusterView) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn clone_box(&self) -> Box<dyn Derived> {
            Box::new(Flushes(self.0.clone()))
        }
    }

    /// Another kind of state.
    #[derive(Debug)]
    struct Other;

    impl Derived for Other {
        fn apply(&mut self, _: &ClusterView, _: Change<'_>, _: SystemTime) {}
        fn flush(&mut self, _: &ClusterView) {}
        fn clone_box(&self) -> Box<dyn Derived> {
            Box::new(Other)
        }
    }

    #[test]
    fn a_state_of_a_kind_the_view_keeps_is_not_derived_twice() {
        let flushes = Arc::new(AtomicUsize::new(0));
        let states = || Derivations::new(vec![Box::new(Flushes(flushes.clone()))]);
        let now = SystemTime::now();
        let view = ClusterView::new(Source::Watch).derive(states(), now).derive(states(), now);
        assert_eq!(flushes.load(Ordering::Relaxed), 1, "the second derive kept a second copy");
        assert!(view.derived::<Flushes>().is_some());
        let view = view.derive(Derivations::new(vec![Box::new(Other)]), now);
        assert!(view.derived::<Other>().is_some(), "a state of another kind is kept");
    }
}
