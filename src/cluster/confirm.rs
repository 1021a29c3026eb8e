//! Confirming drain-relevant state with consistent reads from the API server, for allows
//! that would otherwise rest on watch data older than `drain.maxViewAge`.
//!
//! Every LIST here carries no `resourceVersion`, which makes it a consistent read: the result
//! is at least as new as any write acknowledged before the request. What is read comes from the
//! read-set ([`super::readset`]); the number of requests does not grow with the cluster and
//! grows with the node only in steps of [`MAX_SELECTOR_BYTES`] of volume names (see
//! [`request_count`]); at most [`MAX_IN_FLIGHT`] run at once. `longhorn-guard check drain`
//! without `--state` uses the same reads.

use std::collections::BTreeSet;
use std::time::SystemTime;

use futures::future::try_join_all;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use tokio::sync::Semaphore;

use super::readset::{self, ConfirmRead, RESOURCES};
use super::{ClusterView, Object, ObjectKind, Source, LONGHORN_NODE_LABEL, LONGHORN_VOLUME_LABEL};
use crate::admit::Confirmer;
use crate::policy::drain::{engines_reported_by, volume_of_engine_name};

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
}

/// A [`Confirmer`] that reads from the API server through `client`.
pub fn confirmer(client: kube::Client) -> Confirmer {
    std::sync::Arc::new(move |node: String| {
        let client = client.clone();
        Box::pin(async move { read_node_state(&client, &node).await.map_err(|e| e.to_string()) })
    })
}

/// A Kubernetes list body: only its items are read.
#[derive(Deserialize)]
struct List<T> {
    items: Option<Vec<T>>,
}

/// Reads everything a drain decision for `node` rests on, as the read-set declares it: the
/// node's replicas and engines, then every volume, replica and engine of their volumes (and of
/// engines N's instance managers report), the small kinds whole (Kubernetes and Longhorn nodes,
/// instance managers, instance-manager pods) and the drain Settings.
pub async fn read_node_state(client: &kube::Client, node: &str) -> Result<ClusterView, ConfirmError> {
    let gate = Semaphore::new(MAX_IN_FLIGHT);
    let reader = &Reader { client, gate: &gate };
    let by_node = format!("{LONGHORN_NODE_LABEL}={node}");

    // The node's own objects first: the per-volume reads wait for them. The semaphore is fair,
    // so these take the first permits.
    let node_and_volumes = async {
        let node_kinds = kinds(|c| c == ConfirmRead::NodeAndVolumes);
        let here = try_join_all(
            node_kinds.iter().map(|k| reader.list(*k, Some(&by_node), format!("on node {node}"))),
        );
        let ims = reader.list(ObjectKind::InstanceManager, None, String::new());
        let (here, ims) = futures::try_join!(here, ims)?;
        let here: Vec<Object> = here.into_iter().flatten().collect();
        let volumes = volumes_on(node, &here, &ims);
        let selectors = volume_selectors(&volumes, MAX_SELECTOR_BYTES);
        let volume_kinds = kinds(|c| matches!(c, ConfirmRead::Volumes | ConfirmRead::NodeAndVolumes));
        let batches = selectors.len();
        let reads = selectors.iter().enumerate().flat_map(|(i, (sel, n))| {
            let what = if batches == 1 {
                format!("of {n} volumes")
            } else {
                format!("of {n} volumes (batch {} of {batches})", i + 1)
            };
            volume_kinds.iter().map(move |k| reader.list(*k, Some(sel), what.clone()))
        });
        let of_volumes = try_join_all(reads).await?;
        Ok::<_, ConfirmError>(here.into_iter().chain(ims).chain(of_volumes.into_iter().flatten()))
    };
    let whole = async {
        let reads = RESOURCES.iter().filter_map(|r| match r.confirm {
            ConfirmRead::Whole(sel) if r.kind != ObjectKind::InstanceManager => {
                Some(reader.list(r.kind, sel, String::new()))
            }
            _ => None,
        });
        try_join_all(reads).await
    };
    let (node_objects, whole) = futures::try_join!(node_and_volumes, whole)?;
    // Per-volume reads come last: they started last, so their versions win over the node reads.
    let objects = whole.into_iter().flatten().filter(is_read).chain(node_objects);
    Ok(ClusterView::from_objects(Source::Direct, objects, SystemTime::now()))
}

