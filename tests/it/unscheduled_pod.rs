//! An instance-manager pod with no node in the view is allowed (with a warning) only when the
//! view is current enough for an allow: by older data it may have been scheduled since.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use longhorn_guard::admit::{Admitter, WebhookKind};
use longhorn_guard::cluster::{ClusterView, SharedView};
use longhorn_guard::policy::Policy;
use serde_json::Value;
use support::generated::*;

/// The generated state with the drained node's instance-manager pod unscheduled.
fn unscheduled() -> Vec<Value> {
    let mut items = state(&Layout { volumes: 3, replica_nodes: &["node-1", DRAINED], failed_elsewhere: 3 });
    let im = im_of(&items, DRAINED);
    let pod = items.iter_mut().find(|o| o["kind"] == "Pod" && o["metadata"]["name"] == im.as_str()).unwrap();
    pod["spec"].as_object_mut().unwrap().remove("nodeName");
    pod["metadata"]["labels"].as_object_mut().unwrap().remove("longhorn.io/node");
    items
}

async fn evict(view: ClusterView, items: &[Value]) -> Value {
    let admitter = Admitter::new(SharedView::new(view), Arc::new(Policy::default()), None);
    admitter
        .admit(WebhookKind::Validate, &eviction_of_drained(items), Duration::from_secs(5))
        .await
        .unwrap()
        .response_json()
}

#[tokio::test]
async fn a_pod_without_a_node_waits_unless_the_view_is_current() {
    let items = unscheduled();
    let fresh = evict(watch_view_aged(&items, Duration::ZERO), &items).await;
    assert_eq!(fresh["response"]["allowed"], true, "{fresh}");
    let warning = fresh["response"]["warnings"][0].as_str().unwrap();
    assert!(warning.contains(" has no node; n"), "{warning}");

    let stale = evict(stale_watch_view(&items), &items).await;
    assert_eq!(stale["response"]["allowed"], false, "{stale}");
    assert_eq!(stale["response"]["status"]["code"], 429);
    let message = stale["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("has no node in longhorn-guard's view, which is older than drain.maxViewAge"),
        "{message}"
    );
}
