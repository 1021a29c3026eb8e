//! The body reader: budget shares, reservations, 413s and frames.

use super::*;
use futures::StreamExt as _;

/// Headers declaring a body of `n` bytes.
fn declared(n: u64) -> HeaderMap {
    HeaderMap::from_iter([(header::CONTENT_LENGTH, n.into())])
}

fn body(n: usize) -> (HeaderMap, Body) {
    (declared(n as u64), Body::from(vec![b' '; n]))
}

#[tokio::test]
async fn a_client_waiting_for_100_continue_is_refused_without_reading_its_body() {
    let mut h = declared(9000);
    h.insert(header::EXPECT, "100-Continue".parse().unwrap());
    // A body that notes being polled (which is what makes hyper send `100 Continue`).
    let polled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = polled.clone();
    let body = Body::from_stream(futures::stream::poll_fn(move |_| {
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
        std::task::Poll::<Option<Result<Bytes, std::io::Error>>>::Ready(None)
    }));
    let budget = BodyBudget::new(8 * 1024);
    assert!(matches!(read_body(&h, body, 8 * 1024, &budget).await, Err(BodyError::TooLarge)));
    assert!(!polled.load(std::sync::atomic::Ordering::SeqCst), "the body was read");
}

#[tokio::test]
async fn bodies_share_one_budget_and_give_it_back() {
    let budget = BodyBudget::new(8 * 1024);
    let (h, b) = body(6 * 1024);
    let (bytes, big) = read_body(&h, b, 8 * 1024, &budget).await.ok().unwrap();
    assert_eq!((bytes.len(), budget.available_kib()), (6 * 1024, 2));
    // Small bodies still fit beside it.
    let (h, b) = body(1000);
    let (_, small) = read_body(&h, b, 8 * 1024, &budget).await.ok().unwrap();
    assert_eq!(budget.available_kib(), 1);
    // A second large one waits until the first is answered.
    let (h, b) = body(6 * 1024);
    let waiting = tokio::spawn({
        let budget = budget.clone();
        async move { read_body(&h, b, 8 * 1024, &budget).await.ok().map(|(b, s)| (b.len(), s)) }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished());
    drop(big);
    let (n, _second) = waiting.await.unwrap().unwrap();
    assert_eq!((n, budget.available_kib()), (6 * 1024, 1));
    drop(small);
    assert_eq!(budget.available_kib(), 2);
    // A body past the limit holds nothing once it is refused.
    let (h, b) = body(9 * 1024);
    assert!(matches!(read_body(&h, b, 8 * 1024, &budget).await, Err(BodyError::TooLarge)));
    assert_eq!(budget.available_kib(), 2);
}

#[tokio::test]
async fn a_huge_declared_length_reserves_nothing_big() {
    // Within a limit an operator raised very high, a client declares a terabyte and sends
    // two bytes: the server answers, it does not try to reserve the terabyte.
    let h = declared(999_999_999_999);
    let max = 1_000_000_000_000;
    let budget = BodyBudget::new(max);
    let (bytes, _share) = read_body(&h, Body::from("{}"), max, &budget).await.ok().unwrap();
    assert_eq!(&bytes[..], b"{}");
}

#[tokio::test]
async fn frames_are_joined_in_order() {
    let frame = Bytes::from(b"{\"kind\":\"AdmissionReview\"}".to_vec());
    let (h, _) = body(frame.len());
    let budget = BodyBudget::new(1 << 20);
    // Empty frames anywhere, and the body split at every byte.
    for at in 0..=frame.len() {
        let pieces = [Bytes::new(), frame.slice(..at), Bytes::new(), frame.slice(at..), Bytes::new()];
        let stream = futures::stream::iter(pieces.map(Ok::<_, std::io::Error>));
        let (bytes, _share) = read_body(&h, Body::from_stream(stream), 1 << 20, &budget).await.ok().unwrap();
        assert_eq!(bytes, frame, "split at {at}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_body_past_the_limit_sent_slowly_gets_its_413_within_the_drain_bound() {
    let h = declared(8_000_000);
    // 100 bytes every 500 ms, for ever.
    let trickle = futures::stream::unfold((), |_| async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        Some((Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 100])), ()))
    });
    let started = tokio::time::Instant::now();
    let budget = BodyBudget::new(8 * 1024);
    let got = read_body(&h, Body::from_stream(trickle), 8 * 1024, &budget).await;
    assert!(matches!(got, Err(BodyError::TooLarge)));
    assert!(started.elapsed() <= DRAIN_FOR + Duration::from_millis(500), "{:?}", started.elapsed());
}