/// How many requests [`read_node_state`] makes for a node whose volumes need `batches`
/// per-volume selectors (0 when the node holds nothing).
pub fn request_count(batches: usize) -> usize {
    let count = |f: fn(ConfirmRead) -> bool| RESOURCES.iter().filter(|r| f(r.confirm)).count();
    let whole = count(|c| matches!(c, ConfirmRead::Whole(_)));
    let by_node = count(|c| c == ConfirmRead::NodeAndVolumes);
    let by_volume = count(|c| matches!(c, ConfirmRead::Volumes | ConfirmRead::NodeAndVolumes));
    whole + by_node + by_volume * batches
}

/// Drops Settings a drain decision does not read, so a confirmed view holds exactly the read-set.
fn is_read(o: &Object) -> bool {
    !matches!(o, Object::Setting(_)) || readset::is_drain_setting(o.name())
}

fn kinds(f: impl Fn(ConfirmRead) -> bool) -> Vec<ObjectKind> {
    RESOURCES.iter().filter(|r| f(r.confirm)).map(|r| r.kind).collect()
}

/// The volumes with a replica or engine on `node`, or whose engine `node`'s instance managers
/// report running: the volumes [`crate::policy::drain::analyze_node`] looks at.
fn volumes_on(node: &str, here: &[Object], ims: &[Object]) -> BTreeSet<String> {
    let mut volumes = BTreeSet::new();
    for o in here {
        match o {
            Object::Replica(r) => volumes.extend(r.volume().map(str::to_string)),
            Object::Engine(e) => volumes.extend(e.volume().map(str::to_string)),
            _ => {}
        }
    }
    let ims_here = ims.iter().filter_map(|o| match o {
        Object::InstanceManager(im) if im.spec.node_id == node => Some(&**im),
        _ => None,
    });
    for engine in engines_reported_by(ims_here) {
        volumes.extend(volume_of_engine_name(&engine).map(str::to_string));
    }
    volumes
}

/// `longhornvolume in (...)` selectors over `volumes`, each at most `max_bytes` once encoded,
/// with how many volumes each names. Names that cannot be label values are left out: no object
/// can carry them as a label, so a selector naming them would only fail.
pub fn volume_selectors(volumes: &BTreeSet<String>, max_bytes: usize) -> Vec<(String, usize)> {
    let head = format!("{LONGHORN_VOLUME_LABEL} in (");
    let mut out = Vec::new();
    let mut current = String::new();
    let mut n = 0;
    for v in volumes.iter().filter(|v| is_label_value(v)) {
        // Names are unreserved characters: the encoded length is the raw length.
        if n > 0 && head.len() + current.len() + 1 + v.len() + 1 > max_bytes {
            out.push((format!("{head}{current})"), n));
            current.clear();
            n = 0;
        }
        if n > 0 {
            current.push(',');
        }
        current.push_str(v);
        n += 1;
    }
    if n > 0 {
        out.push((format!("{head}{current})"), n));
    }
    out
}

/// A valid Kubernetes label value: at most 63 of `[A-Za-z0-9-_.]`, alphanumeric at both ends.
fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Encodes a query value: unreserved characters and `(),` stay, a space is `+`, the rest `%XX`.
pub fn encode_query_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'(' | b')' | b',' => {
                out.push(char::from(b))
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Issues the LISTs of one confirmation, at most [`MAX_IN_FLIGHT`] at a time.
#[derive(Clone, Copy)]
struct Reader<'a> {
    client: &'a kube::Client,
    gate: &'a Semaphore,
}

