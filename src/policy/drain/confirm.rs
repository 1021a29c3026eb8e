//! Confirming drain-relevant state with consistent reads from the API server, for allows
//! that would otherwise rest on watch data older than `drain.maxViewAge`.
//!
//! Every LIST here carries no `resourceVersion` (a consistent read) and reads what the
//! read-set declares ([`super::readset`]); requests grow with the node only in steps of
//! [`MAX_SELECTOR_BYTES`] of volume names ([`request_count`]), at most [`MAX_IN_FLIGHT`] at
//! once. `check drain` without `--state` uses the same reads.

pub mod cached;
mod labels;
pub mod queue;
mod reader;
mod selectors;
pub mod summary;

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use futures::future::try_join_all;
use tokio::sync::Semaphore;

use crate::cluster::readset::{self, ConfirmRead, RESOURCES};
use crate::cluster::{
    ClusterView, Object, ObjectKind, SharedView, Source, INSTANCE_MANAGER_NODE_LABEL, LONGHORN_NODE_LABEL,
};
use crate::policy::drain::{engines_reported_by, volume_of_engine_name, volumes_on_node};
use reader::{Listed, Reader};
pub use selectors::{encode_query_value, volume_selectors, Requirement, Selector};

/// A fresh view of one node's drain-relevant state, or why it could not be read (one line).
pub type ConfirmOutcome = Result<std::sync::Arc<ClusterView>, String>;

/// A future giving a fresh view of one node's drain-relevant state.
pub type ConfirmFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ConfirmOutcome> + Send>>;

/// Reads the state that an allow for draining `node` rests on with a consistent read from the
/// API server, within the budget given, and returns it as a fresh view (see
/// [`crate::decision::Decision::confirm_node`]).
pub type Confirmer = std::sync::Arc<dyn Fn(String, std::time::Duration) -> ConfirmFuture + Send + Sync>;

/// Requests one confirmation keeps in flight at most.
pub const MAX_IN_FLIGHT: usize = 4;

/// Largest encoded `labelSelector` of one per-volume LIST (about 1,190 volumes named
/// `pvc-<uuid>`): far under the API server's 1 MiB request-header limit, and under the 60 KiB
/// default of Envoy-style proxies that may sit in front of it.
pub const MAX_SELECTOR_BYTES: usize = 48 * 1024;

/// Longest API error text kept in a "could not confirm" reason.
const MAX_ERROR_CHARS: usize = 300;

/// Why a confirmation read failed. One line each.
#[derive(Debug, thiserror::Error)]
pub enum ConfirmError {
    #[error("cannot list {what}: {message}")]
    Api { what: String, message: String },
    #[error("cannot read the list of {what}: {message}")]
    Decode { what: String, message: String },
    #[error("cannot build the request for {what}: {message}")]
    Request { what: String, message: String },
    #[error("the API server cannot give {what} in the form asked for (406 Not Acceptable)")]
    NotAcceptable { what: String },
    #[error("cannot rely on the labels of {what}: {message} (Longhorn writes these labels from those fields, and the reads find objects by them)")]
    Labels { what: String, message: String },
}

/// A [`Confirmer`] that reads from the API server through `client`, starting at once on the
/// volumes `view` (the watch cache it confirms) has on the node, beside the node's own reads,
/// instead of after them (see [`read_node_state_expecting`]).
pub fn confirmer(client: kube::Client, view: SharedView) -> Confirmer {
    confirmer_with(client, view, None)
}

/// [`confirmer`], answering the reads of the kinds `view` holds current under `max_age` (the
/// policy's `drain.maxViewAge`) from the view itself ([`cached`]): only the kinds that are not
/// current are read from the API server. This is what `serve` uses.
pub fn confirmer_reusing(client: kube::Client, view: SharedView, max_age: std::time::Duration) -> Confirmer {
    confirmer_with(client, view, Some(max_age))
}

fn confirmer_with(client: kube::Client, view: SharedView, max_age: Option<std::time::Duration>) -> Confirmer {
    std::sync::Arc::new(move |node: String, budget: std::time::Duration| {
        let client = client.clone();
        let expected = volumes_on_node(&view.read(), &node);
        let cache = max_age.map(|age| cached::Cached::current(&view, SystemTime::now(), age));
        let answered = view.clone();
        Box::pin(async move {
            let read = read_node_state_cached(&client, &node, &expected, cache.as_ref());
            match tokio::time::timeout(budget, read).await {
                Ok(read) => {
                    if read.is_ok() {
                        answered.update(|v| v.note_read_answered(std::time::Instant::now()));
                    }
                    read.map(std::sync::Arc::new).map_err(|e| e.to_string())
                }
                Err(_) => Err(format!("the API server did not answer within {}ms", budget.as_millis())),
            }
        })
    })
}

