//! `/metrics`: a few atomics and maps updated on each request, and gauges computed from the
//! cluster view at scrape time, written in the Prometheus text format by [`crate::exposition`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use crate::admission::AdmissionRequest;
use crate::cluster::ClusterView;
use crate::exposition::{family, single};
use crate::policy::Policy;
use crate::tls::ReloadStats;

use super::view_gauges::ViewGauges;

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

/// [`resource_label`] of a request's [`AdmissionRequest::resource_label`], without writing it.
pub fn request_resource_label(req: &AdmissionRequest) -> &'static str {
    let (resource, group, sub) = (&req.resource.resource, &req.resource.group, req.sub_resource());
    let is = |label: &str| {
        let Some(rest) = label.strip_prefix(resource.as_str()) else { return false };
        let rest = match group.as_str() {
            "" => Some(rest),
            g => rest.strip_prefix('.').and_then(|r| r.strip_prefix(g)),
        };
        match (rest, sub) {
            (Some(rest), "") => rest.is_empty(),
            (Some(rest), s) => rest.strip_prefix('/') == Some(s),
            (None, _) => false,
        }
    };
    RESOURCE_LABELS.iter().find(|r| is(r)).copied().unwrap_or("other")
}

#[derive(Clone, Debug, Default)]
struct Histogram {
    /// Non-cumulative counts per bucket, plus one for `+Inf`.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

/// The labels of one admission counter: webhook, resource, operation, decision.
type Labels = (&'static str, &'static str, &'static str, &'static str);

/// Counters and gauges kept by the server.
#[derive(Debug, Default)]
pub struct Metrics {
    /// (webhook, resource, operation, decision) -> count. Every label value is one of a fixed
    /// set, so counting a request allocates nothing.
    requests: Mutex<BTreeMap<Labels, u64>>,
    /// webhook -> latency histogram.
    durations: Mutex<BTreeMap<&'static str, Histogram>>,
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
        webhook: &'static str,
        resource: &str,
        operation: &'static str,
        decision: &'static str,
        elapsed: Duration,
    ) {
        *lock(&self.requests).entry((webhook, resource_label(resource), operation, decision)).or_default() +=
            1;
        self.observe(webhook, elapsed);
    }

    /// Records one request's latency (decided or answered with an HTTP error).
    pub fn observe(&self, webhook: &'static str, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let mut map = lock(&self.durations);
        let h = map.entry(webhook).or_default();
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
        crate::exposition::append(&mut out, self.snapshot(tls));
        crate::exposition::append(&mut out, gauges.clone());
        crate::cluster::stats::global().render(&mut out);
        out
    }

    /// The server's counters at one scrape.
    fn snapshot(&self, tls: &ReloadStats) -> Snapshot {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Snapshot {
            requests: lock(&self.requests).clone(),
            durations: lock(&self.durations).clone(),
            http_errors: lock(&self.http_errors).clone(),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            tls_reloads: [get(&tls.success), get(&tls.error)],
            tls_not_after: tls.not_after.load(Ordering::Relaxed),
            tls_handshake_errors: get(&self.tls_handshake_errors),
            panics: get(&self.server.panics),
            connections_open: self.server.connections_open.load(Ordering::Relaxed),
            connections_evicted: get(&self.server.connections_evicted),
            accept_errors: get(&self.server.accept_errors),
        }
    }
}

/// The server's counters, copied at one scrape.
#[derive(Debug)]
struct Snapshot {
    requests: BTreeMap<Labels, u64>,
    durations: BTreeMap<&'static str, Histogram>,
    http_errors: BTreeMap<u16, u64>,
    in_flight: i64,
    /// Successes, errors.
    tls_reloads: [u64; 2],
    /// Seconds since the epoch; 0 when unknown (the gauge is then left out).
    tls_not_after: i64,
    tls_handshake_errors: u64,
    panics: u64,
    connections_open: i64,
    connections_evicted: u64,
    accept_errors: u64,
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let e = &mut encoder;
        let mut f = family(e, "longhorn_guard_admission_requests", "Admission requests decided, by webhook, resource, operation and decision (allow, warn, patch, deny).", MetricType::Counter)?;
        for ((w, r, o, d), n) in &self.requests {
            let labels = [("webhook", *w), ("resource", r), ("operation", o), ("decision", d)];
            f.labelled(&labels, *n as f64)?;
        }

