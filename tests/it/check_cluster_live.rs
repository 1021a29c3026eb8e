//! `check cluster`'s reads from a live API server (the stand-in of `support::apiserver`, real TLS
//! on 127.0.0.1:0): every kind paged, instance managers a few per page.

use crate::support;

use std::time::Duration;

use longhorn_guard::check::cluster::live;
use longhorn_guard::cluster::client::READ_TIMEOUT;
use support::apiserver::FakeApi;
use support::generated::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_managers_are_read_a_few_per_page() {
    // Each instance manager's status names every engine and replica it runs (1.5 MB at 10,000
    // volumes): 500 per page put all of them in one body.
    let items =
        state(&Layout { volumes: 6, replica_nodes: &["node-1", "node-2", DRAINED], failed_elsewhere: 0 });
    let fake = FakeApi::start(items, Duration::ZERO).await;
    let (_, view) =
        live::read_within(&fake.client(), READ_TIMEOUT).await.expect("the stand-in serves every kind");
    assert!(view.counts().iter().any(|(_, n)| *n > 0));
    let lists = |plural: &str| -> Vec<String> {
        let path = format!("/apis/longhorn.io/v1beta2/namespaces/longhorn-system/{plural}?");
        fake.seen.requests().into_iter().filter(|q| q.starts_with(&path)).collect()
    };
    let ims = lists("instancemanagers");
    assert!(!ims.is_empty() && ims.iter().all(|q| q.contains("limit=4")), "{ims:?}");
    let replicas = lists("replicas");
    assert!(!replicas.is_empty() && replicas.iter().all(|q| q.contains("limit=500")), "{replicas:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_api_server_fails_the_read_instead_of_hanging_it() {
    // The client sets no read timeout (its watches are quiet for minutes): each page has its own.
    let items =
        state(&Layout { volumes: 2, replica_nodes: &["node-1", "node-2", DRAINED], failed_elsewhere: 0 });
    let fake = FakeApi::start(items, Duration::from_secs(3600)).await;
    let started = std::time::Instant::now();
    let err = live::read_within(&fake.client(), Duration::from_millis(300)).await.unwrap_err();
    assert!(err.contains("the API server did not answer within 300ms"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
}