impl Reader<'_> {
    /// One consistent LIST of `kind`, narrowed by `selector`; `what` completes the kind's name
    /// in error messages.
    async fn list(
        &self,
        kind: ObjectKind,
        selector: Option<&str>,
        what: String,
    ) -> Result<Vec<Object>, ConfirmError> {
        let what = match (what.is_empty(), selector) {
            (false, _) => format!("{} {what}", kind.display()),
            (true, Some(sel)) => format!("{} ({sel})", kind.display()),
            (true, None) => kind.display().to_string(),
        };
        let body = self.fetch(kind, selector, &what).await?;
        let decode =
            |e: serde_json::Error| ConfirmError::Decode { what: what.clone(), message: e.to_string() };
        Ok(match kind {
            ObjectKind::Node => parse(&body, Object::Node).map_err(decode)?,
            ObjectKind::Pod => parse(&body, Object::Pod).map_err(decode)?,
            ObjectKind::StorageClass => parse(&body, Object::StorageClass).map_err(decode)?,
            ObjectKind::Volume => parse(&body, Object::Volume).map_err(decode)?,
            ObjectKind::Replica => parse(&body, Object::Replica).map_err(decode)?,
            ObjectKind::Engine => parse(&body, Object::Engine).map_err(decode)?,
            ObjectKind::LonghornNode => parse(&body, Object::LonghornNode).map_err(decode)?,
            ObjectKind::Setting => parse(&body, Object::Setting).map_err(decode)?,
            ObjectKind::InstanceManager => parse(&body, Object::InstanceManager).map_err(decode)?,
        })
    }

    /// The body of one LIST request (no `resourceVersion`: a consistent read).
    async fn fetch(
        &self,
        kind: ObjectKind,
        selector: Option<&str>,
        what: &str,
    ) -> Result<String, ConfirmError> {
        let mut url = readset::resource(kind).list_path();
        if let Some(sel) = selector {
            url.push_str("?labelSelector=");
            url.push_str(&encode_query_value(sel));
        }
        let request = http::Request::get(url)
            .body(Vec::new())
            .map_err(|e| ConfirmError::Request { what: what.to_string(), message: e.to_string() })?;
        let _permit = self
            .gate
            .acquire()
            .await
            .map_err(|e| ConfirmError::Request { what: what.to_string(), message: e.to_string() })?;
        self.client
            .request_text(request)
            .await
            // The API server may echo the (long) selector back: keep the reason short.
            .map_err(|e| ConfirmError::Api {
                what: what.to_string(),
                message: crate::decision::clip(&one_line(&e.to_string()), MAX_ERROR_CHARS),
            })
    }
}

/// Parses a list body once, straight into the kind's typed objects.
fn parse<T: DeserializeOwned>(body: &str, wrap: fn(T) -> Object) -> Result<Vec<Object>, serde_json::Error> {
    let list: List<T> = serde_json::from_str(body)?;
    Ok(list.items.unwrap_or_default().into_iter().map(wrap).collect())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> BTreeSet<String> {
        (0..n).map(|i| format!("pvc-{i:08}-0000-4000-8000-{i:012}")).collect()
    }

    #[test]
    fn selectors_stay_under_the_byte_bound_and_name_every_volume_once() {
        let volumes = names(3_000);
        let sels = volume_selectors(&volumes, MAX_SELECTOR_BYTES);
        assert_eq!(sels.len(), 3);
        let mut seen = BTreeSet::new();
        for (sel, n) in &sels {
            assert!(encode_query_value(sel).len() <= MAX_SELECTOR_BYTES, "{}", sel.len());
            let inner = sel.strip_prefix("longhornvolume in (").unwrap().strip_suffix(')').unwrap();
            let listed: Vec<&str> = inner.split(',').collect();
            assert_eq!(listed.len(), *n);
            seen.extend(listed.into_iter().map(str::to_string));
        }
        assert_eq!(seen, volumes);
        assert_eq!(volume_selectors(&names(1_000), MAX_SELECTOR_BYTES).len(), 1);
        assert!(volume_selectors(&BTreeSet::new(), MAX_SELECTOR_BYTES).is_empty());
    }

    #[test]
    fn the_request_count_is_the_small_kinds_plus_three_per_batch() {
        assert_eq!(request_count(0), 7);
        assert_eq!(request_count(1), 10);
        assert_eq!(request_count(2), 13);
    }

    #[test]
    fn names_that_cannot_be_label_values_are_left_out() {
        let volumes: BTreeSet<String> = ["ok", "bad name", "-dash", &"x".repeat(64), "a,b", "v.1_2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(volume_selectors(&volumes, 1024), [("longhornvolume in (ok,v.1_2)".to_string(), 2)]);
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(encode_query_value("longhornnode=node-1"), "longhornnode%3Dnode-1");
        assert_eq!(encode_query_value("longhornvolume in (a,b)"), "longhornvolume+in+(a,b)");
        assert_eq!(encode_query_value("longhorn.io/component=x"), "longhorn.io%2Fcomponent%3Dx");
    }
}
