//! The doctor's reads of the live cluster: the node's pods (every namespace, by
//! `spec.nodeName`) and every PodDisruptionBudget, as paginated, read-only LISTs.

use kube::api::ListParams;
use kube::core::ObjectList;
use serde_json::Value;

use super::Scene;
use crate::check::cluster::live::PAGE;

/// Reads the node's pods and the cluster's budgets into a [`Scene`].
pub async fn read_scene(client: &kube::Client, node: &str) -> Result<Scene, String> {
    let on_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let (pods, budgets) = futures::try_join!(
        list(client, "/api/v1/pods", "v1", "Pod", on_node),
        list(
            client,
            "/apis/policy/v1/poddisruptionbudgets",
            "policy/v1",
            "PodDisruptionBudget",
            ListParams::default()
        ),
    )?;
    let mut scene = Scene::default();
    for item in pods.iter().chain(&budgets) {
        scene.take(node, item);
    }
    Ok(scene)
}

/// Every item of a collection, page by page, each with its `apiVersion` and `kind` (a LIST
/// leaves them out of its items).
async fn list(
    client: &kube::Client,
    path: &str,
    api_version: &str,
    kind: &str,
    params: ListParams,
) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = params.clone().limit(PAGE);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let req = kube::core::Request::new(path).list(&lp).map_err(|e| format!("{path}: {e}"))?;
        let within = crate::cluster::client::READ_TIMEOUT;
        let page: ObjectList<Value> = tokio::time::timeout(within, client.request(req))
            .await
            .map_err(|_| {
                format!("cannot list {path}: the API server did not answer within {}s", within.as_secs())
            })?
            .map_err(|e| format!("cannot list {path}: {e}"))?;
        for mut item in page.items {
            if let Some(map) = item.as_object_mut() {
                map.entry("apiVersion").or_insert_with(|| Value::from(api_version));
                map.entry("kind").or_insert_with(|| Value::from(kind));
            }
            out.push(item);
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(out);
        }
    }
}
