//! Probes: every `--freshness-probe-interval`, a consistent read of each watched kind that
//! selects one name no object carries ([`PROBE_NAME`]); its resource version and sending time
//! prove the kind current once its watch delivered that version ([`super::proof`]).
//!
//! A name selector, not `limit=1`: kube-apiserver 1.31-1.33 sends a consistent LIST with a
//! `limit` past its watch cache, which does not bring a quiet kind's BOOKMARKs up to it.

use std::time::{Duration, Instant, SystemTime};

use kube::api::{Api, DynamicObject, ListParams};

use super::watch::{targets, Target};
use super::SharedView;

/// The `metadata.name` a probe selects. Valid as a name, so the API server accepts the
/// selector; an object by this name would only cost its metadata in each answer.
pub const PROBE_NAME: &str = "longhorn-guard-freshness-probe";

/// A probe answered later than this proves too little to wait for (the view's age counts from
/// its sending); the next one is sent on time.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(4);

/// How often the heap is trimmed while probes run ([`crate::heap::release_soon`]): the
/// probes and the resumed watches allocate a little all the time.
const TRIM_EVERY: Duration = Duration::from_secs(60);

/// [`run`], started again a second after a panic (logged): probes that stopped would leave
/// every quiet allow to a confirmation, not wrong, but slow.
pub async fn run_supervised(client: kube::Client, view: SharedView, every: Duration) {
    use futures::FutureExt as _;
    loop {
        let probes = std::panic::AssertUnwindSafe(run(client.clone(), view.clone(), every));
        if let Err(panic) = probes.catch_unwind().await {
            let why = crate::clip::panic_text(panic.as_ref());
            tracing::error!(
                reason = %crate::clip::clip_to(&why, crate::clip::MAX_TEXT),
                "probes panicked; starting them again in 1s (quiet allows are confirmed by reads meanwhile)"
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Probes every watched kind every `every`, until the task is dropped.
pub async fn run(client: kube::Client, view: SharedView, every: Duration) {
    let all = targets();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut trimmed = Instant::now();
    loop {
        tick.tick().await;
        futures::future::join_all(all.iter().map(|t| probe(&client, &view, t))).await;
        if trimmed.elapsed() >= TRIM_EVERY {
            crate::heap::release_soon();
            trimmed = Instant::now();
        }
    }
}

/// One probe of `t`'s kind, noted in the view when answered in time.
async fn probe(client: &kube::Client, view: &SharedView, t: &Target) {
    let api: Api<DynamicObject> = match t.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &t.resource),
        None => Api::all_with(client.clone(), &t.resource),
    };
    let (wall, mono) = (SystemTime::now(), Instant::now());
    let select = ListParams::default().fields(&format!("metadata.name={PROBE_NAME}"));
    let answer = tokio::time::timeout(PROBE_TIMEOUT, api.list_metadata(&select)).await;
    match answer {
        Ok(Ok(list)) => match list.metadata.resource_version {
            Some(rv) => {
                let proven = view.update(|v| {
                    v.note_read_answered(Instant::now());
                    v.note_probe(t.kind, &rv, wall, mono)
                });
                if proven {
                    super::stats::global().proof(t.kind);
                }
            }
            None => tracing::debug!(kind = t.kind.display(), "probe answered without a resource version"),
        },
        Ok(Err(error)) => tracing::debug!(kind = t.kind.display(), %error, "probe failed"),
        Err(_) => tracing::debug!(kind = t.kind.display(), "probe not answered in time"),
    }
}
