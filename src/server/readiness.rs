//! `/readyz` that follows the cluster view: 503 with the reason once the view has been
//! unproven ([`Unproven`]) for `--unready-after` with no consistent read answered within
//! `drain.maxViewAge`, ready again once it is proven or a read is answered (docs/drain.md,
//! "Readiness"). [`Readiness::observe`] also runs on each [`TICK`], so flips are counted and
//! logged when they happen.

use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::cluster::{ClusterView, Unproven};
use crate::exposition::register;

/// How often the server looks at the view between requests.
pub const TICK: Duration = Duration::from_millis(250);

/// When the view makes the replica unready.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// How long the view may stay unproven (with no consistent read answered within `max_view_age`) before `/readyz`
    /// turns 503; zero: never for that reason.
    pub unready_after: Duration,
    /// `drain.maxViewAge`.
    pub max_view_age: Duration,
    /// The view's age counts (probes run); else only failing watches and unreadable objects.
    pub by_age: bool,
}

/// What `/readyz` answers for the view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Ready,
    NotSynced,
    /// Synced, not yet proven current since the start: evictions would wait for confirmations
    /// (up to `--unready-after` after the sync; then the view is judged as any unproven one).
    Proving,
    /// Unready, with the reason (one line).
    Unready(String),
}

#[derive(Debug, Default)]
struct State {
    /// Since when the view is unproven (monotonic, wall), as far as observed; for a stale
    /// view, since its data last arrived.
    unproven_since: Option<(Instant, SystemTime)>,
    /// Unready now, and for which reason label.
    unready: Option<&'static str>,
    /// When the view was first observed synced.
    synced_at: Option<Instant>,
    /// The view has been proven current at least once.
    proven_once: bool,
}

/// The readiness state of one server, and its metrics as of the last [`Readiness::observe`].
#[derive(Debug)]
pub struct Readiness {
    rule: Rule,
    state: Mutex<State>,
    ready: Gauge,
    unproven_since: Gauge<f64, AtomicU64>,
    /// `to`, `reason`.
    flips: Family<crate::exposition::Labels<2>, Counter>,
}

impl Readiness {
    pub fn new(rule: Rule) -> Self {
        let r = Self {
            rule,
            state: Mutex::default(),
            ready: Gauge::default(),
            unproven_since: Gauge::default(),
            flips: Family::default(),
        };
        r.ready.set(1);
        r
    }

    /// Adds the readiness metrics to `registry` (they stay shared with `self`).
    pub fn register(&self, r: &mut Registry) {
        register(r, "longhorn_guard_ready", "0 while /readyz is 503 because the cluster view cannot be proven or confirmed (--unready-after), else 1.", self.ready.clone());
        register(r, "longhorn_guard_cluster_view_unproven_since_timestamp_seconds", "Unix time since which the cluster view is not proven current (a watch failing, an object unreadable, or data past drain.maxViewAge with no proof); 0 while proven.", self.unproven_since.clone());
        register(r, "longhorn_guard_readiness_flips", "Times /readyz turned unready (to=\"unready\", by what kept the view unproven) or ready again (to=\"ready\": proven, or a consistent read answered).", self.flips.clone());
    }

    /// Looks at `view` at `now`/`wall`: what `/readyz` answers, counting a flip when it changed.
    pub fn observe(&self, view: &ClusterView, now: Instant, wall: SystemTime) -> Verdict {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let verdict = self.judge(&mut st, view, now, wall);
        self.ready.set(i64::from(st.unready.is_none()));
        let since = st.unproven_since.map(|(_, w)| w.duration_since(SystemTime::UNIX_EPOCH));
        self.unproven_since.set(since.map_or(0.0, |d| d.map_or(0.0, |d| d.as_secs_f64())));
        verdict
    }