        let mut f = family(
            e,
            "longhorn_guard_admission_duration_seconds",
            "Time from the request body's arrival to the response, by webhook.",
            MetricType::Histogram,
        )?;
        for (w, h) in &self.durations {
            f.histogram(&[("webhook", *w)], &DURATION_BUCKETS, &h.counts, h.sum)?;
        }

        let mut f = family(
            e,
            "longhorn_guard_http_errors",
            "Requests answered with an HTTP error instead of an AdmissionReview, by status code.",
            MetricType::Counter,
        )?;
        for (code, n) in &self.http_errors {
            f.labelled(&[("code", code.to_string())], *n as f64)?;
        }

        single(
            e,
            "longhorn_guard_admission_in_flight",
            "Admission requests being handled now.",
            MetricType::Gauge,
            self.in_flight as f64,
        )?;

        let mut f = family(
            e,
            "longhorn_guard_tls_reloads",
            "Serving certificate reloads, by result (success, error).",
            MetricType::Counter,
        )?;
        f.labelled(&[("result", "success")], self.tls_reloads[0] as f64)?;
        f.labelled(&[("result", "error")], self.tls_reloads[1] as f64)?;
        if self.tls_not_after > 0 {
            single(
                e,
                "longhorn_guard_tls_cert_expiry_timestamp_seconds",
                "When the served certificate (its leaf) expires, in seconds since the Unix epoch.",
                MetricType::Gauge,
                self.tls_not_after as f64,
            )?;
        }

        let counters: [(&str, &str, u64); 4] = [
            (
                "longhorn_guard_tls_handshake_errors",
                "Connections closed because the TLS handshake failed (e.g. plaintext HTTP).",
                self.tls_handshake_errors,
            ),
            (
                "longhorn_guard_panics",
                "Requests whose decision panicked; each was answered 500 and the server kept serving.",
                self.panics,
            ),
            (
                "longhorn_guard_connections_evicted",
                "Idle connections closed to make room at --max-connections.",
                self.connections_evicted,
            ),
            (
                "longhorn_guard_accept_errors",
                "Failed accept calls (e.g. out of file descriptors).",
                self.accept_errors,
            ),
        ];
        for (name, help, n) in counters {
            single(e, name, help, MetricType::Counter, n as f64)?;
        }
        family(
            e,
            "longhorn_guard_connections_open",
            "Client connections open now (at most --max-connections).",
            MetricType::Gauge,
        )?
        .value(self.connections_open as f64)
    }
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
    fn a_request_is_labelled_as_its_written_resource_is() {
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/admission");
        let mut seen = 0;
        for entry in std::fs::read_dir(fixtures).unwrap() {
            let path = entry.unwrap().path();
            let Ok(req) = crate::admission::parse_review(&std::fs::read(&path).unwrap()) else { continue };
            let mut reqs = vec![req.clone()];
            for (resource, group, sub) in [
                ("volumes", "longhorn", ""),
                ("volumes.longhorn", "io", ""),
                ("pods", "", ""),
                ("pods", "", "status"),
                ("nodes", "x", ""),
            ] {
                let mut other = req.clone();
                other.resource.resource = resource.into();
                other.resource.group = group.into();
                other.sub_resource = Some(sub.into());
                reqs.push(other);
            }
            for r in reqs {
                assert_eq!(
                    request_resource_label(&r),
                    resource_label(&r.resource_label()),
                    "{}",
                    path.display()
                );
            }
            seen += 1;
        }
        assert!(seen > 5, "{seen} fixtures");
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
}
