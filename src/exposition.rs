//! The Prometheus text format (version 0.0.4) of `/metrics`, written by `prometheus-client`.
//!
//! Each owner of metrics (the server's counters, the API-request statistics, the view's gauges,
//! the cluster checks) copies its values into a [`Collector`] at scrape time; [`append`] has the
//! client encode it. Recording stays on plain atomics, so nothing on the request path changes.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

pub use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Appends `collector`'s metric families to `out` in the Prometheus text format.
pub fn append(out: &mut String, collector: impl Collector) {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(collector));
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(out, &registry);
}

/// The label set of a series without labels.
pub const NO_LABELS: [(&str, &str); 0] = [];

/// One metric family being written: its series follow its `HELP` and `TYPE` lines.
pub struct Family<'e> {
    encoder: MetricEncoder<'e>,
    kind: MetricType,
}

/// Starts the family `name` of `kind` (a counter's name is given without `_total`).
pub fn family<'e>(
    encoder: &'e mut DescriptorEncoder,
    name: &'e str,
    help: &str,
    kind: MetricType,
) -> Result<Family<'e>, std::fmt::Error> {
    let encoder = encoder.encode_descriptor(name, help, None, kind)?;
    Ok(Family { encoder, kind })
}

/// A family of one series without labels.
pub fn single(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    v: f64,
) -> Result<(), std::fmt::Error> {
    family(encoder, name, help, kind)?.value(v)
}

impl Family<'_> {
    /// A series without labels.
    pub fn value(&mut self, v: f64) -> Result<(), std::fmt::Error> {
        self.labelled(&NO_LABELS, v)
    }

    /// A series with `labels`: counters and whole numbers print as integers.
    pub fn labelled(&mut self, labels: &impl EncodeLabelSet, v: f64) -> Result<(), std::fmt::Error> {
        let e = self.encoder.encode_family(labels)?;
        let whole = v.fract() == 0.0 && v.abs() < 9.0e15;
        match (self.kind, whole) {
            (MetricType::Counter, _) => ConstCounter::new(v.max(0.0) as u64).encode(e),
            (_, true) => ConstGauge::new(v as i64).encode(e),
            (_, false) => ConstGauge::new(v).encode(e),
        }
    }

    /// A histogram series: per-bucket (not cumulative) counts for `bounds`, then the `+Inf`
    /// bucket's, as `counts` holds them; `sum` in the histogram's unit.
    pub fn histogram(
        &mut self,
        labels: &impl EncodeLabelSet,
        bounds: &[f64],
        counts: &[u64],
        sum: f64,
    ) -> Result<(), std::fmt::Error> {
        let mut buckets: Vec<(f64, u64)> = bounds.iter().copied().zip(counts.iter().copied()).collect();
        buckets.push((f64::INFINITY, counts.get(bounds.len()).copied().unwrap_or(0)));
        let count = counts.iter().sum();
        let mut e = self.encoder.encode_family(labels)?;
        e.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Sample;

    impl Collector for Sample {
        fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            let mut f = family(&mut encoder, "t_requests", "Requests.", MetricType::Counter)?;
            f.labelled(&[("code", "4\"0\\0\n")], 3.0)?;
            let mut f = family(&mut encoder, "t_age_seconds", "Age.", MetricType::Gauge)?;
            f.value(0.0)?;
            let mut f = family(&mut encoder, "t_ratio", "Ratio.", MetricType::Gauge)?;
            f.value(0.25)?;
            let mut f = family(&mut encoder, "t_seconds", "Latency.", MetricType::Histogram)?;
            f.histogram(&[("webhook", "validate")], &[0.001, 10.0], &[1, 0, 2], 30.5)
        }
    }

    #[test]
    fn counters_gauges_and_histograms_in_the_text_format() {
        let mut out = String::new();
        append(&mut out, Sample);
        let want = "# HELP t_requests_total Requests.\n\
            # TYPE t_requests_total counter\n\
            t_requests_total{code=\"4\\\"0\\\\0\\n\"} 3\n\
            # HELP t_age_seconds Age.\n\
            # TYPE t_age_seconds gauge\n\
            t_age_seconds 0\n\
            # HELP t_ratio Ratio.\n\
            # TYPE t_ratio gauge\n\
            t_ratio 0.25\n\
            # HELP t_seconds Latency.\n\
            # TYPE t_seconds histogram\n\
            t_seconds_bucket{webhook=\"validate\",le=\"0.001\"} 1\n\
            t_seconds_bucket{webhook=\"validate\",le=\"10\"} 1\n\
            t_seconds_bucket{webhook=\"validate\",le=\"+Inf\"} 3\n\
            t_seconds_sum{webhook=\"validate\"} 30.5\n\
            t_seconds_count{webhook=\"validate\"} 3\n";
        assert_eq!(out, want);
    }
}