    fn judge(&self, st: &mut State, view: &ClusterView, now: Instant, wall: SystemTime) -> Verdict {
        let mut why = view.unproven(wall, self.rule.max_view_age, self.rule.by_age);
        // The first proof must leave half of maxViewAge to spare: a probe sent during a list
        // longer than that proves the view only as of the probe, and a proof about to lapse
        // would send the first evictions after ready to confirmations. Only while a new
        // replica waits for its first proof (up to --unready-after after the sync).
        let waiting = st.synced_at.is_none_or(|t| now.saturating_duration_since(t) < self.rule.unready_after);
        if why.is_none() && !st.proven_once && self.rule.by_age && waiting {
            why = view.unproven(wall, self.rule.max_view_age / 2, true);
        }
        let answered = view.read_answered();
        let Some(why) = why else {
            st.unproven_since = None;
            if !st.proven_once {
                let after_sync_ms =
                    st.synced_at.map_or(0, |t| now.saturating_duration_since(t).as_millis() as u64);
                tracing::info!(after_sync_ms, "cluster view proven current: /readyz is 200");
            }
            st.proven_once = true;
            self.flip_ready(st, "proven");
            return Verdict::Ready;
        };
        let observed = st.unproven_since.get_or_insert((now, wall));
        // With probes, the view was proven at best when its oldest kind last had data: a watch
        // that fails, or goes silent, counts from then.
        let data_age = match &why {
            Unproven::Stale { age } => *age,
            _ if self.rule.by_age => view.freshness().monotonic_age,
            _ => None,
        };
        if let Some(age) = data_age {
            if let Some(data) = now.checked_sub(age).filter(|d| *d < observed.0) {
                *observed = (data, wall - age);
            }
        }
        let (since, _) = *observed;
        if why == Unproven::NotSynced {
            return Verdict::NotSynced;
        }
        // Ready means fast: until its first proof the view would send evictions to
        // confirmations, so a new replica waits for it (bounded, as an unproven view is).
        let synced_at = *st.synced_at.get_or_insert(now);
        if !st.proven_once && now.saturating_duration_since(synced_at) < self.rule.unready_after {
            return Verdict::Proving;
        }
        // A read answered within maxViewAge, since the view became unproven, shows that
        // confirmations can work.
        let last_answer = answered.filter(|t| *t > since);
        let reads_work =
            last_answer.is_some_and(|t| now.saturating_duration_since(t) < self.rule.max_view_age);
        let stuck_for = now.saturating_duration_since(since);
        let after = self.rule.unready_after;
        if after.is_zero() || stuck_for < after || reads_work {
            self.flip_ready(st, "reads_answered");
            return Verdict::Ready;
        }
        if st.unready.is_none() {
            st.unready = Some(why.label());
            self.flips.get_or_create(&[("to", "unready"), ("reason", why.label())]).inc();
            tracing::warn!(reason = why.label(), detail = %why, "/readyz turns 503: the cluster view cannot be proven or confirmed");
        }
        let reads = match last_answer {
            Some(t) => format!(
                "the last consistent read was answered {:.1}s ago",
                now.duration_since(t).as_secs_f64()
            ),
            None => "no consistent read (probe or confirmation) was answered since".to_string(),
        };
        Verdict::Unready(format!(
            "cluster view unproven for {:.1}s (--unready-after {}): {why}; {reads}; the API server or its etcd member may be cut off (docs/drain.md, \"Readiness\")",
            now.duration_since(since).as_secs_f64(),
            humantime::format_duration(after),
        ))
    }

