//! Reading the live cluster for `check cluster`: read-only, paginated LISTs, each page folded
//! into the inventory as it arrives. No watches.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use futures::{stream, StreamExt as _, TryStreamExt as _};
use kube::api::ListParams;
use serde::Deserialize;
use serde_json::Value;

use super::inventory::Inventory;
use crate::cluster::client::READ_TIMEOUT;
use crate::cluster::readset::RESOURCES;
use crate::cluster::{
    ClusterView, Object, ObjectKind, Source, COMPONENT_LABEL, INSTANCE_MANAGER_COMPONENT, LONGHORN_NAMESPACE,
};

/// Items per page.
pub const PAGE: u32 = 500;
/// Kinds listed at once.
const IN_FLIGHT: usize = 4;
/// `serve`'s periodic refresh is in no hurry: one kind at a time, small pages, so the memory
/// a refresh borrows (a page of parsed JSON) stays about a MiB over the view (200 a page took
/// 5-6 MiB at 10,000 volumes: docs/scale.md).
const REFRESH_PAGE: u32 = 50;

/// One kind to list: its URL path, the `apiVersion`/`kind` of its items, a label selector,
/// and whether a missing resource (an older Longhorn without that CRD) is tolerated.
#[derive(Default)]
struct Read {
    path: String,
    api_version: String,
    kind: &'static str,
    labels: Option<String>,
    /// Objects per page at most, when the kind asks for fewer than the caller's pages.
    page: u32,
    optional: bool,
    /// The inventory keeps something of this kind (else only the view does).
    inventory: bool,
    /// Namespaced collections to read when the API server refuses this one (403); a refused
    /// read is then recorded for its check instead of failing the run.
    forbidden: Option<Vec<String>>,
}

/// Namespaces whose DaemonSets are read when a cluster-wide LIST is refused: where Multus
/// (`kube-multus-ds`, `rke2-multus`) and longhorn-manager run.
const DAEMONSET_NAMESPACES: [&str; 2] = ["kube-system", LONGHORN_NAMESPACE];

/// The kinds of the view the inventory keeps something of too (the others fill only the view).
const INVENTORY_KINDS: [ObjectKind; 5] = [
    ObjectKind::Pod,
    ObjectKind::StorageClass,
    ObjectKind::Volume,
    ObjectKind::LonghornNode,
    ObjectKind::Setting,
];

fn reads() -> Vec<Read> {
    // Every kind the view holds, as the read-set declares it; of the pods only the instance
    // managers' (the storage-network check reads their Multus annotations).
    let view = RESOURCES.iter().map(|r| Read {
        path: r.list_path(),
        api_version: r.api_version(),
        kind: r.type_name,
        labels: (r.kind == ObjectKind::Pod)
            .then(|| format!("{COMPONENT_LABEL}={INSTANCE_MANAGER_COMPONENT}")),
        page: r.kind.page_size(),
        inventory: INVENTORY_KINDS.contains(&r.kind),
        ..Read::default()
    });
    // What only these checks read.
    let lh = |plural: &str, kind: &'static str| Read {
        path: format!("/apis/longhorn.io/v1beta2/namespaces/{LONGHORN_NAMESPACE}/{plural}"),
        api_version: "longhorn.io/v1beta2".into(),
        kind,
        page: PAGE,
        optional: true,
        inventory: true,
        ..Read::default()
    };
    let daemonsets = Read {
        path: "/apis/apps/v1/daemonsets".into(),
        api_version: "apps/v1".into(),
        kind: "DaemonSet",
        page: PAGE,
        inventory: true,
        forbidden: Some(
            DAEMONSET_NAMESPACES
                .iter()
                .map(|ns| format!("/apis/apps/v1/namespaces/{ns}/daemonsets"))
                .collect(),
        ),
        ..Read::default()
    };
    let others = [
        daemonsets,
        lh("backuptargets", "BackupTarget"),
        lh("recurringjobs", "RecurringJob"),
        lh("snapshots", "Snapshot"),
    ];
    view.chain(others).collect()
}

#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    items: Vec<Value>,
    #[serde(default)]
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta,
}

/// Reads everything `check cluster` needs from the cluster KUBECONFIG (or the pod) names.
pub async fn read() -> Result<(Inventory, ClusterView), String> {
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("cannot build a Kubernetes client (KUBECONFIG or in-cluster): {e}"))?;
    read_within(&client, READ_TIMEOUT).await
}

/// [`read`] with a given client, each page answered within `page_timeout` or the read fails.
pub async fn read_within(
    client: &kube::Client,
    page_timeout: Duration,
) -> Result<(Inventory, ClusterView), String> {
    let objects: Mutex<Vec<Object>> = Mutex::new(Vec::new());
    let inv = read_into(client, Some(&objects), PAGE, IN_FLIGHT, page_timeout).await?;
    let objects = objects.into_inner().unwrap_or_else(|p| p.into_inner());
    let now = SystemTime::now();
    let view = ClusterView::from_objects(Source::Direct, objects, now);
    Ok((inv, view.derive(crate::policy::drain::derivations(), now)))
}