/// Reads everything a drain decision for `node` rests on, as the read-set declares it: the
/// node's replicas, engines and instance managers; every volume of those (and of the engines
/// N's instance managers report) with their replicas and engines elsewhere; the other instance
/// managers as a Table; the small kinds whole (Kubernetes nodes, instance-manager pods,
/// Settings); and Longhorn nodes only when N has no Kubernetes Node.
pub async fn read_node_state(client: &kube::Client, node: &str) -> Result<ClusterView, ConfirmError> {
    read_node_state_expecting(client, node, &BTreeSet::new()).await
}

/// [`read_node_state`], reading the volumes in `expected` beside the node's own reads rather
/// than after them. The node's reads still decide which volumes are read: those it finds and
/// `expected` lacks are read afterwards (one more batch of per-volume reads, only when the
/// expectation was short), and `expected` volumes it does not find are read but not looked at.
pub async fn read_node_state_expecting(
    client: &kube::Client,
    node: &str,
    expected: &BTreeSet<String>,
) -> Result<ClusterView, ConfirmError> {
    read_node_state_cached(client, node, expected, None).await
}

/// [`read_node_state_expecting`], with the reads of the kinds `cache` holds current answered
/// from the watch view.
pub async fn read_node_state_cached(
    client: &kube::Client,
    node: &str,
    expected: &BTreeSet<String>,
    cache: Option<&cached::Cached>,
) -> Result<ClusterView, ConfirmError> {
    if let Some(c) = cache.filter(|c| !c.kinds().is_empty()) {
        let kinds: Vec<&str> = c.kinds().iter().map(|k| k.display()).collect();
        tracing::debug!(node, current = %kinds.join(","), "confirming; the current kinds come from the watch view");
    }
    let gate = Semaphore::new(MAX_IN_FLIGHT);
    let sent = AtomicU64::new(0);
    let reader = &Reader { client, gate: &gate, sent: &sent, cache };
    let by_node = Selector::is(LONGHORN_NODE_LABEL, node);
    let elsewhere = Selector::is_not(LONGHORN_NODE_LABEL, node);
    let ims_by_node = Selector::is(INSTANCE_MANAGER_NODE_LABEL, node);
    let on_node = || format!("on node {node}");

    // The node's own reads ask for permits first (the semaphore is fair); the expected volumes'
    // reads follow at once, the whole kinds after them.
    let node_and_volumes = async {
        let node_kinds = kinds(ConfirmRead::by_node);
        let node_reads = async {
            let here = try_join_all(node_kinds.iter().map(|k| reader.list(*k, Some(&by_node), on_node())));
            let ims_here = reader.list(ObjectKind::InstanceManager, Some(&ims_by_node), on_node());
            let (here, ims_here, summary) = futures::try_join!(here, ims_here, reader.summary())?;
            let ims = reader.instance_managers(node, ims_here, summary).await?;
            Ok::<_, ConfirmError>((here, ims))
        };
        // When the view answers some reads, the one saved pays for splitting the largest read
        // left, the replicas elsewhere, in two: the API server encodes each LIST on one core.
        let split = cache.is_some_and(|c| {
            let k = c.kinds();
            !k.contains(&ObjectKind::Replica)
                && (k.contains(&ObjectKind::Volume) || k.contains(&ObjectKind::Engine))
        });
        let early = read_volumes(reader, expected, &elsewhere, split);
        let ((here, ims), early) = futures::try_join!(node_reads, early)?;
        let found = volumes_on(node, &here, &ims);
        let missing: BTreeSet<String> = found.difference(expected).cloned().collect();
        let late = read_volumes(reader, &missing, &elsewhere, false).await?;
        Ok::<_, ConfirmError>(here.into_iter().chain(ims).chain(early).chain(late).collect::<Vec<_>>())
    };
    let whole = async {
        let reads = RESOURCES.iter().filter_map(|r| match r.confirm {
            ConfirmRead::Whole(label) => {
                let selector = label.map(|(key, value)| Selector::is(key, value));
                Some(async move { reader.list(r.kind, selector.as_ref(), String::new()).await })
            }
            _ => None,
        });
        let mut whole = try_join_all(reads).await?;
        let is_node = |o: &Object| matches!(o, Object::Node(_)) && o.name() == node;
        if !whole.iter().flat_map(|l| &l.objects).any(is_node) {
            for r in RESOURCES.iter().filter(|r| r.confirm == ConfirmRead::WhenNodeUnknown) {
                whole.push(reader.list(r.kind, None, String::new()).await?);
            }
        }
        Ok::<_, ConfirmError>(whole)
    };
    let (mut lists, whole) = futures::try_join!(node_and_volumes, whole)?;
    lists.extend(whole);
    // An object two reads returned (an engine that changed node between them) keeps its newer
    // copy.
    let objects = reader::newest_copies(lists).into_iter().filter(is_read);
    let now = SystemTime::now();
    Ok(ClusterView::from_objects(Source::Direct, objects, now).derive(super::derivations(), now))
}

