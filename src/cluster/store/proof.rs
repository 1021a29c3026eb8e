//! Proving a quiet kind current without reading it again.
//!
//! A *probe* is a consistent read of a kind sent at a known time: its list `resourceVersion` is
//! at least etcd's revision then. Once the view's own watch of the kind has delivered a version
//! at least the probe's (its list, events and BOOKMARKs), the view holds every change made before
//! the probe was sent. Versions compare as Kubernetes defines them (decimal integers without
//! leading zeros); anything else proves nothing. docs/drain-internals.md has the argument and
//! its limits.

use std::collections::{HashMap, VecDeque};
use std::time::{Instant, SystemTime};

use super::ObjectKind;

/// Probes kept per kind while the watch catches up; more push out the oldest (a newer probe
/// proves more).
const PENDING: usize = 16;

/// One probe: the list resource version a consistent read returned, and when it was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub resource_version: u64,
    pub wall: SystemTime,
    pub mono: Instant,
}

/// What each kind's watch has delivered and the probes it has not reached yet.
#[derive(Clone, Debug, Default)]
pub struct Proofs {
    kinds: HashMap<ObjectKind, KindProof>,
}

#[derive(Clone, Debug, Default)]
struct KindProof {
    /// Every change up to this version is in the view (`None`: no list completed since the
    /// watch started over).
    delivered: Option<u64>,
    pending: VecDeque<Probe>,
}

/// A resource version as a number, when it is one as Kubernetes defines it.
pub fn parse_version(rv: &str) -> Option<u64> {
    let well_formed = !rv.is_empty() && !rv.starts_with('0') && rv.bytes().all(|b| b.is_ascii_digit());
    well_formed.then(|| rv.parse().ok()).flatten()
}

impl Proofs {
    /// The kind's watch starts over (a list began, or the watch failed): what it delivered
    /// before no longer counts; it counts again from what it delivers next (the completed
    /// list, or the next event of a watch resumed where it left off: either continues the
    /// record without a gap). Pending probes stay.
    pub fn restart(&mut self, kind: ObjectKind) {
        self.kinds.entry(kind).or_default().delivered = None;
    }

    /// The kind's watch delivered every change up to `rv` (its list, an event, a BOOKMARK).
    /// Returns the newest probe this proves, if any.
    pub fn delivered(&mut self, kind: ObjectKind, rv: &str) -> Option<Probe> {
        let rv = parse_version(rv)?;
        let k = self.kinds.entry(kind).or_default();
        k.delivered = Some(k.delivered.map_or(rv, |d| d.max(rv)));
        k.settle()
    }

    /// A probe of the kind came back. Returns it when the watch has already delivered it.
    pub fn probed(&mut self, kind: ObjectKind, rv: &str, wall: SystemTime, mono: Instant) -> Option<Probe> {
        let probe = Probe { resource_version: parse_version(rv)?, wall, mono };
        let k = self.kinds.entry(kind).or_default();
        if k.pending.len() == PENDING {
            k.pending.pop_front();
        }
        k.pending.push_back(probe);
        k.settle()
    }
}

impl KindProof {
    /// Takes every pending probe the watch has reached; returns the newest by send time.
    fn settle(&mut self) -> Option<Probe> {
        let delivered = self.delivered?;
        let mut proven: Option<Probe> = None;
        self.pending.retain(|p| {
            if p.resource_version > delivered {
                return true;
            }
            if proven.is_none_or(|q| q.mono < p.mono) {
                proven = Some(*p);
            }
            false
        });
        proven
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const K: ObjectKind = ObjectKind::Replica;

    fn at(secs: u64) -> (SystemTime, Instant) {
        let (w, m) = (SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000), Instant::now());
        (w + Duration::from_secs(secs), m + Duration::from_secs(secs))
    }

    #[test]
    fn versions_are_decimal_integers_without_leading_zeros() {
        assert_eq!(parse_version("12345"), Some(12345));
        for bad in ["", "0", "012", "12a", "-1", "1.5", " 1", "99999999999999999999999"] {
            assert_eq!(parse_version(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_probe_is_proven_once_the_watch_delivers_its_version() {
        let mut p = Proofs::default();
        let (w, m) = at(1);
        assert_eq!(p.delivered(K, "100"), None);
        // The probe's read is newer than anything delivered: not yet.
        assert_eq!(p.probed(K, "120", w, m), None);
        assert_eq!(p.delivered(K, "119"), None);
        let proven = p.delivered(K, "120").expect("delivered up to the probe");
        assert_eq!((proven.resource_version, proven.wall, proven.mono), (120, w, m));
        // Proven once: a later bookmark proves nothing more.
        assert_eq!(p.delivered(K, "130"), None);
        // A probe the watch has already passed is proven at once.
        let (w2, m2) = at(2);
        assert_eq!(p.probed(K, "125", w2, m2).map(|q| q.wall), Some(w2));
    }

    #[test]
    fn the_newest_probe_reached_wins_and_older_versions_never_go_back() {
        let mut p = Proofs::default();
        p.delivered(K, "10");
        let ((w1, m1), (w2, m2), (w3, m3)) = (at(1), at(2), at(3));
        p.probed(K, "20", w1, m1);
        p.probed(K, "30", w2, m2);
        p.probed(K, "40", w3, m3);
        assert_eq!(p.delivered(K, "35").map(|q| q.wall), Some(w2));
        // An event with an older version (a replay) does not lower what was delivered.
        assert_eq!(p.delivered(K, "12"), None);
        assert_eq!(p.delivered(K, "40").map(|q| q.wall), Some(w3));
    }

    #[test]
    fn a_restarted_watch_proves_nothing_until_its_list_and_kinds_are_apart() {
        let mut p = Proofs::default();
        p.delivered(K, "50");
        p.restart(K);
        let (w, m) = at(1);
        // Delivered 50 before the restart: the probe at 40 waits for the new list.
        assert_eq!(p.probed(K, "40", w, m), None);
        // Another kind's progress proves nothing for this one.
        assert_eq!(p.delivered(ObjectKind::Volume, "60"), None);
        assert_eq!(p.delivered(K, "45").map(|q| q.wall), Some(w));
    }

    #[test]
    fn unreadable_versions_prove_nothing() {
        let mut p = Proofs::default();
        let (w, m) = at(1);
        assert_eq!(p.probed(K, "abc", w, m), None);
        assert_eq!(p.delivered(K, "999"), None);
        assert_eq!(p.probed(K, "", w, m), None);
        p.probed(K, "1000", w, m);
        assert_eq!(p.delivered(K, "x1000"), None);
        assert_eq!(p.delivered(K, "1000").map(|q| q.resource_version), Some(1000));
    }

    #[test]
    fn pending_probes_are_bounded_keeping_the_newest() {
        let mut p = Proofs::default();
        for i in 0..(PENDING as u64 + 10) {
            let (w, m) = at(i);
            p.probed(K, &(100 + i).to_string(), w, m);
        }
        assert_eq!(p.kinds[&K].pending.len(), PENDING);
        let newest = p.delivered(K, "1000").unwrap();
        assert_eq!(newest.resource_version, 100 + PENDING as u64 + 9);
    }
}
