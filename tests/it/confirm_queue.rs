//! Confirmations queue for a slot (`serve --max-confirmations`): requests for a node share a
//! confirmation only while it waits for its slot, never one already reading; a request that
//! cannot get a slot within its budget is told why, and leaves no slot behind.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use longhorn_guard::admit::{Admitter, ConfirmOutcome, Confirmer, WebhookKind};
use longhorn_guard::cluster::SharedView;
use longhorn_guard::policy::drain::confirm;
use longhorn_guard::policy::Policy;
use support::apiserver::FakeApi;
use support::generated::{eviction_of_drained, fixture_items, stale_watch_view, DRAINED};

/// Reads one confirmation of the drained fixture node makes (see tests/confirm_metrics.rs).
const READS: usize = 10;

async fn until_reads(fake: &FakeApi, n: usize) {
    let start = Instant::now();
    while fake.seen.requests().len() < n {
        assert!(start.elapsed() < Duration::from_secs(10), "the stand-in saw {:?}", fake.seen.requests());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn requests_for_a_node_share_a_confirmation_that_has_not_started_reading() {
    let items = fixture_items();
    let fake = FakeApi::start(items.clone(), Duration::from_millis(150)).await;
    let stale = SharedView::new(stale_watch_view(&items));
    let confirmer = confirm::queue::queued(confirm::confirmer(fake.client(), stale.clone()), 1);
    let admitter = Admitter::new(stale, Arc::new(Policy::default()), Some(confirmer));
    let body = eviction_of_drained(&items);
    let admit = |admitter: Admitter, body: Vec<u8>| {
        tokio::spawn(async move {
            admitter.admit(WebhookKind::Validate, &body, Duration::from_secs(8)).await.unwrap().decision
        })
    };

    // The first request's confirmation takes the only slot and starts reading...
    let first = admit(admitter.clone(), body.clone());
    until_reads(&fake, 1).await;
    // ...so these three cannot join it (its reads began before they arrived): they queue one
    // confirmation of their own and share it.
    let later: Vec<_> = (0..3).map(|_| admit(admitter.clone(), body.clone())).collect();
    let mut decisions = vec![first.await.unwrap()];
    for t in later {
        decisions.push(t.await.unwrap());
    }
    for d in &decisions {
        assert!(d.allowed, "{d:?}");
    }
    let seen = fake.seen.requests();
    assert_eq!(seen.len(), 2 * READS, "{seen:#?}");
    // The second confirmation read the same things, after the first finished (one slot).
    let (a, b) = seen.split_at(READS);
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert!(fake.seen.max_in_flight() <= confirm::MAX_IN_FLIGHT);
}

/// A queue of one slot over a stand-in that holds each answer 300 ms, its slot taken by a
/// confirmation of the drained node that has started reading.
async fn one_slot_taken() -> (FakeApi, Confirmer, tokio::task::JoinHandle<ConfirmOutcome>) {
    let items = fixture_items();
    let fake = FakeApi::start(items.clone(), Duration::from_millis(300)).await;
    let stale = SharedView::new(stale_watch_view(&items));
    let confirmer = confirm::queue::queued(confirm::confirmer(fake.client(), stale), 1);
    let reading = tokio::spawn(confirmer(DRAINED.to_string(), Duration::from_secs(10)));
    until_reads(&fake, 1).await;
    (fake, confirmer, reading)
}

#[tokio::test]
async fn a_request_that_cannot_get_a_slot_in_time_is_told_why_and_leaves_no_slot_behind() {
    let (fake, confirmer, reading) = one_slot_taken().await;
    let waited = confirmer(DRAINED.to_string(), Duration::from_millis(150)).await;
    assert_eq!(
        waited.err().as_deref(),
        Some("the 1 confirmation allowed at once (--max-confirmations) stayed busy for all of 150ms")
    );
    let fresh = reading.await.unwrap().expect("the confirmation holding the slot completes");
    assert!(fresh.counts().iter().map(|(_, n)| n).sum::<usize>() > 0);
    assert_eq!(fake.seen.requests().len(), READS, "the request that gave up read nothing");

    // Its queued confirmation was dropped with it: the next one gets the slot and reads.
    let again = confirmer(DRAINED.to_string(), Duration::from_secs(10)).await;
    assert!(again.is_ok(), "{again:?}");
    assert_eq!(fake.seen.requests().len(), 2 * READS);
}

#[tokio::test]
async fn shared_reads_get_the_latest_deadline_of_the_requests_sharing_them() {
    let (fake, confirmer, reading) = one_slot_taken().await;
    // A request with little time queues a confirmation; one with plenty joins it, then the
    // first gives up. The shared reads get the second one's time, not what is left of the first's.
    let short = tokio::spawn(confirmer(DRAINED.to_string(), Duration::from_millis(400)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let long = confirmer(DRAINED.to_string(), Duration::from_secs(10)).await;
    assert!(long.is_ok(), "{long:?}");
    assert_eq!(
        short.await.unwrap().err().as_deref(),
        Some("the 1 confirmation allowed at once (--max-confirmations) stayed busy for all of 400ms")
    );
    assert!(reading.await.unwrap().is_ok());
    assert_eq!(fake.seen.requests().len(), 2 * READS);
}

#[tokio::test]
async fn a_confirmation_that_panics_answers_each_request_with_a_reason() {
    let boom: Confirmer = Arc::new(|_, _| Box::pin(async { panic!("a bug in a confirmation") }));
    let confirmer = confirm::queue::queued(boom, 1);
    let (a, b) = tokio::join!(
        confirmer(DRAINED.to_string(), Duration::from_secs(5)),
        confirmer(DRAINED.to_string(), Duration::from_secs(5))
    );
    for r in [a, b] {
        assert_eq!(
            r.err().as_deref(),
            Some("the confirmation ended without an answer (it panicked; see standard error)")
        );
    }
    // The slot came back: the next confirmation runs (and panics the same way).
    let again = confirmer(DRAINED.to_string(), Duration::from_secs(5)).await;
    assert!(again.unwrap_err().contains("ended without an answer"));
}
