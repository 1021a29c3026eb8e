//! `/metrics`: prometheus-client counters and histograms updated on each request, and gauges
//! read from the cluster view at scrape time ([`ScrapeGauges`]), in one registry.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::exposition::{register, Labels};

pub use super::view_gauges::ScrapeGauges;

/// Upper bounds (seconds) of the admission latency histogram: sub-millisecond decisions up to
/// the API server's 10 s default webhook timeout.
pub const DURATION_BUCKETS: [f64; 16] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The `resource` label values: the resources the shipped webhook configurations send
/// (manifests/base/webhooks). Anything else is counted as `other`, so a request cannot add
/// label values.
pub const RESOURCE_LABELS: [&str; 8] = [
    "pods",
    "pods/eviction",
    "nodes",
    "instancemanagers.longhorn.io",
    "poddisruptionbudgets.policy",
    "volumes.longhorn.io",
    "settings.longhorn.io",
    "storageclasses.storage.k8s.io",
];

/// `resource` if longhorn-guard handles it, else `other`.
pub fn resource_label(resource: &str) -> &'static str {
    RESOURCE_LABELS.iter().find(|r| **r == resource).copied().unwrap_or("other")
}

/// The server's metrics, in the one registry `/metrics` encodes: its own counters, the
/// API-request statistics ([`crate::cluster::stats`]), the certificate reloads, and the
/// gauges read at scrape time ([`ScrapeGauges`]).
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// `webhook`, `resource`, `operation`, `decision`: every value is one of a fixed set.
    requests: Family<Labels<4>, Counter>,
    /// `webhook` -> latency.
    durations: Family<Labels<1>, Histogram, fn() -> Histogram>,
    /// `code`: HTTP status of requests answered with an error.
    http_errors: Family<[(&'static str, u16); 1], Counter>,
    in_flight: Gauge,
    pub server: std::sync::Arc<ServerCounters>,
}

/// Connection and failure counters of the server itself (each metric's help says what it counts).
#[derive(Debug, Default)]
pub struct ServerCounters {
    pub panics: Counter,
    pub connections_open: Gauge,
    pub connections_evicted: Counter,
    pub accept_errors: Counter,
    pub tls_handshake_errors: Counter,
}

/// Decrements the in-flight gauge when dropped.
pub struct InFlight<'a>(&'a Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.dec();
    }
}

