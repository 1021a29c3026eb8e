//! The `/metrics` gauges derived from the cluster view: their inputs are copied out under the
//! view's read lock in one cheap step, and rendered after the lock is released.

use std::time::SystemTime;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use crate::cluster::{ClusterView, Freshness, ObjectKind};
use crate::exposition::{family, single};
use crate::policy::drain::StalledRebuild;
use crate::policy::Policy;

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

/// Gauges derived from the cluster view, from their copied inputs.
impl Collector for ViewGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let e = &mut encoder;
        let (fresh, now) = (&self.fresh, self.now);
        single(
            e,
            "longhorn_guard_cluster_view_synced",
            "1 once every watched kind finished its initial list (always 1 for a snapshot).",
            MetricType::Gauge,
            f64::from(u8::from(fresh.synced)),
        )?;

        let mut f = family(
            e,
            "longhorn_guard_cluster_view_age_seconds",
            "Seconds since the cluster view last received data (0 for a snapshot; absent before the first data).",
            MetricType::Gauge,
        )?;
        if let Some(age) = fresh.age(now) {
            f.value(age.as_secs_f64())?;
        }

        single(e, "longhorn_guard_cluster_view_failing_watches", "Kinds whose watch failed and is not relisted yet (or could not be resumed once and sent no BOOKMARK since); above 0 the view is stale and drain allows are confirmed with the API server.", MetricType::Gauge, fresh.failing.len() as f64)?;

        let mut f = family(
            e,
            "longhorn_guard_cluster_view_objects",
            "Objects in the cluster view, by kind.",
            MetricType::Gauge,
        )?;
        for &(kind, n) in &self.counts {
            f.labelled(&[("kind", kind.display())], n as f64)?;
        }

        single(
            e,
            "longhorn_guard_stalled_rebuilds",
            "Replica rebuilds whose progress has not moved for longer than drain.stallAfter.",
            MetricType::Gauge,
            self.stalled.len() as f64,
        )?;
        let mut f = family(
            e,
            "longhorn_guard_stalled_rebuild_since_timestamp_seconds",
            "Unix time since which each stalled rebuild's progress has not moved.",
            MetricType::Gauge,
        )?;
        for s in &self.stalled {
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
