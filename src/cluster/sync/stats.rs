//! Process-wide counters of the requests longhorn-guard sends to the API server and of drain
//! confirmations, rendered into `/metrics`. Every label value comes from a fixed set.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use super::readset::RESOURCES;
use super::ObjectKind;
use crate::exposition::{family, NO_LABELS};

/// Values of the `verb` label, in [`Verb`] order.
pub const VERBS: [&str; 8] = ["get", "list", "watch", "create", "update", "patch", "delete", "other"];
/// The `kind` label of a request to a resource outside the read-set.
pub const OTHER_KIND: &str = "other";
/// Upper bounds (seconds) of the confirmation latency histogram: a few LISTs on a healthy API
/// server, up to the API server's 10 s default webhook timeout.
pub const CONFIRMATION_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

const KINDS: usize = RESOURCES.len() + 1;

/// What a request does, as the API server's audit log names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    Other,
}

/// How one confirmation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfirmResult {
    /// The fresh state allows the eviction.
    Allowed,
    /// The fresh state denies it (the cached allow was wrong).
    Denied,
    /// The reads failed, timed out or were unusable: denied as "could not confirm".
    Failed,
}

impl ConfirmResult {
    pub const ALL: [ConfirmResult; 3] = [Self::Allowed, Self::Denied, Self::Failed];

    /// The `result` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::Failed => "failed",
        }
    }
}

/// Why a watch failed, as the `reason` label of `longhorn_guard_watch_errors_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFault {
    /// `410 Gone` ("too old resource version"): the API server no longer has the events
    /// since the watch's resource version; the kind is relisted.
    Gone,
    /// Anything else: the API server unreachable, a closed connection, an error status.
    Error,
}

impl WatchFault {
    pub const ALL: [WatchFault; 2] = [Self::Gone, Self::Error];

    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gone => "gone",
            Self::Error => "error",
        }
    }
}

/// API request, watch error and confirmation counters.
#[derive(Debug)]
pub struct ApiStats {
    /// [kind (read-set order, then other)][verb] -> requests.
    requests: [[AtomicU64; VERBS.len()]; KINDS],
    /// [kind (read-set order)][fault] -> failed watches.
    watch_errors: [[AtomicU64; 2]; RESOURCES.len()],
    /// [kind (read-set order)] -> probes its watch caught up with ([`super::proof`]).
    proofs: [AtomicU64; RESOURCES.len()],
    confirmations: [AtomicU64; 3],
    /// Non-cumulative counts per bucket, plus one for `+Inf`.
    durations: [AtomicU64; CONFIRMATION_BUCKETS.len() + 1],
    duration_sum_micros: AtomicU64,
    /// Confirmations waiting for a turn (`serve --max-confirmations`).
    queued: AtomicU64,
}

static GLOBAL: ApiStats = ApiStats::new();

/// The counters `/metrics` renders.
pub fn global() -> &'static ApiStats {
    &GLOBAL
}

impl Default for ApiStats {
    fn default() -> Self {
        Self::new()
    }
}

impl ApiStats {
    /// All counters at zero.
    pub const fn new() -> Self {
        Self {
            requests: [const { [const { AtomicU64::new(0) }; VERBS.len()] }; KINDS],
            watch_errors: [const { [const { AtomicU64::new(0) }; 2] }; RESOURCES.len()],
            proofs: [const { AtomicU64::new(0) }; RESOURCES.len()],
            confirmations: [const { AtomicU64::new(0) }; 3],
            durations: [const { AtomicU64::new(0) }; CONFIRMATION_BUCKETS.len() + 1],
            duration_sum_micros: AtomicU64::new(0),
            queued: AtomicU64::new(0),
        }
    }

    /// One more confirmation waits for a turn; it counts until the guard is dropped.
    pub fn queued(&'static self) -> Queued {
        self.queued.fetch_add(1, Ordering::Relaxed);
        Queued(&self.queued)
    }