impl Metrics {
    /// The server's metrics, with `gauges` read at each scrape, and `readiness`'s.
    pub fn new(gauges: ScrapeGauges, readiness: &super::readiness::Readiness) -> Self {
        let m = Self {
            registry: Registry::default(),
            requests: Family::default(),
            durations: Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS)),
            http_errors: Family::default(),
            in_flight: Gauge::default(),
            server: Default::default(),
        };
        let mut r = Registry::default();
        register(&mut r, "longhorn_guard_admission_requests", "Admission requests decided, by webhook, resource, operation and decision (allow, warn, patch, deny).", m.requests.clone());
        register(
            &mut r,
            "longhorn_guard_admission_duration_seconds",
            "Time from the request body's arrival to the response, by webhook.",
            m.durations.clone(),
        );
        register(
            &mut r,
            "longhorn_guard_http_errors",
            "Requests answered with an HTTP error instead of an AdmissionReview, by status code.",
            m.http_errors.clone(),
        );
        register(
            &mut r,
            "longhorn_guard_admission_in_flight",
            "Admission requests being handled now.",
            m.in_flight.clone(),
        );
        register(
            &mut r,
            "longhorn_guard_tls_reloads",
            "Serving certificate reloads, by result (success, error).",
            gauges.tls.stats.reloads.clone(),
        );
        register(
            &mut r,
            "longhorn_guard_tls_handshake_errors",
            "Connections closed because the TLS handshake failed (e.g. plaintext HTTP).",
            m.server.tls_handshake_errors.clone(),
        );
        let s = &m.server;
        register(
            &mut r,
            "longhorn_guard_panics",
            "Requests whose decision panicked; each was answered 500 and the server kept serving.",
            s.panics.clone(),
        );
        register(
            &mut r,
            "longhorn_guard_connections_evicted",
            "Idle connections closed to make room at --max-connections.",
            s.connections_evicted.clone(),
        );
        register(
            &mut r,
            "longhorn_guard_accept_errors",
            "Failed accept calls (e.g. out of file descriptors).",
            s.accept_errors.clone(),
        );
        register(
            &mut r,
            "longhorn_guard_connections_open",
            "Client connections open now (at most --max-connections).",
            s.connections_open.clone(),
        );
        r.register_collector(Box::new(gauges));
        readiness.register(&mut r);
        crate::cluster::stats::global().register(&mut r);
        Self { registry: r, ..m }
    }

    /// Counts one admission request in flight until the guard is dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(self)
    }

    /// Records one decided admission request.
    pub fn admission(
        &self,
        webhook: &'static str,
        resource: &str,
        operation: &'static str,
        decision: &'static str,
        elapsed: Duration,
    ) {
        let labels = [
            ("webhook", webhook),
            ("resource", resource_label(resource)),
            ("operation", operation),
            ("decision", decision),
        ];
        self.requests.get_or_create(&labels).inc();
        self.observe(webhook, elapsed);
    }

    /// Records one request's latency (decided or answered with an HTTP error).
    pub fn observe(&self, webhook: &'static str, elapsed: Duration) {
        self.durations.get_or_create(&[("webhook", webhook)]).observe(elapsed.as_secs_f64());
    }

    /// Records a request answered with HTTP status `code` (>= 400).
    pub fn http_error(&self, code: u16) {
        self.http_errors.get_or_create(&[("code", code)]).inc();
    }

    /// Appends every metric in the Prometheus text format.
    pub fn encode(&self, out: &mut String) {
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(out, &self.registry);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::cluster::{ClusterView, SharedView, Source};
    use crate::policy::Policy;
    use crate::server::readiness::{Readiness, Rule};
    use crate::tls::{ReloadingCert, TlsFiles};
    use std::sync::Arc;
    use std::time::SystemTime;

    /// Metrics over `view`, and the readiness they export; the tempdir holds the certificates.
    pub(in crate::server) fn metrics_over(
        view: SharedView,
        policy: Arc<Policy>,
    ) -> (Metrics, Readiness, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        crate::certs::generate(&crate::certs::CertsOptions::new(dir.path())).unwrap();
        let tls = ReloadingCert::load(TlsFiles::in_dir(dir.path()), crate::tls::provider()).unwrap();
        let gauges = ScrapeGauges { view, policy, tls: Arc::new(tls) };
        let s = Duration::from_secs;
        let readiness = Readiness::new(Rule { unready_after: s(10), max_view_age: s(5), by_age: true });
        (Metrics::new(gauges, &readiness), readiness, dir)
    }

    /// Metrics over an empty snapshot view.
    fn metrics() -> (Metrics, tempfile::TempDir) {
        let view = ClusterView::from_objects(Source::Snapshot("x".into()), [], SystemTime::now());
        let (m, _, dir) = metrics_over(SharedView::new(view), Arc::new(Policy::default()));
        (m, dir)
    }

    fn render(m: &Metrics) -> String {
        let mut out = String::new();
        m.encode(&mut out);
        out
    }

    #[test]
    fn renders_counters_and_histogram_buckets() {
        let (m, _certs) = metrics();
        m.admission("validate", "pods/eviction", "CREATE", "deny", Duration::from_micros(300));
        m.admission("validate", "pods/eviction", "CREATE", "deny", Duration::from_secs(20));
        let text = render(&m);
        assert!(text.contains(
            "longhorn_guard_admission_requests_total{webhook=\"validate\",resource=\"pods/eviction\",operation=\"CREATE\",decision=\"deny\"} 2"
        ));
        for (le, n) in [("0.00025", 0), ("0.0005", 1), ("10", 1), ("+Inf", 2)] {
            let bucket = format!(
                "longhorn_guard_admission_duration_seconds_bucket{{webhook=\"validate\",le=\"{le}\"}} {n}\n"
            );
            assert!(text.contains(&bucket), "{bucket}");
        }
    }

    #[test]
    fn resource_label_takes_only_handled_resources() {
        // That such a request adds no label value: it/server_reliability.rs
        // a_one_mebibyte_request_field_makes_no_log_line_over_2_kb.
        for r in RESOURCE_LABELS {
            assert_eq!(resource_label(r), r);
        }
        for junk in ["pods/exec", "secrets", "x\"y"] {
            assert_eq!(resource_label(junk), "other");
        }
    }
}
