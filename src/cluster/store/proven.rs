//! Whether the view is proven current right now, and why not ([`Unproven`]): what `/readyz`
//! follows (`serve --unready-after`) and what makes the API client renew its connections
//! ([`super::client::build_renewing`]), and when the API server last answered a consistent read.

use std::time::{Duration, Instant, SystemTime};

use super::{ClusterView, ObjectKind, Source};

/// Why the view is not proven current.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unproven {
    #[error("not every watched kind has finished its initial list")]
    NotSynced,
    /// These kinds' watches failed (or were interrupted) and are not current again.
    #[error("watches failing: {}", .0.join(", "))]
    WatchesFailing(Vec<&'static str>),
    #[error("{0} watched object(s) could not be read")]
    Unreadable(usize),
    /// Some kind's data is older than the bound, and no probe proved it current since; `age`
    /// is the age of the oldest kind (monotonic clock), when every kind has data.
    #[error("{}", match age {
        Some(age) => format!("its oldest kind's data is {:.1}s old and no probe proved it current since", age.as_secs_f64()),
        None => "some kind has no data".to_string(),
    })]
    Stale { age: Option<Duration> },
}

impl Unproven {
    /// The `reason` label of a readiness flip to unready (`longhorn_guard_readiness_flips_total`).
    pub fn label(&self) -> &'static str {
        match self {
            Self::NotSynced => "not_synced",
            Self::WatchesFailing(_) => "watches_failing",
            Self::Unreadable(_) => "objects_unreadable",
            Self::Stale { .. } => "view_stale",
        }
    }
}

impl ClusterView {
    /// `None` when the view is proven current at `now` under `max_age`: synced, no watch
    /// failing, every object readable and, when `by_age`, every kind's data within `max_age`
    /// on both clocks ([`super::Freshness::is_fresh`]). A snapshot is always proven. Without
    /// `by_age` (probes off: nothing proves a quiet view) the age does not count.
    pub fn unproven(&self, now: SystemTime, max_age: Duration, by_age: bool) -> Option<Unproven> {
        if let Source::Snapshot(_) = self.source {
            return None;
        }
        if !self.synced {
            return Some(Unproven::NotSynced);
        }
        if !self.failing.is_empty() {
            return Some(Unproven::WatchesFailing(self.failing.iter().map(|k| k.display()).collect()));
        }
        if !self.unreadable.is_empty() {
            return Some(Unproven::Unreadable(self.unreadable.values().map(|s| s.len()).sum()));
        }
        if by_age && self.current_kinds(now, max_age).len() < ObjectKind::ALL.len() {
            let age = self.freshness().monotonic_age;
            return Some(Unproven::Stale { age });
        }
        None
    }

    /// Records that the API server answered a consistent read (a probe, a confirmation's reads)
    /// at `at`: it can serve the reads a confirmation needs.
    pub fn note_read_answered(&mut self, at: Instant) {
        self.read_answered = self.read_answered.max(Some(at));
    }

    /// When the API server last answered a consistent read ([`ClusterView::note_read_answered`]).
    pub fn read_answered(&self) -> Option<Instant> {
        self.read_answered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_is_unproven_until_synced_and_while_a_watch_fails_or_its_data_is_old() {
        let now = SystemTime::now();
        let bound = Duration::from_secs(5);
        let mut v = ClusterView::new(Source::Watch);
        assert_eq!(v.unproven(now, bound, true), Some(Unproven::NotSynced));
        for kind in ObjectKind::ALL {
            v.replace_kind(kind, Vec::new(), now);
        }
        v.mark_synced();
        assert_eq!(v.unproven(now, bound, true), None);
        let later = now + Duration::from_secs(6);
        assert!(matches!(v.unproven(later, bound, true), Some(Unproven::Stale { .. })));
        assert_eq!(v.unproven(later, bound, false), None, "without probes the age does not count");
        v.note_watch_failed(ObjectKind::Replica);
        let why = v.unproven(now, bound, false).unwrap();
        assert_eq!(why, Unproven::WatchesFailing(vec!["replicas.longhorn.io"]));
        assert_eq!(
            (why.label(), why.to_string().as_str()),
            ("watches_failing", "watches failing: replicas.longhorn.io")
        );
        v.replace_kind(ObjectKind::Replica, Vec::new(), now);
        v.note_unreadable(ObjectKind::Volume, "v1");
        assert_eq!(v.unproven(now, bound, true), Some(Unproven::Unreadable(1)));
        let snap = ClusterView::new(Source::Snapshot("s".into()));
        assert_eq!(snap.unproven(later, bound, true), None);
    }

    #[test]
    fn the_newest_answered_read_is_kept() {
        let mut v = ClusterView::new(Source::Watch);
        assert_eq!(v.read_answered(), None);
        let t = Instant::now();
        v.note_read_answered(t + Duration::from_secs(2));
        v.note_read_answered(t);
        assert_eq!(v.read_answered(), Some(t + Duration::from_secs(2)));
    }
}