/// The volumes, their replicas not on the node (`elsewhere` selects those) and their engines,
/// in per-volume LISTs of [`MAX_SELECTOR_BYTES`] of names at most: none for no volumes. With
/// `split_elsewhere` the replicas elsewhere are read in two halves at once.
async fn read_volumes(
    reader: &Reader<'_>,
    volumes: &BTreeSet<String>,
    elsewhere: &Selector,
    split_elsewhere: bool,
) -> Result<Vec<Listed>, ConfirmError> {
    let plain = volume_selectors(volumes, None, MAX_SELECTOR_BYTES);
    let skipping = if split_elsewhere && volumes.len() > 1 {
        let mid = volumes.len() / 2;
        let first: BTreeSet<String> = volumes.iter().take(mid).cloned().collect();
        let second: BTreeSet<String> = volumes.iter().skip(mid).cloned().collect();
        let mut s = volume_selectors(&first, Some(elsewhere), MAX_SELECTOR_BYTES);
        s.extend(volume_selectors(&second, Some(elsewhere), MAX_SELECTOR_BYTES));
        s
    } else {
        volume_selectors(volumes, Some(elsewhere), MAX_SELECTOR_BYTES)
    };
    let reads = RESOURCES.iter().filter(|r| r.confirm.by_volume()).flat_map(|r| {
        let selectors = if r.confirm == ConfirmRead::NodeAndVolumesElsewhere { &skipping } else { &plain };
        let batches = selectors.len();
        selectors.iter().enumerate().map(move |(i, (sel, n))| {
            let what = if batches == 1 {
                format!("of {n} volumes")
            } else {
                format!("of {n} volumes (batch {} of {batches})", i + 1)
            };
            reader.list(r.kind, Some(sel), what)
        })
    });
    try_join_all(reads).await
}

/// How many requests [`read_node_state`] makes for a node whose volumes need `batches`
/// per-volume selectors (0 when the node holds nothing), when N has a Kubernetes Node and the
/// instance-manager Table can stand in for the other nodes' instance managers (when it cannot,
/// as while old and new instance managers run side by side, one more LIST reads them whole).
pub fn request_count(batches: usize) -> usize {
    let count = |f: fn(ConfirmRead) -> bool| RESOURCES.iter().filter(|r| f(r.confirm)).count();
    let whole = count(|c| matches!(c, ConfirmRead::Whole(_)));
    let by_node = count(ConfirmRead::by_node);
    let summarised = 2 * count(|c| c == ConfirmRead::NodeAndSummary);
    let by_volume = count(ConfirmRead::by_volume);
    whole + by_node + summarised + by_volume * batches
}

/// Drops Settings a drain decision does not read, so a confirmed view holds exactly the read-set.
fn is_read(o: &Object) -> bool {
    !matches!(o, Object::Setting(_)) || readset::is_drain_setting(o.name())
}

fn kinds(f: fn(ConfirmRead) -> bool) -> Vec<ObjectKind> {
    RESOURCES.iter().filter(|r| f(r.confirm)).map(|r| r.kind).collect()
}

/// The volumes with a replica or engine on `node`, or whose engine `node`'s instance managers
/// report running: the volumes [`crate::policy::drain::analyze_node`] looks at.
fn volumes_on(node: &str, here: &[Listed], ims: &[Listed]) -> BTreeSet<String> {
    let mut volumes = BTreeSet::new();
    for o in here.iter().flat_map(|l| &l.objects) {
        match o {
            Object::Replica(r) => volumes.extend(r.volume().map(str::to_string)),
            Object::Engine(e) => volumes.extend(e.volume().map(str::to_string)),
            _ => {}
        }
    }
    let ims_here = ims.iter().flat_map(|l| &l.objects).filter_map(|o| match o {
        Object::InstanceManager(im) if im.spec.node_id == node => Some(&**im),
        _ => None,
    });
    for engine in engines_reported_by(ims_here) {
        volumes.extend(volume_of_engine_name(&engine).map(str::to_string));
    }
    volumes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_count_is_the_small_kinds_plus_three_per_batch() {
        assert_eq!(request_count(0), 7);
        assert_eq!(request_count(1), 10);
        assert_eq!(request_count(2), 13);
    }
}
