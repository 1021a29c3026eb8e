//! Process-wide counters of the requests longhorn-guard sends to the API server and of drain
//! confirmations, encoded into `/metrics`. Every label value comes from a fixed set.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::exposition::{register, Labels};

use super::readset::RESOURCES;
use super::ObjectKind;

/// The `kind` label of a request to a resource outside the read-set.
pub const OTHER_KIND: &str = "other";
/// Upper bounds (seconds) of the confirmation latency histogram: a few LISTs on a healthy API
/// server, up to the API server's 10 s default webhook timeout.
pub const CONFIRMATION_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

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
    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gone => "gone",
            Self::Error => "error",
        }
    }
}

/// API request, watch error and confirmation counters: prometheus-client metrics, shared with
/// the registry `/metrics` encodes ([`ApiStats::register`]).
#[derive(Debug)]
pub struct ApiStats {
    /// `kind`, `verb`: only series counted at least once exist.
    requests: Family<Labels<2>, Counter>,
    /// `kind`, `reason`: only series counted at least once exist.
    watch_errors: Family<Labels<2>, Counter>,
    /// `kind` (every read-set kind) -> probes its watch caught up with ([`super::proof`]).
    proofs: Family<Labels<1>, Counter>,
    /// `result` (all three).
    confirmations: Family<Labels<1>, Counter>,
    durations: Histogram,
    /// Confirmations waiting for a turn (`serve --max-confirmations`).
    queued: Gauge,
}

static GLOBAL: LazyLock<ApiStats> = LazyLock::new(ApiStats::new);

/// The counters `/metrics` renders.
pub fn global() -> &'static ApiStats {
    &GLOBAL
}

impl ApiStats {
    /// All counters at zero.
    fn new() -> Self {
        let s = Self {
            requests: Family::default(),
            watch_errors: Family::default(),
            proofs: Family::default(),
            confirmations: Family::default(),
            durations: Histogram::new(CONFIRMATION_BUCKETS),
            queued: Gauge::default(),
        };
        // Shown at 0 from the start.
        for r in RESOURCES {
            let _ = s.proofs.get_or_create(&[("kind", r.kind.display())]);
        }
        for r in ConfirmResult::ALL {
            let _ = s.confirmations.get_or_create(&[("result", r.as_str())]);
        }
        s
    }

    /// Adds these metrics to `registry` (they stay shared with `self`).
    pub fn register(&self, registry: &mut Registry) {
        register(
            registry,
            "longhorn_guard_api_requests",
            "Requests sent to the Kubernetes API server, by kind (read-set kinds, else other) and verb.",
            self.requests.clone(),
        );
        register(
            registry,
            "longhorn_guard_watch_errors",
            "Failed watches by kind and reason (gone: 410 Gone, the kind is relisted; error: anything else). Each makes the view stale until the kind is relisted, or, for a watch that could not be resumed once, until its next BOOKMARK.",
            self.watch_errors.clone(),
        );
        register(
            registry,
            "longhorn_guard_freshness_proofs",
            "Probes (consistent reads) each kind's own watch caught up with, by kind: the kind then counts as current from the probe's sending. Flat at 0 while probes run: the API server does not serve consistent reads from its watch cache (Kubernetes before 1.31, or etcd before 3.5.13 / 3.4.31), and allows on a quiet view are confirmed by reads.",
            self.proofs.clone(),
        );
        register(
            registry,
            "longhorn_guard_confirmations",
            "Drain allows confirmed with consistent reads, by result (allowed, denied, failed).",
            self.confirmations.clone(),
        );
        register(
            registry,
            "longhorn_guard_confirmation_duration_seconds",
            "Time one confirmation took, reads and decision.",
            self.durations.clone(),
        );
        register(
            registry,
            "longhorn_guard_confirmations_queued",
            "Confirmations waiting for a turn to read (serve --max-confirmations); each answers every request for its node that arrived before it started.",
            self.queued.clone(),
        );
    }

    /// One more confirmation waits for a turn; it counts until the guard is dropped.
    pub fn queued(&self) -> Queued {
        self.queued.inc();
        Queued(self.queued.clone())
    }

    /// Counts one request to the API server (`method`, URL `path` and `query`).
    pub fn api_request(&self, method: &str, path: &str, query: &str) {
        let (kind, verb) = classify(method, path, query);
        let kind = kind.map_or(OTHER_KIND, |k| k.display());
        self.requests.get_or_create(&[("kind", kind), ("verb", verb)]).inc();
    }

    /// Counts one failed watch of `kind`.
    pub fn watch_error(&self, kind: ObjectKind, fault: WatchFault) {
        self.watch_errors.get_or_create(&[("kind", kind.display()), ("reason", fault.as_str())]).inc();
    }

    /// Failed watches counted so far for `kind` and `fault`.
    pub fn watch_errors(&self, kind: ObjectKind, fault: WatchFault) -> u64 {
        self.watch_errors.get(&[("kind", kind.display()), ("reason", fault.as_str())]).map_or(0, |c| c.get())
    }

    /// Counts one probe of `kind` that its watch caught up with: the kind proven current.
    pub fn proof(&self, kind: ObjectKind) {
        self.proofs.get_or_create(&[("kind", kind.display())]).inc();
    }

    /// Probes of `kind` proven so far.
    pub fn proofs(&self, kind: ObjectKind) -> u64 {
        self.proofs.get(&[("kind", kind.display())]).map_or(0, |c| c.get())
    }

    /// Records one finished confirmation and how long it took.
    pub fn confirmation(&self, result: ConfirmResult, took: Duration) {
        self.confirmations.get_or_create(&[("result", result.as_str())]).inc();
        self.durations.observe(took.as_secs_f64());
    }
}

/// A confirmation counted as waiting for a turn, until dropped.
#[derive(Debug)]
pub struct Queued(Gauge);

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The read-set kind (`None` when outside it) and the verb of a request, as the API server's
/// audit log names it (the `verb` label).
pub fn classify(method: &str, path: &str, query: &str) -> (Option<ObjectKind>, &'static str) {
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
        "GET" if watch => "watch",
        "GET" if named => "get",
        "GET" => "list",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "other",
    };
    (kind, verb)
}

#[cfg(test)]
mod tests;
