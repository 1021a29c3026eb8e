//! A confirmation in `serve` reads from the API server only the kinds the watch view does not
//! hold current (`confirm::confirmer_reusing`): the current kinds are answered from the view
//! with the same selectors, and the decision is the one a snapshot of the same state gives.
//! The stand-in API server (real TLS on 127.0.0.1:0) serves the state and counts requests.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use longhorn_guard::admit::{Admitter, WebhookKind};
use longhorn_guard::cluster::{ClusterView, ObjectKind, SharedView};
use longhorn_guard::policy::drain::confirm;
use longhorn_guard::policy::Policy;
use serde_json::Value;
use support::apiserver::FakeApi;
use support::generated::*;

const MAX_AGE: Duration = Duration::from_secs(5);
const LH: &str = "/apis/longhorn.io/v1beta2/namespaces/longhorn-system/";

/// A watch view of `items` ten minutes old, with `current` kinds just updated.
fn view_with_current(items: &[Value], current: &[ObjectKind]) -> ClusterView {
    let mut view = stale_watch_view(items);
    for k in current {
        view.touch_kind(*k, SystemTime::now());
    }
    view
}

/// The eviction's response confirmed over `view` against `api_items`, and the paths read.
async fn confirm_over(view: ClusterView, api_items: &[Value], body: &[u8]) -> (Value, Vec<String>) {
    let fake = FakeApi::start(api_items.to_vec(), Duration::ZERO).await;
    let view = SharedView::new(view);
    let confirmer = confirm::confirmer_reusing(fake.client(), view.clone(), MAX_AGE);
    let admitter = Admitter::new(view, Arc::new(Policy::default()), Some(confirmer));
    let out = admitter.admit(WebhookKind::Validate, body, Duration::from_secs(10)).await.unwrap();
    assert!(out.decision.confirm_node.is_none());
    (out.response_json(), fake.seen.requests())
}

fn read(requests: &[String], plural: &str) -> bool {
    requests.iter().any(|r| r.starts_with(&format!("{LH}{plural}?")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn current_kinds_come_from_the_view_and_the_decision_is_the_snapshots() {
    let items =
        state(&Layout { volumes: 20, replica_nodes: &["node-1", "node-2", DRAINED], failed_elsewhere: 0 });
    let body = eviction_of_drained(&items);
    let snapshot = Admitter::new(SharedView::new(snapshot_view(&items)), Arc::new(Policy::default()), None);
    let want =
        snapshot.admit(WebhookKind::Validate, &body, Duration::from_secs(5)).await.unwrap().response_json();
    assert_eq!(want["response"]["allowed"], true, "{want}");

    let busy = [ObjectKind::Volume, ObjectKind::Replica, ObjectKind::Engine, ObjectKind::InstanceManager];
    let (got, requests) = confirm_over(view_with_current(&items, &busy), &items, &body).await;
    assert_eq!(got, want);
    for plural in ["volumes", "replicas", "engines", "instancemanagers"] {
        assert!(!read(&requests, plural), "{plural} read although current: {requests:#?}");
    }
    assert!(read(&requests, "settings"), "{requests:#?}");
    assert!(requests.iter().any(|r| r.starts_with("/api/v1/nodes")), "{requests:#?}");
    assert_eq!(requests.len(), 3, "settings, nodes and instance-manager pods: {requests:#?}");

    // Volumes and engines current, replicas not: the read saved pays for reading the replicas
    // elsewhere in two halves at once (8 requests, within the bound of 10).
    let (got, requests) =
        confirm_over(view_with_current(&items, &[ObjectKind::Volume, ObjectKind::Engine]), &items, &body)
            .await;
    assert_eq!(got, want);
    let elsewhere: Vec<&String> = requests
        .iter()
        .filter(|r| r.starts_with(&format!("{LH}replicas?")) && r.contains("longhornnode%21%3D"))
        .collect();
    assert_eq!(elsewhere.len(), 2, "{requests:#?}");
    assert_eq!(requests.len(), 8, "{requests:#?}");

    // Nothing current: every read goes to the API server, as `check drain` reads.
    let (got, requests) = confirm_over(view_with_current(&items, &[]), &items, &body).await;
    assert_eq!(got, want);
    assert_eq!(requests.len(), confirm::request_count(1), "{requests:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_that_are_not_current_are_read_from_the_api_server() {
    // The API server has every replica but the drained node's failed; the view still has them
    // healthy. Engines are current in the view, replicas are not: the confirmation reads the
    // replicas, sees the failures and denies.
    let cached = state(&Layout { volumes: 3, replica_nodes: &["node-1", DRAINED], failed_elsewhere: 0 });
    let now = state(&Layout { volumes: 3, replica_nodes: &["node-1", DRAINED], failed_elsewhere: 3 });
    let body = eviction_of_drained(&cached);
    let (got, requests) = confirm_over(view_with_current(&cached, &[ObjectKind::Volume]), &now, &body).await;
    assert_eq!(got["response"]["allowed"], false, "{got}");
    let message = got["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("would strand 3 volumes"), "{message}");
    assert!(read(&requests, "replicas") && !read(&requests, "volumes"), "{requests:#?}");

    // A kind updated just now but whose watch failed since is not current.
    let mut view = view_with_current(&cached, &[ObjectKind::Replica, ObjectKind::Volume]);
    view.note_watch_failed(ObjectKind::Replica);
    let (got, requests) = confirm_over(view, &now, &body).await;
    assert_eq!(got["response"]["allowed"], false, "{got}");
    assert!(read(&requests, "replicas"), "{requests:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_current_kind_with_labels_that_disagree_with_the_spec_is_asked_of_the_api_server() {
    // A replica elsewhere whose node label is not its spec's: the view's index (by spec) holds
    // it, the label filter would drop it unseen. The view does not answer; the API server's
    // answer carries the same disagreement, and the confirmation refuses to decide.
    let mut items =
        state(&Layout { volumes: 4, replica_nodes: &["node-1", "node-2", DRAINED], failed_elsewhere: 0 });
    let replica =
        items.iter_mut().find(|o| o["kind"] == "Replica" && o["spec"]["nodeID"] == "node-1").unwrap();
    replica["metadata"]["labels"]["longhornnode"] = serde_json::json!(DRAINED);
    let body = eviction_of_drained(&items);
    let (got, requests) =
        confirm_over(view_with_current(&items, &[ObjectKind::Replica]), &items, &body).await;
    assert_eq!(got["response"]["allowed"], false, "{got}");
    let message = got["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("is labelled longhornnode=node-3 but its spec.nodeID is node-1"), "{message}");
    assert!(read(&requests, "replicas"), "{requests:#?}");
}
