//! The `/metrics` gauges read at scrape time: the cluster view's freshness, object counts and
//! stalled rebuilds, and the served certificate's expiry.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use crate::cluster::SharedView;
use crate::exposition::family;
use crate::policy::Policy;
use crate::tls::ReloadingCert;

/// What the scrape-time gauges are read from.
#[derive(Debug)]
pub struct ScrapeGauges {
    pub view: SharedView,
    pub policy: Arc<Policy>,
    pub tls: Arc<ReloadingCert>,
}

/// Gauges read at each scrape. The view's inputs are taken under its read lock in one cheap
/// step (stalled rebuilds through the view's index of rebuilding engines, never a walk over
/// every engine) and encoded after it is released.
impl Collector for ScrapeGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let now = SystemTime::now();
        let (fresh, counts, stalled) = {
            let view = self.view.read();
            (
                view.freshness(),
                view.counts(),
                crate::policy::drain::stalled_rebuilds(&view, &self.policy, now),
            )
        };
        let e = &mut encoder;
        let not_after = self.tls.stats.not_after.load(Ordering::Relaxed);
        if not_after > 0 {
            family(
                e,
                "longhorn_guard_tls_cert_expiry_timestamp_seconds",
                "When the served certificate (its leaf) expires, in seconds since the Unix epoch.",
                MetricType::Gauge,
            )?
            .value(not_after as f64)?;
        }
        family(
            e,
            "longhorn_guard_cluster_view_synced",
            "1 once every watched kind finished its initial list (always 1 for a snapshot).",
            MetricType::Gauge,
        )?
        .value(f64::from(u8::from(fresh.synced)))?;

        let mut f = family(
            e,
            "longhorn_guard_cluster_view_age_seconds",
            "Seconds since the cluster view last received data (0 for a snapshot; absent before the first data).",
            MetricType::Gauge,
        )?;
        if let Some(age) = fresh.age(now) {
            f.value(age.as_secs_f64())?;
        }

        family(e, "longhorn_guard_cluster_view_failing_watches", "Kinds whose watch failed and is not relisted yet (or could not be resumed once and sent no BOOKMARK since); above 0 the view is stale and drain allows are confirmed with the API server.", MetricType::Gauge)?.value(fresh.failing.len() as f64)?;

        let mut f = family(
            e,
            "longhorn_guard_cluster_view_objects",
            "Objects in the cluster view, by kind.",
            MetricType::Gauge,
        )?;
        for &(kind, n) in &counts {
            f.labelled(&[("kind", kind.display())], n as f64)?;
        }

        family(
            e,
            "longhorn_guard_stalled_rebuilds",
            "Replica rebuilds whose progress has not moved for longer than drain.stallAfter.",
            MetricType::Gauge,
        )?
        .value(stalled.len() as f64)?;
        let mut f = family(
            e,
            "longhorn_guard_stalled_rebuild_since_timestamp_seconds",
            "Unix time since which each stalled rebuild's progress has not moved.",
            MetricType::Gauge,
        )?;
        for s in &stalled {
            let since = s.since.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
            let labels = [
                ("volume", s.volume.as_str()),
                ("engine", s.engine.as_str()),
                ("replica", s.replica.as_deref().unwrap_or("")),
            ];
            f.labelled(&labels, since as f64)?;
        }
        Ok(())
    }
}
