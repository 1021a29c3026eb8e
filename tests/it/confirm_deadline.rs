//! A stale watch view plus an API server that accepts connections but never answers: the real
//! server still answers within its deadline with the 429 "could not confirm", never an allow
//! and never a timeout of its own (which the API server would treat as a webhook failure).

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use longhorn_guard::admit::Admitter;
use longhorn_guard::cluster::SharedView;
use longhorn_guard::policy::drain::confirm;
use longhorn_guard::policy::Policy;
use longhorn_guard::server::Limits;
use serde_json::Value;
use support::generated::{fixture_items, watch_view_aged};
use support::*;

#[tokio::test]
async fn hanging_api_server_gets_the_unconfirmed_429_within_the_deadline() {
    install_provider();
    // An "API server" that accepts TCP connections and never says a word.
    let hang = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api_addr = hang.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((c, _)) = hang.accept().await {
            conns.push(c);
        }
    });
    let config = kube::Config::new(format!("https://{api_addr}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();

    let view = SharedView::new(watch_view_aged(&fixture_items(), Duration::from_secs(120)));
    let admitter =
        Admitter::new(view.clone(), Arc::new(Policy::default()), Some(confirm::confirmer(client, view)));
    let limits = Limits { request_timeout: Duration::from_secs(2), ..test_limits() };
    let server = TestServer::serve_admitter(admitter, limits).await;

    let mut body: Value = serde_json::from_slice(&fixture("eviction-create.json")).unwrap();
    body["request"]["name"] = "instance-manager-e3a5c7b9d1f2406a8c0e2b4d6f8a1c3e".into(); // node-3
    let started = Instant::now();
    // As the API server sends it: its own time-out in the query (10 s, the entries' timeoutSeconds).
    let reply =
        request(server.addr, &server.client, "POST", "/validate?timeout=10s", body.to_string().into_bytes())
            .await
            .unwrap();
    let took = started.elapsed();
    assert_eq!(reply.status, 200, "{}", reply.text());
    let review: Value = serde_json::from_slice(&reply.body).unwrap();
    let response = &review["response"];
    assert_eq!(response["allowed"], false, "{review}");
    assert_eq!(response["status"]["code"], 429);
    assert_eq!(response["status"]["reason"], "TooManyRequests");
    let msg = response["status"]["message"].as_str().unwrap();
    assert!(msg.starts_with("longhorn-guard: could not confirm that draining node-3 is safe ("), "{msg}");
    assert!(msg.contains("did not answer within"), "{msg}");
    // The message above is the confirmation's own deadline (2 s here) giving up, so the answer
    // came from it; what the API server needs is that answer before its 10 s time-out (a
    // loaded test machine may add a little to the 2 s, never the 8 s to the API server's).
    assert!(took < Duration::from_secs(10), "answered after the API server's time-out: {took:?}");

    server.handle.shutdown();
    assert!(server.handle.stopped().await);
    held.abort();
}
