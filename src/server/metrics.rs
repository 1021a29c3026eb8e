//! `/metrics` in the Prometheus text format (version 0.0.4), hand-rolled: a few atomics and
//! maps updated on each request, and gauges computed from the cluster view at scrape time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::cluster::{ClusterView, Freshness, ObjectKind};
use crate::policy::drain::StalledRebuild;
use crate::policy::Policy;
use crate::tls::ReloadStats;

/// Upper bounds (seconds) of the admission latency histogram: sub-millisecond decisions up to
/// the API server's 10 s default webhook timeout.
pub const DURATION_BUCKETS: [f64; 16] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The `resource` label values: the resources the shipped webhook configurations send
/// (manifests/base/webhooks). Anything else is counted as `other`, so a request cannot add
/// label values.
pub const RESOURCE_LABELS: [&str; 6] = [
    "pods",
    "pods/eviction",
    "nodes",
    "volumes.longhorn.io",
    "settings.longhorn.io",
    "storageclasses.storage.k8s.io",
];

/// `resource` if longhorn-guard handles it, else `other`.
pub fn resource_label(resource: &str) -> &'static str {
    RESOURCE_LABELS.iter().find(|r| **r == resource).copied().unwrap_or("other")
}

#[derive(Debug, Default)]
struct Histogram {
    /// Non-cumulative counts per bucket, plus one for `+Inf`.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

/// Counters and gauges kept by the server.
#[derive(Debug, Default)]
pub struct Metrics {
    /// (webhook, resource, operation, decision) -> count.
    requests: Mutex<BTreeMap<(String, String, String, String), u64>>,
    /// webhook -> latency histogram.
    durations: Mutex<BTreeMap<String, Histogram>>,
    /// HTTP status code -> count of requests answered with an error.
    http_errors: Mutex<BTreeMap<u16, u64>>,
    in_flight: AtomicI64,
    /// Connections whose TLS handshake failed (including plaintext HTTP on the TLS port).
    tls_handshake_errors: AtomicU64,
    /// Server-side connection and failure counters (`ServerCounters::render`).
    pub server: std::sync::Arc<ServerCounters>,
}

/// Connection and failure counters of the server itself.
#[derive(Debug, Default)]
pub struct ServerCounters {
    /// Requests whose decision panicked (answered 500).
    pub panics: AtomicU64,
    /// Connections open now.
    pub connections_open: AtomicI64,
    /// Idle connections closed to make room at `--max-connections`.
    pub connections_evicted: AtomicU64,
    /// Failed `accept` calls (e.g. out of file descriptors).
    pub accept_errors: AtomicU64,
}

impl ServerCounters {
    fn render(&self, out: &mut String) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        header(
            out,
            "longhorn_guard_panics_total",
            "counter",
            "Requests whose decision panicked; each was answered 500 and the server kept serving.",
        );
        let _ = writeln!(out, "longhorn_guard_panics_total {}", get(&self.panics));
        header(
            out,
            "longhorn_guard_connections_open",
            "gauge",
            "Client connections open now (at most --max-connections).",
        );
        let _ = writeln!(
            out,
            "longhorn_guard_connections_open {}",
            self.connections_open.load(Ordering::Relaxed)
        );
        header(
            out,
            "longhorn_guard_connections_evicted_total",
            "counter",
            "Idle connections closed to make room at --max-connections.",
        );
        let _ = writeln!(out, "longhorn_guard_connections_evicted_total {}", get(&self.connections_evicted));
        header(
            out,
            "longhorn_guard_accept_errors_total",
            "counter",
            "Failed accept calls (e.g. out of file descriptors).",
        );
        let _ = writeln!(out, "longhorn_guard_accept_errors_total {}", get(&self.accept_errors));
    }
}

