//! Probes: a consistent `limit=1` read of each watched kind, every `--freshness-probe-interval`.
//! Each answer's list resource version, with the time the read was sent, goes to the view,
//! which counts the kind as new as that time once its own watch has delivered that version
//! ([`super::proof`]). A quiet cluster then keeps the view fresh without re-reading what a
//! drain decision rests on. A probe reads metadata only (`PartialObjectMetadataList`): one
//! instance manager is over a megabyte whole.

use std::time::{Duration, Instant, SystemTime};

use kube::api::{Api, DynamicObject, ListParams};

use super::watch::{targets, Target};
use super::SharedView;

/// A probe answered later than this proves too little to wait for (the view's age counts from
/// its sending); the next one is sent on time.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(4);

/// Probes every watched kind every `every`, until the task is dropped.
pub async fn run(client: kube::Client, view: SharedView, every: Duration) {
    let all = targets();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        futures::future::join_all(all.iter().map(|t| probe(&client, &view, t))).await;
    }
}

/// One probe of `t`'s kind, noted in the view when answered in time.
async fn probe(client: &kube::Client, view: &SharedView, t: &Target) {
    let api: Api<DynamicObject> = match t.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &t.resource),
        None => Api::all_with(client.clone(), &t.resource),
    };
    let (wall, mono) = (SystemTime::now(), Instant::now());
    let answer =
        tokio::time::timeout(PROBE_TIMEOUT, api.list_metadata(&ListParams::default().limit(1))).await;
    match answer {
        Ok(Ok(list)) => match list.metadata.resource_version {
            Some(rv) => {
                if view.update(|v| v.note_probe(t.kind, &rv, wall, mono)) {
                    super::stats::global().proof(t.kind);
                }
            }
            None => tracing::debug!(kind = t.kind.display(), "probe answered without a resource version"),
        },
        Ok(Err(error)) => tracing::debug!(kind = t.kind.display(), %error, "probe failed"),
        Err(_) => tracing::debug!(kind = t.kind.display(), "probe not answered in time"),
    }
}
