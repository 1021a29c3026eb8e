//! How current the view is ([`Freshness`]), and the bookkeeping that keeps it: when each kind
//! last received data, which watches are failing, which objects could not be read.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use super::{ClusterView, ObjectKind};

/// Where the view's data came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Source {
    /// A snapshot file: the snapshot is the truth, it never goes stale.
    Snapshot(String),
    /// Live watches against the API server.
    Watch,
    /// Built in code (tests, confirmation reads).
    #[default]
    Direct,
}

/// How current the view is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Freshness {
    pub source: Source,
    /// True once every watched kind has finished its initial list.
    pub synced: bool,
    /// When the least recently updated kind last received data (initial list, event or
    /// confirmation read): the view is as old as its oldest kind, so one failing watch makes
    /// the whole view age. `None` until every kind has received data.
    pub updated_at: Option<SystemTime>,
    /// Objects (`kind/name`) the watches saw but could not read; while any is listed the view
    /// is not trusted for an allow.
    pub unreadable: Vec<String>,
    /// Kinds whose watch failed (API server unreachable, `410 Gone`, ...) and that have not been
    /// listed again since: the view is stale whatever its age.
    pub failing: Vec<&'static str>,
    /// The same age as [`Freshness::age`], on the monotonic clock, when it was computed: a
    /// wall clock stepped back (an NTP step, a resumed VM) cannot make old data look new.
    /// `None` before every kind has received data, and for snapshots.
    pub monotonic_age: Option<Duration>,
}

impl Freshness {
    /// How old the view's data is at `now` (zero for snapshots; `None` before the first sync).
    pub fn age(&self, now: SystemTime) -> Option<Duration> {
        match self.source {
            Source::Snapshot(_) => Some(Duration::ZERO),
            _ => self.updated_at.map(|t| now.duration_since(t).unwrap_or(Duration::ZERO)),
        }
    }

    /// True when the data may be relied on for an allow at `now` given the bound `max_age`:
    /// synced, every object readable, no watch failing, and every kind updated within `max_age`
    /// by the wall clock and by the monotonic clock.
    pub fn is_fresh(&self, now: SystemTime, max_age: Duration) -> bool {
        self.synced
            && self.unreadable.is_empty()
            && self.failing.is_empty()
            && self.age(now).is_some_and(|a| a <= max_age)
            && self.monotonic_age.is_none_or(|a| a <= max_age)
    }
}

/// The oldest of `times` over every kind, without allocating (every allow asks); `None` while
/// some kind has none.
fn oldest<T: Ord + Copy>(times: &HashMap<ObjectKind, T>) -> Option<T> {
    ObjectKind::ALL.iter().try_fold(None, |min: Option<T>, k| {
        let t = *times.get(k)?;
        Some(Some(min.map_or(t, |m| m.min(t))))
    })?
}

impl ClusterView {
    /// How current the view is: source, sync state, the age of its oldest kind, unreadable objects.
    pub fn freshness(&self) -> Freshness {
        let updated_at = oldest(&self.kind_updated);
        let mut unreadable: Vec<String> = self
            .unreadable
            .iter()
            .flat_map(|(k, names)| names.iter().map(move |n| format!("{}/{n}", k.display())))
            .collect();
        unreadable.sort();
        let failing = self.failing.iter().map(|k| k.display()).collect();
        let monotonic_age = match self.source {
            Source::Snapshot(_) => None,
            _ => oldest(&self.kind_seen).map(|t| t.elapsed()),
        };
        Freshness {
            source: self.source.clone(),
            synced: self.synced,
            updated_at,
            unreadable,
            failing,
            monotonic_age,
        }
    }

    /// [`Freshness::is_fresh`] of [`Self::freshness`].
    pub fn is_fresh(&self, now: SystemTime, max_age: Duration) -> bool {
        self.freshness().is_fresh(now, max_age)
    }