/// Decrements the in-flight gauge when dropped.
pub struct InFlight<'a>(&'a Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// Counts one admission request in flight until the guard is dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self)
    }

    /// Records one decided admission request.
    pub fn admission(
        &self,
        webhook: &str,
        resource: &str,
        operation: &str,
        decision: &str,
        elapsed: Duration,
    ) {
        {
            let mut map = lock(&self.requests);
            let resource = resource_label(resource);
            *map.entry((webhook.into(), resource.into(), operation.into(), decision.into())).or_default() +=
                1;
        }
        self.observe(webhook, elapsed);
    }

    /// Records one request's latency (decided or answered with an HTTP error).
    pub fn observe(&self, webhook: &str, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let mut map = lock(&self.durations);
        let h = map.entry(webhook.to_string()).or_default();
        if h.counts.is_empty() {
            h.counts = vec![0; DURATION_BUCKETS.len() + 1];
        }
        let i = DURATION_BUCKETS.iter().position(|b| secs <= *b).unwrap_or(DURATION_BUCKETS.len());
        h.counts[i] += 1;
        h.sum += secs;
        h.count += 1;
    }

    /// Records a request answered with HTTP status `code` (>= 400).
    pub fn http_error(&self, code: u16) {
        *lock(&self.http_errors).entry(code).or_default() += 1;
    }

    /// Records a failed TLS handshake.
    pub fn tls_handshake_error(&self) {
        self.tls_handshake_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// The whole exposition. `view` and `policy` feed the gauges computed at scrape time.
    pub fn render(&self, view: &ClusterView, policy: &Policy, tls: &ReloadStats, now: SystemTime) -> String {
        self.render_gauges(&ViewGauges::of(view, policy, now), tls)
    }

    /// The whole exposition from view gauges copied beforehand ([`ViewGauges::of`]), so the
    /// caller may release the view's lock before formatting.
    pub fn render_gauges(&self, gauges: &ViewGauges, tls: &ReloadStats) -> String {
        let mut out = String::with_capacity(4096);

        header(&mut out, "longhorn_guard_admission_requests_total", "counter", "Admission requests decided, by webhook, resource, operation and decision (allow, warn, patch, deny).");
        for ((w, r, o, d), n) in lock(&self.requests).iter() {
            let _ = writeln!(
                out,
                "longhorn_guard_admission_requests_total{{webhook=\"{}\",resource=\"{}\",operation=\"{}\",decision=\"{}\"}} {n}",
                esc(w), esc(r), esc(o), esc(d)
            );
        }

        header(
            &mut out,
            "longhorn_guard_admission_duration_seconds",
            "histogram",
            "Time from the request body's arrival to the response, by webhook.",
        );
        for (w, h) in lock(&self.durations).iter() {
            let w = esc(w);
            let mut cumulative = 0;
            for (i, b) in DURATION_BUCKETS.iter().enumerate() {
                cumulative += h.counts[i];
                let _ = writeln!(out, "longhorn_guard_admission_duration_seconds_bucket{{webhook=\"{w}\",le=\"{b}\"}} {cumulative}");
            }
            let _ = writeln!(
                out,
                "longhorn_guard_admission_duration_seconds_bucket{{webhook=\"{w}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ =
                writeln!(out, "longhorn_guard_admission_duration_seconds_sum{{webhook=\"{w}\"}} {}", h.sum);
            let _ = writeln!(
                out,
                "longhorn_guard_admission_duration_seconds_count{{webhook=\"{w}\"}} {}",
                h.count
            );
        }

        header(
            &mut out,
            "longhorn_guard_http_errors_total",
            "counter",
            "Requests answered with an HTTP error instead of an AdmissionReview, by status code.",
        );
        for (code, n) in lock(&self.http_errors).iter() {
            let _ = writeln!(out, "longhorn_guard_http_errors_total{{code=\"{code}\"}} {n}");
        }

        header(
            &mut out,
            "longhorn_guard_admission_in_flight",
            "gauge",
            "Admission requests being handled now.",
        );
        let _ =
            writeln!(out, "longhorn_guard_admission_in_flight {}", self.in_flight.load(Ordering::Relaxed));

        header(
            &mut out,
            "longhorn_guard_tls_reloads_total",
            "counter",
            "Serving certificate reloads, by result (success, error).",
        );
        let _ = writeln!(
            out,
            "longhorn_guard_tls_reloads_total{{result=\"success\"}} {}",
            tls.success.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "longhorn_guard_tls_reloads_total{{result=\"error\"}} {}",
            tls.error.load(Ordering::Relaxed)
        );

        header(
            &mut out,
            "longhorn_guard_tls_handshake_errors_total",
            "counter",
            "Connections closed because the TLS handshake failed (e.g. plaintext HTTP).",
        );
        let _ = writeln!(
            out,
            "longhorn_guard_tls_handshake_errors_total {}",
            self.tls_handshake_errors.load(Ordering::Relaxed)
        );

        self.server.render(&mut out);
        render_view_gauges(&mut out, gauges);
        crate::cluster::stats::global().render(&mut out);
        out
    }
}

/// What the view-derived gauges need, copied out of the view in one cheap step: its
/// freshness, object counts, and the stalled rebuilds found through the view's index of
/// engines that are rebuilding (never a walk over every engine). Add new inputs here.
#[derive(Clone, Debug)]
pub struct ViewGauges {
    fresh: Freshness,
    counts: Vec<(ObjectKind, usize)>,
    stalled: Vec<StalledRebuild>,
    now: SystemTime,
}

impl ViewGauges {
    /// Copies the gauge inputs out of `view` (hold its read lock only for this call).
    pub fn of(view: &ClusterView, policy: &Policy, now: SystemTime) -> Self {
        Self {
            fresh: view.freshness(),
            counts: view.counts(),
            stalled: crate::policy::drain::stalled_rebuilds(view, policy, now),
            now,
        }
    }
}

/// Gauges derived from the cluster view, formatted from their copied inputs.
fn render_view_gauges(out: &mut String, gauges: &ViewGauges) {
    let (fresh, now) = (&gauges.fresh, gauges.now);
    header(
        out,
        "longhorn_guard_cluster_view_synced",
        "gauge",
        "1 once every watched kind finished its initial list (always 1 for a snapshot).",
    );
    let _ = writeln!(out, "longhorn_guard_cluster_view_synced {}", u8::from(fresh.synced));

    header(
        out,
        "longhorn_guard_cluster_view_age_seconds",
        "gauge",
        "Seconds since the cluster view last received data (0 for a snapshot; absent before the first data).",
    );
    if let Some(age) = fresh.age(now) {
        let _ = writeln!(out, "longhorn_guard_cluster_view_age_seconds {}", age.as_secs_f64());
    }

    header(
        out,
        "longhorn_guard_cluster_view_failing_watches",
        "gauge",
        "Kinds whose watch failed and is not relisted yet; above 0 the view is stale and drain allows are confirmed with the API server.",
    );
    let _ = writeln!(out, "longhorn_guard_cluster_view_failing_watches {}", fresh.failing.len());

    header(out, "longhorn_guard_cluster_view_objects", "gauge", "Objects in the cluster view, by kind.");
    for &(kind, n) in &gauges.counts {
        let _ = writeln!(out, "longhorn_guard_cluster_view_objects{{kind=\"{}\"}} {n}", kind_label(kind));
    }

    let stalled = &gauges.stalled;
    header(
        out,
        "longhorn_guard_stalled_rebuilds",
        "gauge",
        "Replica rebuilds whose progress has not moved for longer than drain.stallAfter.",
    );
    let _ = writeln!(out, "longhorn_guard_stalled_rebuilds {}", stalled.len());
    header(
        out,
        "longhorn_guard_stalled_rebuild_since_timestamp_seconds",
        "gauge",
        "Unix time since which each stalled rebuild's progress has not moved.",
    );
    for s in stalled {
        let since = s.since.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let _ = writeln!(
            out,
            "longhorn_guard_stalled_rebuild_since_timestamp_seconds{{volume=\"{}\",engine=\"{}\",replica=\"{}\"}} {since}",
            esc(&s.volume),
            esc(&s.engine),
            esc(s.replica.as_deref().unwrap_or("")),
        );
    }
}

fn kind_label(kind: ObjectKind) -> &'static str {
    kind.display()
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Escapes a label value (backslash, double quote, newline).
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Source;

    #[test]
    fn renders_counters_histogram_and_view_gauges() {
        let m = Metrics::default();
        m.admission("validate", "pods/eviction", "CREATE", "deny", Duration::from_micros(300));
        m.admission("validate", "pods/eviction", "CREATE", "deny", Duration::from_secs(20));
        m.http_error(400);
        let view = ClusterView::from_objects(Source::Snapshot("x".into()), [], SystemTime::now());
        let text = m.render(&view, &Policy::default(), &ReloadStats::default(), SystemTime::now());
        assert!(text.contains(
            "longhorn_guard_admission_requests_total{webhook=\"validate\",resource=\"pods/eviction\",operation=\"CREATE\",decision=\"deny\"} 2"
        ));
        assert!(text.contains(
            "longhorn_guard_admission_duration_seconds_bucket{webhook=\"validate\",le=\"0.00025\"} 0"
        ));
        assert!(text.contains(
            "longhorn_guard_admission_duration_seconds_bucket{webhook=\"validate\",le=\"0.0005\"} 1"
        ));
        assert!(text
            .contains("longhorn_guard_admission_duration_seconds_bucket{webhook=\"validate\",le=\"10\"} 1"));
        assert!(text.contains(
            "longhorn_guard_admission_duration_seconds_bucket{webhook=\"validate\",le=\"+Inf\"} 2"
        ));
        assert!(text.contains("longhorn_guard_http_errors_total{code=\"400\"} 1"));
        assert!(text.contains("longhorn_guard_cluster_view_synced 1"));
        assert!(text.contains("longhorn_guard_cluster_view_age_seconds 0"));
    }

    #[test]
    fn resource_label_takes_only_handled_resources() {
        let m = Metrics::default();
        for r in RESOURCE_LABELS {
            assert_eq!(resource_label(r), r);
        }
        for junk in ["pods/exec", "secrets", "x\"y", &"v".repeat(1 << 20)] {
            assert_eq!(resource_label(junk), "other");
            m.admission("validate", junk, "CREATE", "allow", Duration::ZERO);
        }
        m.admission("validate", "pods/eviction", "CREATE", "deny", Duration::ZERO);
        let view = ClusterView::from_objects(Source::Snapshot("x".into()), [], SystemTime::now());
        let text = m.render(&view, &Policy::default(), &ReloadStats::default(), SystemTime::now());
        let values: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.starts_with("longhorn_guard_admission_requests_total{"))
            .filter_map(|l| l.split("resource=\"").nth(1)?.split('"').next())
            .collect();
        assert_eq!(values, ["other", "pods/eviction"].into_iter().collect());
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(esc("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
