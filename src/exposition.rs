//! The Prometheus text format (version 0.0.4) of `/metrics`, written by `prometheus-client`:
//! values read only at scrape time are [`Collector`]s written with [`family`].

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

pub use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// A label set of `N` fixed names and values.
pub type Labels<const N: usize> = [(&'static str, &'static str); N];

/// Appends `collector`'s metric families to `out` in the Prometheus text format.
pub fn append(out: &mut String, collector: impl Collector) {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(collector));
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(out, &registry);
}

/// Registers `metric` as `name` with `help` as written (the registry adds a final period, so
/// one is taken off), announced by its `HELP` and `TYPE` lines even before its first series:
/// prometheus-client leaves an empty family out, and alerts and dashboards look for the name.
pub fn register<M: EncodeMetric + Send + Sync + std::fmt::Debug + 'static>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) {
    registry.register(name, help.strip_suffix('.').unwrap_or(help), Announced(metric));
}

/// A metric whose family is written even while it has no series.
#[derive(Debug)]
struct Announced<M>(M);

impl<M: EncodeMetric> EncodeMetric for Announced<M> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }
}

/// The label set of a series without labels.
const NO_LABELS: [(&str, &str); 0] = [];

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
            f.value(0.25)
        }
    }

    #[test]
    fn counters_and_gauges_in_the_text_format() {
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
            t_ratio 0.25\n";
        assert_eq!(out, want);
    }
}