    /// The kind whose data is oldest on the monotonic clock, and its age (`None` while some
    /// kind has none): what a proof of the view waits for.
    pub fn oldest_kind(&self) -> Option<(ObjectKind, Duration)> {
        let ages = ObjectKind::ALL.iter().map(|k| Some((*k, self.kind_seen.get(k)?.elapsed())));
        ages.collect::<Option<Vec<_>>>()?.into_iter().max_by_key(|(_, age)| *age)
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The kinds current at `now` under `max_age` by the rule [`Freshness::is_fresh`] applies to
    /// the whole view: a synced watch view, the kind not failing, none of its objects
    /// unreadable, and data for it within `max_age` on both clocks. Empty for other views.
    pub fn current_kinds(
        &self,
        now: SystemTime,
        max_age: Duration,
    ) -> std::collections::BTreeSet<ObjectKind> {
        if self.source != Source::Watch || !self.synced {
            return Default::default();
        }
        ObjectKind::ALL
            .into_iter()
            .filter(|k| !self.failing.contains(k) && !self.unreadable.contains_key(k))
            .filter(|k| {
                self.kind_updated
                    .get(k)
                    .is_some_and(|t| now.duration_since(*t).unwrap_or(Duration::ZERO) <= max_age)
                    && self.kind_seen.get(k).is_some_and(|t| t.elapsed() <= max_age)
            })
            .collect()
    }

    /// Records that the watch of `kind` failed: until the kind is relisted
    /// ([`ClusterView::replace_kind`], [`ClusterView::apply_relist`]) the view may lack events
    /// and is not fresh, however recently it received data.
    pub fn note_watch_failed(&mut self, kind: ObjectKind) {
        self.failing.insert(kind);
        self.interrupted.remove(&kind);
        self.proofs.restart(kind);
    }

    /// Records that the watch of `kind` ended and could not be started again at once; it
    /// resumes from the same resource version, so nothing is lost, but the kind is failing
    /// until a BOOKMARK of the resumed watch ([`ClusterView::note_progress`]) shows it has
    /// delivered what it replays (or until a relist, should the watch fail meanwhile).
    pub fn note_watch_interrupted(&mut self, kind: ObjectKind) {
        if self.failing.insert(kind) {
            self.interrupted.insert(kind);
        }
    }

    /// Records a list's or a BOOKMARK's resource version ([`ClusterView::note_delivered`]);
    /// a BOOKMARK ends an interruption ([`ClusterView::note_watch_interrupted`]).
    pub fn note_progress(&mut self, kind: ObjectKind, rv: &str) -> bool {
        // Only a version that can be compared says how far the watch came.
        if super::proof::parse_version(rv).is_some() && self.interrupted.remove(&kind) {
            self.failing.remove(&kind);
        }
        self.note_delivered(kind, rv)
    }

    /// Records that the watch of `kind` starts a list: what it delivered before no longer
    /// counts; the completed list counts again ([`super::proof`]).
    pub fn note_list_started(&mut self, kind: ObjectKind) {
        self.proofs.restart(kind);
    }

    /// Records that the watch of `kind` delivered every change up to resource version `rv`
    /// (its list, an event, a BOOKMARK). A probe it reaches makes the kind as new as the
    /// probe's sending ([`super::proof`]); true when one did.
    pub fn note_delivered(&mut self, kind: ObjectKind, rv: &str) -> bool {
        let proven = self.proofs.delivered(kind, rv);
        self.touch_proven(kind, proven)
    }

    /// Records a probe of `kind`: a consistent read sent at `wall`/`mono` that returned list
    /// resource version `rv` ([`super::proof`]); true when the watch has already delivered it.
    pub fn note_probe(&mut self, kind: ObjectKind, rv: &str, wall: SystemTime, mono: Instant) -> bool {
        let proven = self.proofs.probed(kind, rv, wall, mono);
        self.touch_proven(kind, proven)
    }

    /// Makes `kind` as new as the probe just `proven` (if any, then true).
    fn touch_proven(&mut self, kind: ObjectKind, proven: Option<super::proof::Probe>) -> bool {
        if let Some(p) = proven {
            self.touch_kind_at(kind, p.wall, p.mono);
        }
        proven.is_some()
    }

    /// Records that the view holds a complete initial list of every kind. Each kind keeps the
    /// time its own data arrived: a kind listed early is as old as its list.
    pub fn mark_synced(&mut self) {
        self.synced = true;
    }

    /// Records that data for every kind arrived at `now` (a snapshot or a confirmation read).
    pub fn touch(&mut self, now: SystemTime) {
        for kind in ObjectKind::ALL {
            self.touch_kind(kind, now);
        }
    }

    /// Records that data for `kind` arrived at `now` (an event or a completed list).
    pub fn touch_kind(&mut self, kind: ObjectKind, now: SystemTime) {
        self.touch_kind_at(kind, now, Instant::now());
    }

    /// Records that `kind` holds data as new as `wall` and `mono` (each clock keeps the newest).
    pub fn touch_kind_at(&mut self, kind: ObjectKind, wall: SystemTime, mono: Instant) {
        let seen = self.kind_seen.entry(kind).or_insert(mono);
        *seen = (*seen).max(mono);
        let t = self.kind_updated.entry(kind).or_insert(wall);
        *t = (*t).max(wall);
    }

    /// Records that a watched object could not be read. The previous version (if any) stays
    /// in the view, and the view is not trusted for allows until the object is read again,
    /// deleted, or its kind relisted.
    pub fn note_unreadable(&mut self, kind: ObjectKind, name: &str) {
        self.unreadable.entry(kind).or_default().insert(name.to_string());
    }

    pub(super) fn clear_unreadable(&mut self, kind: ObjectKind, name: &str) {
        if let Some(set) = self.unreadable.get_mut(&kind) {
            set.remove(name);
            if set.is_empty() {
                self.unreadable.remove(&kind);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wall_clock_stepped_back_does_not_make_old_data_fresh() {
        let now = SystemTime::now();
        let bound = Duration::from_secs(5);
        let mut v = ClusterView::new(Source::Watch);
        v.touch(now);
        v.mark_synced();
        let f = v.freshness();
        assert!(f.monotonic_age.is_some_and(|a| a < bound), "{f:?}");
        assert!(f.is_fresh(now, bound));
        // The data is a minute old by the monotonic clock while the wall clock, stepped back
        // by a minute, says it is new.
        let stepped = Freshness { monotonic_age: Some(Duration::from_secs(60)), ..f.clone() };
        assert_eq!(stepped.age(now), Some(Duration::ZERO));
        assert!(!stepped.is_fresh(now, bound));
        // A snapshot is the truth however long ago it was loaded.
        let mut snap = ClusterView::new(Source::Snapshot("s".into()));
        snap.touch(now);
        snap.mark_synced();
        assert_eq!(snap.freshness().monotonic_age, None);
    }

    #[test]
    fn the_oldest_kind_is_the_one_last_touched_longest_ago_once_every_kind_has_data() {
        let (now, mono) = (SystemTime::now(), Instant::now());
        let mut v = ClusterView::new(Source::Watch);
        v.touch_kind_at(ObjectKind::Replica, now, mono - Duration::from_secs(9));
        assert_eq!(v.oldest_kind(), None, "other kinds have no data yet");
        for kind in ObjectKind::ALL.into_iter().filter(|k| *k != ObjectKind::Replica) {
            v.touch_kind_at(kind, now, mono - Duration::from_secs(2));
        }
        let (kind, age) = v.oldest_kind().unwrap();
        assert_eq!(kind, ObjectKind::Replica);
        assert!(age >= Duration::from_secs(9), "{age:?}");
    }

    #[test]
    fn the_view_answers_is_fresh_as_its_freshness_does() {
        let now = SystemTime::now();
        let bound = Duration::from_secs(5);
        let agree = |v: &ClusterView, at: SystemTime| {
            assert_eq!(v.is_fresh(at, bound), v.freshness().is_fresh(at, bound), "{:?}", v.freshness());
            v.is_fresh(at, bound)
        };
        let mut v = ClusterView::new(Source::Watch);
        assert!(!agree(&v, now), "nothing yet");
        v.touch_kind(ObjectKind::ALL[0], now);
        v.mark_synced();
        assert!(!agree(&v, now), "one kind only");
        v.touch(now);
        assert!(agree(&v, now));
        assert!(!agree(&v, now + Duration::from_secs(6)), "old by the wall clock");
        v.note_unreadable(ObjectKind::ALL[1], "odd");
        assert!(!agree(&v, now));
        v.clear_unreadable(ObjectKind::ALL[1], "odd");
        assert!(agree(&v, now));
        v.note_watch_failed(ObjectKind::ALL[2]);
        assert!(!agree(&v, now));
        let mut snap = ClusterView::new(Source::Snapshot("s".into()));
        snap.touch(now - Duration::from_secs(3600));
        assert!(!agree(&snap, now), "not synced");
        snap.mark_synced();
        assert!(agree(&snap, now), "a snapshot is the truth");
    }
}