#[tokio::test]
async fn large_bodies_reserve_their_bytes_once_they_grow_and_small_ones_pass() {
    // A 200 KiB body that sends 100 KiB and stalls holds 200 of the 256 KiB for large
    // bodies being received: a second one waits once past its first 64 KiB, a 1 KiB body
    // does not wait at all, and one that declares 200 KiB and sends nothing holds nothing.
    let max = 256 * 1024;
    let budget = BodyBudget::new(max);
    let silent = Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>());
    let silent = tokio::spawn({
        let (budget, h) = (budget.clone(), declared(200 * 1024));
        async move { read_body(&h, silent, max, &budget).await.is_ok() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(budget.receiving_kib(), 256, "a body that sends nothing holds nothing");
    let half = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 100 * 1024]))]);
    let stalled = Body::from_stream(half.chain(futures::stream::pending()));
    let stalled = tokio::spawn({
        let (budget, h) = (budget.clone(), declared(200 * 1024));
        async move { read_body(&h, stalled, max, &budget).await.is_ok() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(budget.receiving_kib(), 56);
    let pieces = (0..4).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 50 * 1024])));
    let second = Body::from_stream(futures::stream::iter(pieces));
    let waiting = tokio::spawn({
        let (budget, h) = (budget.clone(), declared(200 * 1024));
        async move { read_body(&h, second, max, &budget).await.ok().map(|(b, _)| b.len()) }
    });
    let (h, b) = body(1000);
    let small = tokio::time::timeout(Duration::from_secs(5), read_body(&h, b, max, &budget));
    assert!(matches!(small.await, Ok(Ok(_))));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished());
    stalled.abort();
    assert_eq!(waiting.await.unwrap(), Some(200 * 1024));
    assert_eq!(budget.receiving_kib(), 256);
    silent.abort();
}

#[tokio::test]
async fn a_body_without_a_length_reserves_the_limit_once_it_grows_large() {
    let max = 256 * 1024;
    let budget = BodyBudget::new(max);
    let first = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 100 * 1024]))]);
    let growing = Body::from_stream(first.chain(futures::stream::pending()));
    let reading = tokio::spawn({
        let budget = budget.clone();
        async move { read_body(&HeaderMap::new(), growing, max, &budget).await.is_ok() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(budget.receiving_kib(), 0);
    reading.abort();
    let _ = reading.await;
    assert_eq!(budget.receiving_kib(), 256);
}

#[tokio::test]
async fn bodies_still_arriving_hold_no_budget() {
    // A body declared at the limit that never comes, and one sent in pieces that stops
    // halfway: neither holds any of the budget, so a small body is answered at once
    // (holding part of it while waiting for more would let two bodies wait for each other).
    let budget = BodyBudget::new(8 * 1024);
    let h = declared(8 * 1024);
    let never = Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>());
    let stalled = tokio::spawn({
        let budget = budget.clone();
        async move { read_body(&h, never, 8 * 1024, &budget).await.is_ok() }
    });
    let first = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 5 * 1024]))]);
    let halfway = Body::from_stream(first.chain(futures::stream::pending()));
    let chunked = tokio::spawn({
        let budget = budget.clone();
        async move { read_body(&HeaderMap::new(), halfway, 8 * 1024, &budget).await.is_ok() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(budget.available_kib(), 8);
    let (h, b) = body(1000);
    let small = tokio::time::timeout(Duration::from_secs(5), read_body(&h, b, 8 * 1024, &budget));
    assert!(matches!(small.await, Ok(Ok(_))));
    assert!(!stalled.is_finished() && !chunked.is_finished());
    stalled.abort();
    chunked.abort();
}