    /// Counts one request to the API server (`method`, URL `path` and `query`).
    pub fn api_request(&self, method: &str, path: &str, query: &str) {
        let (kind, verb) = classify(method, path, query);
        let k = kind.map_or(RESOURCES.len(), |k| k as usize);
        self.requests[k][verb as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests counted so far for `kind` (`None`: outside the read-set) and `verb`.
    pub fn requests(&self, kind: Option<ObjectKind>, verb: Verb) -> u64 {
        let k = kind.map_or(RESOURCES.len(), |k| k as usize);
        self.requests[k][verb as usize].load(Ordering::Relaxed)
    }

    /// Counts one failed watch of `kind`.
    pub fn watch_error(&self, kind: ObjectKind, fault: WatchFault) {
        if let Some(row) = self.watch_errors.get(kind as usize) {
            row[fault as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Failed watches counted so far for `kind` and `fault`.
    pub fn watch_errors(&self, kind: ObjectKind, fault: WatchFault) -> u64 {
        self.watch_errors.get(kind as usize).map_or(0, |row| row[fault as usize].load(Ordering::Relaxed))
    }

    /// Counts one probe of `kind` that its watch caught up with: the kind proven current.
    pub fn proof(&self, kind: ObjectKind) {
        if let Some(n) = self.proofs.get(kind as usize) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Probes of `kind` proven so far.
    pub fn proofs(&self, kind: ObjectKind) -> u64 {
        self.proofs.get(kind as usize).map_or(0, |n| n.load(Ordering::Relaxed))
    }

    /// Records one finished confirmation and how long it took.
    pub fn confirmation(&self, result: ConfirmResult, took: Duration) {
        self.confirmations[result as usize].fetch_add(1, Ordering::Relaxed);
        let secs = took.as_secs_f64();
        let i = CONFIRMATION_BUCKETS.iter().position(|b| secs <= *b).unwrap_or(CONFIRMATION_BUCKETS.len());
        self.durations[i].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.duration_sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Confirmations counted so far with `result`.
    pub fn confirmations(&self, result: ConfirmResult) -> u64 {
        self.confirmations[result as usize].load(Ordering::Relaxed)
    }

    /// Appends the metric families in the Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        crate::exposition::append(
            out,
            Snapshot {
                requests: self.requests.each_ref().map(|row| row.each_ref().map(load)),
                watch_errors: self.watch_errors.each_ref().map(|row| row.each_ref().map(load)),
                proofs: self.proofs.each_ref().map(load),
                confirmations: self.confirmations.each_ref().map(load),
                durations: self.durations.each_ref().map(load),
                duration_sum_micros: load(&self.duration_sum_micros),
                queued: load(&self.queued),
            },
        );
    }
}

/// The counters' values at one scrape.
#[derive(Debug)]
struct Snapshot {
    requests: [[u64; VERBS.len()]; KINDS],
    watch_errors: [[u64; 2]; RESOURCES.len()],
    proofs: [u64; RESOURCES.len()],
    confirmations: [u64; 3],
    durations: [u64; CONFIRMATION_BUCKETS.len() + 1],
    duration_sum_micros: u64,
    queued: u64,
}

/// A confirmation counted as waiting for a turn, until dropped.
#[derive(Debug)]
pub struct Queued(&'static AtomicU64);

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut f = family(
            &mut encoder,
            "longhorn_guard_api_requests",
            "Requests sent to the Kubernetes API server, by kind (read-set kinds, else other) and verb.",
            MetricType::Counter,
        )?;
        for (k, row) in self.requests.iter().enumerate() {
            let kind = RESOURCES.get(k).map_or(OTHER_KIND, |r| r.kind.display());
            for (v, &n) in row.iter().enumerate().filter(|(_, n)| **n > 0) {
                f.labelled(&[("kind", kind), ("verb", VERBS[v])], n as f64)?;
            }
        }

        let mut f = family(
            &mut encoder,
            "longhorn_guard_watch_errors",
            "Failed watches by kind and reason (gone: 410 Gone, the kind is relisted; error: anything else). Each makes the view stale until the kind is relisted, or, for a watch that could not be resumed once, until its next BOOKMARK.",
            MetricType::Counter,
        )?;
        for (k, row) in self.watch_errors.iter().enumerate() {
            for fault in WatchFault::ALL.into_iter().filter(|f| row[*f as usize] > 0) {
                let labels = [("kind", RESOURCES[k].kind.display()), ("reason", fault.as_str())];
                f.labelled(&labels, row[fault as usize] as f64)?;
            }
        }

        let mut f = family(
            &mut encoder,
            "longhorn_guard_freshness_proofs",
            "Probes (consistent reads) each kind's own watch caught up with, by kind: the kind then counts as current from the probe's sending. Flat at 0 while probes run: the API server does not serve consistent reads from its watch cache (Kubernetes before 1.31, or etcd before 3.5.13 / 3.4.31), and allows on a quiet view are confirmed by reads.",
            MetricType::Counter,
        )?;
        for (k, &n) in self.proofs.iter().enumerate() {
            f.labelled(&[("kind", RESOURCES[k].kind.display())], n as f64)?;
        }

        let mut f = family(
            &mut encoder,
            "longhorn_guard_confirmations",
            "Drain allows confirmed with consistent reads, by result (allowed, denied, failed).",
            MetricType::Counter,
        )?;
        for r in ConfirmResult::ALL {
            f.labelled(&[("result", r.as_str())], self.confirmations[r as usize] as f64)?;
        }

        let mut f = family(
            &mut encoder,
            "longhorn_guard_confirmation_duration_seconds",
            "Time one confirmation took, reads and decision.",
            MetricType::Histogram,
        )?;
        let sum = self.duration_sum_micros as f64 / 1e6;
        f.histogram(&NO_LABELS, &CONFIRMATION_BUCKETS, &self.durations, sum)?;

        let mut f = family(
            &mut encoder,
            "longhorn_guard_confirmations_queued",
            "Confirmations waiting for a turn to read (serve --max-confirmations); each answers every request for its node that arrived before it started.",
            MetricType::Gauge,
        )?;
        f.labelled(&NO_LABELS, self.queued as f64)
    }
}

/// The read-set kind (`None` when outside it) and the verb of a request.
pub fn classify(method: &str, path: &str, query: &str) -> (Option<ObjectKind>, Verb) {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => ("", &[][..]),
    };
    let rest = match rest {
        ["namespaces", _ns, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    let kind = rest
        .first()
        .and_then(|plural| RESOURCES.iter().find(|r| r.group == group && r.plural == *plural))
        .map(|r| r.kind);
    let named = rest.len() >= 2;
    let watch = query.split('&').any(|kv| matches!(kv, "watch=true" | "watch=1"));
    let verb = match method {
        "GET" if watch => Verb::Watch,
        "GET" if named => Verb::Get,
        "GET" => Verb::List,
        "POST" => Verb::Create,
        "PUT" => Verb::Update,
        "PATCH" => Verb::Patch,
        "DELETE" => Verb::Delete,
        _ => Verb::Other,
    };
    (kind, verb)
}

#[cfg(test)]
mod tests;