/// Only the [`Inventory`]: what `serve` reads on each refresh, next to the view its watches
/// keep (so the drain kinds are never held twice).
pub async fn read_inventory(client: &kube::Client) -> Result<Inventory, String> {
    read_into(client, None, REFRESH_PAGE, 1, READ_TIMEOUT).await
}

/// Lists every kind, folding pages into the inventory; view objects go to `objects` if given.
async fn read_into(
    client: &kube::Client,
    objects: Option<&Mutex<Vec<Object>>>,
    page: u32,
    in_flight: usize,
    page_timeout: Duration,
) -> Result<Inventory, String> {
    let inv = Mutex::new(Inventory::default());
    // Without a view to fill, only the kinds the inventory keeps are read.
    let reads = reads().into_iter().filter(|r| objects.is_some() || r.inventory);
    stream::iter(reads)
        .map(|r| list_kind(client, r, &inv, objects, page, page_timeout))
        .buffer_unordered(in_flight)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(inv.into_inner().unwrap_or_else(|p| p.into_inner()))
}

async fn list_kind(
    client: &kube::Client,
    r: Read,
    inv: &Mutex<Inventory>,
    objects: Option<&Mutex<Vec<Object>>>,
    page: u32,
    page_timeout: Duration,
) -> Result<(), String> {
    match list_path(client, &r, &r.path, inv, objects, page, page_timeout).await {
        Err(Refused::Forbidden(reason)) if r.forbidden.is_some() => {
            tracing::info!(path = r.path, reason, "refused; reading namespace by namespace");
            let mut unread = vec![reason];
            let mut read = Vec::new();
            for path in r.forbidden.iter().flatten() {
                match list_path(client, &r, path, inv, objects, page, page_timeout).await {
                    Ok(()) => read.push(namespace_of(path)),
                    Err(Refused::Forbidden(reason)) => unread.push(reason),
                    Err(Refused::Other(e)) => return Err(e),
                }
            }
            let mut inv = inv.lock().unwrap_or_else(|p| p.into_inner());
            inv.network.daemonsets_unread = unread;
            inv.network.daemonsets_namespaces = read;
            Ok(())
        }
        Err(Refused::Forbidden(e) | Refused::Other(e)) => Err(e),
        Ok(()) => Ok(()),
    }
}

/// `kube-system` of `/apis/apps/v1/namespaces/kube-system/daemonsets`.
fn namespace_of(path: &str) -> String {
    path.split('/').skip_while(|s| *s != "namespaces").nth(1).unwrap_or(path).to_string()
}

/// Why a collection was not read: refused (403), or any other failure.
enum Refused {
    Forbidden(String),
    Other(String),
}

/// Lists one collection of `r`'s kind, page by page, into the inventory (and `objects`).
async fn list_path(
    client: &kube::Client,
    r: &Read,
    path: &str,
    inv: &Mutex<Inventory>,
    objects: Option<&Mutex<Vec<Object>>>,
    page: u32,
    page_timeout: Duration,
) -> Result<(), Refused> {
    let mut token: Option<String> = None;
    let page = r.page.min(page);
    loop {
        let mut lp = ListParams::default().limit(page);
        if let Some(l) = &r.labels {
            lp = lp.labels(l);
        }
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let req =
            kube::core::Request::new(path).list(&lp).map_err(|e| Refused::Other(format!("{path}: {e}")))?;
        let answer = tokio::time::timeout(page_timeout, client.request(req)).await.map_err(|_| {
            let within = humantime::format_duration(page_timeout);
            Refused::Other(format!("cannot list {path}: the API server did not answer within {within}"))
        })?;
        let page: Page = match answer {
            Ok(p) => p,
            Err(kube::Error::Api(e)) if r.optional && e.code == 404 => {
                tracing::info!(path, "not served by this cluster (older Longhorn?); not checked");
                return Ok(());
            }
            Err(kube::Error::Api(e)) if r.forbidden.is_some() && e.code == 403 => {
                return Err(Refused::Forbidden(format!("{path}: {} {}", e.code, e.message)));
            }
            Err(e) => return Err(Refused::Other(format!("cannot list {path}: {e}"))),
        };
        let mut got = Vec::new();
        {
            let mut inv = inv.lock().unwrap_or_else(|p| p.into_inner());
            inv.read.insert(r.kind);
            if r.kind == "DaemonSet" {
                inv.network.daemonsets_read = true;
            }
            for mut item in page.items {
                if let Some(map) = item.as_object_mut() {
                    map.entry("apiVersion").or_insert_with(|| Value::from(r.api_version.as_str()));
                    map.entry("kind").or_insert_with(|| Value::from(r.kind));
                }
                if objects.is_none() {
                    inv.note(&item);
                } else {
                    got.extend(inv.ingest(item));
                }
            }
        }
        if let Some(objects) = objects {
            objects.lock().unwrap_or_else(|p| p.into_inner()).extend(got);
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(());
        }
    }
}