    /// Back to ready (counted under `reason`) if it was not.
    fn flip_ready(&self, st: &mut State, reason: &'static str) {
        if st.unready.take().is_some() {
            self.flips.get_or_create(&[("to", "ready"), ("reason", reason)]).inc();
            tracing::info!(reason, "/readyz is 200 again: the cluster view is proven or confirmed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::watch::tests::synced;
    use crate::cluster::{ObjectKind, Source};

    const RULE: Rule =
        Rule { unready_after: Duration::from_secs(10), max_view_age: Duration::from_secs(5), by_age: true };

    /// Readiness under `rule` that has seen a proven view once (a replica past its start).
    fn started(rule: Rule) -> Readiness {
        let r = Readiness::new(rule);
        let now = SystemTime::now();
        assert_eq!(r.observe(&synced(now), Instant::now(), now), Verdict::Ready);
        r
    }

    #[test]
    fn a_synced_view_waits_for_its_first_proof_at_most_the_bound() {
        let (w0, s) = (SystemTime::now(), Duration::from_secs);
        let t = Instant::now();
        // Listed long ago (a slow sync): stale until a probe proves it.
        let mut v = synced(w0 - s(8));
        let r = Readiness::new(RULE);
        assert_eq!(r.observe(&ClusterView::new(Source::Watch), t, w0), Verdict::NotSynced);
        assert_eq!(r.observe(&v, t, w0), Verdict::Proving);
        assert_eq!(r.observe(&v, t + s(9), w0), Verdict::Proving);
        // Not proven within --unready-after of the sync: judged as any unproven view.
        assert!(matches!(r.observe(&v, t + s(10), w0), Verdict::Unready(_)));
        // A first proof with less than half of maxViewAge to spare does not count yet; once
        // ready, a view proven within maxViewAge stays ready.
        let r = Readiness::new(RULE);
        assert_eq!(r.observe(&synced(w0 - s(3)), t, w0), Verdict::Proving, "3 s old, 2 s to spare");
        assert_eq!(r.observe(&synced(w0 - s(2)), t, w0), Verdict::Ready, "2 s old");
        assert_eq!(r.observe(&synced(w0 - s(4)), t, w0), Verdict::Ready, "ready once");
        // Never proven with the spare: past --unready-after the view is judged by maxViewAge.
        let r = Readiness::new(RULE);
        assert_eq!(r.observe(&synced(w0 - s(3)), t, w0), Verdict::Proving);
        assert_eq!(r.observe(&synced(w0 - s(3)), t + s(10), w0), Verdict::Ready);
        let r = Readiness::new(RULE);
        assert_eq!(r.observe(&v, t, w0), Verdict::Proving);
        v.touch(w0);
        assert_eq!(r.observe(&v, t + s(1), w0), Verdict::Ready, "proven");
        // Once proven, an unproven view is ready until the bound, as before.
        let v = synced(w0 - s(8));
        assert_eq!(r.observe(&v, t + s(2), w0), Verdict::Ready);
        // Without probes a synced view is proven at once.
        let r = Readiness::new(Rule { by_age: false, ..RULE });
        assert_eq!(r.observe(&v, t, w0), Verdict::Ready);
    }

    #[test]
    fn unready_after_the_bound_with_a_reason_and_ready_again_once_proven() {
        let (t0, w0) = (Instant::now(), SystemTime::now());
        let r = Readiness::new(RULE);
        let mut v = synced(w0);
        assert_eq!(r.observe(&v, t0, w0), Verdict::Ready);
        v.note_watch_failed(ObjectKind::Replica);
        assert_eq!(r.observe(&v, t0, w0), Verdict::Ready, "not stuck yet");
        let s = Duration::from_secs;
        assert_eq!(r.observe(&v, t0 + s(9), w0), Verdict::Ready);
        let Verdict::Unready(why) = r.observe(&v, t0 + s(10), w0) else { panic!("unready at the bound") };
        assert!(why.starts_with("cluster view unproven for 10.0s (--unready-after 10s): watches failing: replicas.longhorn.io; no consistent read"), "{why}");
        assert!(r.ready.get() == 0 && r.unproven_since.get() > 0.0, "{r:?}");
        // A read answered says confirmations work again: ready, counted as such.
        v.note_read_answered(t0 + s(11));
        assert_eq!(r.observe(&v, t0 + s(12), w0), Verdict::Ready);
        assert_eq!(r.observe(&v, t0 + s(15), w0), Verdict::Ready, "that read is 4s old");
        assert!(matches!(r.observe(&v, t0 + s(16), w0), Verdict::Unready(_)), "that read is maxViewAge old");
        v.replace_kind(ObjectKind::Replica, Vec::new(), w0);
        assert_eq!(r.observe(&v, t0 + s(22), w0), Verdict::Ready);
        assert!(r.ready.get() == 1 && r.unproven_since.get() == 0.0, "{r:?}");
        let flips = |to, reason| r.flips.get(&[("to", to), ("reason", reason)]).map(|c| c.get());
        assert_eq!(flips("ready", "proven"), Some(1));
        assert_eq!(flips("ready", "reads_answered"), Some(1));
        assert_eq!(flips("unready", "watches_failing"), Some(2));
    }

    #[test]
    fn with_probes_a_failed_watch_counts_from_the_last_proof() {
        let (w0, s) = (SystemTime::now(), Duration::from_secs);
        let mut v = ClusterView::new(Source::Watch);
        let proven = Instant::now() - s(8);
        for kind in ObjectKind::ALL {
            v.touch_kind_at(kind, w0 - s(8), proven);
        }
        v.mark_synced();
        v.note_watch_failed(ObjectKind::Replica);
        let t = Instant::now();
        let r = started(RULE);
        assert_eq!(r.observe(&v, t, w0), Verdict::Ready);
        // Failing for 2 s, proven last 10 s ago: unready.
        assert!(
            matches!(r.observe(&v, t + s(2), w0), Verdict::Unready(why) if why.contains("watches failing"))
        );
        let r = started(Rule { by_age: false, ..RULE });
        r.observe(&v, t, w0);
        assert_eq!(r.observe(&v, t + s(2), w0), Verdict::Ready, "without probes, from the failure");
    }

    #[test]
    fn an_old_view_counts_only_with_probes_and_zero_turns_it_off() {
        let (t0, w0) = (Instant::now(), SystemTime::now());
        let s = Duration::from_secs;
        let v = synced(w0 - s(30));
        let r = started(RULE);
        assert_eq!(r.observe(&v, t0, w0), Verdict::Ready);
        assert!(
            matches!(r.observe(&v, t0 + s(10), w0), Verdict::Unready(why) if why.contains("no probe proved it current"))
        );
        let r = Readiness::new(Rule { by_age: false, ..RULE });
        assert_eq!(r.observe(&v, t0 + s(60), w0), Verdict::Ready);
        let r = Readiness::new(Rule { unready_after: Duration::ZERO, ..RULE });
        r.observe(&v, t0, w0);
        assert_eq!(r.observe(&v, t0 + s(60), w0), Verdict::Ready);
        let r = Readiness::new(RULE);
        assert_eq!(r.observe(&ClusterView::new(Source::Watch), t0, w0), Verdict::NotSynced);
    }
}
