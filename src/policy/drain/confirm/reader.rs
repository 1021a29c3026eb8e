//! The requests of one confirmation: consistent LISTs (no `resourceVersion`), at most
//! [`MAX_IN_FLIGHT`](super::MAX_IN_FLIGHT) at a time, each body parsed once into typed objects.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde::Deserialize;
use tokio::sync::Semaphore;

use super::cached::Cached;
use super::labels;
use super::selectors::{encode_query_value, Selector};
use super::summary::{self, TABLE_ACCEPT};
use super::{ConfirmError, MAX_ERROR_CHARS};
use crate::cluster::Listed as _;
use crate::cluster::{on_kind, InstanceManager, Object, ObjectKind};

/// A Kubernetes list body: its kind, whether it is complete, and its items.
#[derive(Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
struct List<T> {
    kind: Option<String>,
    #[serde(default)]
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta,
    /// `None` when the field is absent; `Some(None)` for `null` (an empty list, as Go writes a
    /// nil slice).
    #[serde(default, deserialize_with = "present")]
    items: Option<Option<Vec<T>>>,
}

/// A field that is present (`null` included).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The objects one LIST returned, and when it was sent among the confirmation's reads.
pub(super) struct Listed {
    pub sent: u64,
    pub objects: Vec<Object>,
}

/// Every object of `lists`, one copy each. Where two reads returned the same object (an
/// engine read by node and by volume that changed between them), the newer copy is kept: the
/// higher `resourceVersion` when both are numbers, as the API server's are (etcd revisions),
/// else the copy of the read sent later. Overlapping reads may be served out of send order, so
/// the version decides where it can.
pub(super) fn newest_copies(mut lists: Vec<Listed>) -> Vec<Object> {
    lists.sort_by_key(|l| l.sent);
    let mut at: std::collections::HashMap<(ObjectKind, String, String), usize> = Default::default();
    let mut out: Vec<Object> = Vec::new();
    for o in lists.into_iter().flat_map(|l| l.objects) {
        let m = o.metadata();
        let key = (o.kind(), m.namespace.as_deref().unwrap_or("").to_string(), o.name().to_string());
        match at.get(&key) {
            None => {
                at.insert(key, out.len());
                out.push(o);
            }
            Some(&i) => {
                let rv =
                    |o: &Object| o.metadata().resource_version.as_deref().and_then(|v| v.parse::<u64>().ok());
                let older = matches!((rv(&out[i]), rv(&o)), (Some(kept), Some(new)) if new < kept);
                if !older {
                    out[i] = o;
                }
            }
        }
    }
    out
}

/// Issues the reads of one confirmation through `gate`, numbering them as they are sent.
#[derive(Clone, Copy)]
pub(super) struct Reader<'a> {
    pub client: &'a kube::Client,
    pub gate: &'a Semaphore,
    pub sent: &'a AtomicU64,
    /// Kinds the watch view holds current: their reads are answered from it.
    pub cache: Option<&'a Cached>,
}

impl Reader<'_> {
    /// One consistent LIST of `kind`, narrowed by `selector`; `what` completes the kind's name
    /// in error messages.
    pub async fn list(
        &self,
        kind: ObjectKind,
        selector: Option<&Selector>,
        what: String,
    ) -> Result<Listed, ConfirmError> {
        let what = match (what.is_empty(), selector) {
            (false, _) => format!("{} {what}", kind.display()),
            (true, Some(sel)) => format!("{} ({sel})", kind.display()),
            (true, None) => kind.display().to_string(),
        };
        if let Some(objects) = self.cache.and_then(|c| c.list(kind, selector)) {
            tracing::debug!(what, objects = objects.len(), "confirmation read from the current watch view");
            return Ok(Listed { sent: self.sent.fetch_add(1, Ordering::SeqCst), objects });
        }
        let (sent, body) = self.fetch(kind, selector, None, &what).await?;
        let want = format!("{}List", kind.resource().type_name);
        let objects = on_kind!(kind, K => parse(&body, &want, |o: K| K::wrap(Box::new(o))))
            .map_err(|message| ConfirmError::Decode { what: what.clone(), message })?;
        if let Some(message) = objects.iter().find_map(labels::disagreement) {
            return Err(ConfirmError::Labels { what, message });
        }
        Ok(Listed { sent, objects })
    }

    /// Every instance manager as a Table of its printer columns ([`summary`]), or `None` when
    /// the API server cannot print one (406 Not Acceptable) or prints one without those columns:
    /// then the full list is read instead. Any other failure fails the confirmation, as a
    /// failed LIST does.
    pub async fn summary(&self) -> Result<Option<(u64, Vec<InstanceManager>)>, ConfirmError> {
        if let Some(objects) = self.cache.and_then(|c| c.list(ObjectKind::InstanceManager, None)) {
            let ims = objects.into_iter().filter_map(InstanceManager::unwrap).map(|im| *im).collect();
            return Ok(Some((self.sent.fetch_add(1, Ordering::SeqCst), ims)));
        }
        let what = "instance managers (table)";
        let (sent, body) = match self.fetch(ObjectKind::InstanceManager, None, Some(TABLE_ACCEPT), what).await
        {
            Ok(answer) => answer,
            Err(ConfirmError::NotAcceptable { .. }) => {
                tracing::debug!("the API server prints no instance-manager table; reading them whole");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        Ok(summary::parse(&body)
            .inspect_err(|e| tracing::debug!(reason = %e, "reading every instance manager whole"))
            .ok()
            .map(|rows| (sent, rows)))
    }

    /// The instance managers a decision for `node` reads: N's whole (`here`, labelled
    /// `longhorn.io/node=N`) and the others from `summary`. One more LIST reads them all whole
    /// when the summary is missing, names an instance manager on N that the labelled read did
    /// not return, or leaves a replica's instance manager to be picked by image.
    pub async fn instance_managers(
        &self,
        node: &str,
        here: Listed,
        summary: Option<(u64, Vec<InstanceManager>)>,
    ) -> Result<Vec<Listed>, ConfirmError> {
        let named_here = |im: &InstanceManager| {
            let name = im.metadata.name.as_deref().unwrap_or_default();
            here.objects.iter().any(|o| o.name() == name)
        };
        let usable = summary.filter(|(_, rows)| {
            !summary::needs_images(rows) && rows.iter().all(|im| im.spec.node_id != node || named_here(im))
        });
        let Some((sent, rows)) = usable else {
            return Ok(vec![here, self.list(ObjectKind::InstanceManager, None, String::new()).await?]);
        };
        let others: Vec<Object> = rows
            .into_iter()
            .filter(|im| !named_here(im))
            .map(|im| Object::InstanceManager(Box::new(im)))
            .collect();
        Ok(vec![here, Listed { sent, objects: others }])
    }

    /// The body of one LIST request (no `resourceVersion`: a consistent read); with `accept`, a
    /// Table of every object's printer columns and no object.
    async fn fetch(
        &self,
        kind: ObjectKind,
        selector: Option<&Selector>,
        accept: Option<&str>,
        what: &str,
    ) -> Result<(u64, String), ConfirmError> {
        let request_error = |message: String| ConfirmError::Request { what: what.to_string(), message };
        let mut url = kind.resource().list_path();
        let mut query = Vec::new();
        if let Some(sel) = selector {
            query.push(format!("labelSelector={}", encode_query_value(&sel.to_string())));
        }
        if accept.is_some() {
            query.push("includeObject=None".to_string());
        }
        if !query.is_empty() {
            url.push('?');
            url.push_str(&query.join("&"));
        }
        let mut request = http::Request::get(url);
        if let Some(accept) = accept {
            request = request.header(http::header::ACCEPT, accept);
        }
        let request = request.body(Vec::new()).map_err(|e| request_error(e.to_string()))?;
        let _permit = self.gate.acquire().await.map_err(|e| request_error(e.to_string()))?;
        let sent = self.sent.fetch_add(1, Ordering::SeqCst);
        let started = std::time::Instant::now();
        let body = self.client.request_text(request).await.map_err(|e| match e {
            kube::Error::Api(ref status) if status.code == 406 => {
                ConfirmError::NotAcceptable { what: what.to_string() }
            }
            // The API server may echo the (long) selector back: keep the reason short.
            e => ConfirmError::Api {
                what: what.to_string(),
                message: crate::decision::clip(&crate::clip::one_line(&e.to_string()), MAX_ERROR_CHARS),
            },
        })?;
        tracing::debug!(
            what,
            bytes = body.len(),
            took_ms = started.elapsed().as_millis() as u64,
            "confirmation read"
        );
        Ok((sent, body))
    }
}

/// Parses a list body once, straight into the kind's typed objects. Only a complete list of
/// kind `want` stands for the state: one of another kind (a `Status` answered with 200, a
/// Table, metadata only), without an `items` field, or cut short (a `continue` token) is
/// refused, and the confirmation with it.
fn parse<T: DeserializeOwned>(body: &str, want: &str, wrap: fn(T) -> Object) -> Result<Vec<Object>, String> {
    let list: List<T> = serde_json::from_str(body).map_err(|e| e.to_string())?;
    let kind = list.kind.unwrap_or_default();
    if kind != want {
        return Err(format!("the answer is a {kind:?}, not a {want}"));
    }
    if list.metadata.continue_.is_some_and(|t| !t.is_empty()) {
        return Err("the answer is one page of a longer list (it has a continue token)".into());
    }
    let items = list.items.ok_or_else(|| format!("the {want} has no items field"))?;
    Ok(items.unwrap_or_default().into_iter().map(wrap).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ClusterView, Engine, Source};

    fn engine_on(node: &str) -> Object {
        engine_at(node, None)
    }

    fn engine_at(node: &str, rv: Option<&str>) -> Object {
        let mut e = Engine::default();
        e.metadata.name = Some("vol-e-0".into());
        e.metadata.namespace = Some(crate::cluster::LONGHORN_NAMESPACE.into());
        e.metadata.resource_version = rv.map(Into::into);
        e.spec.node_id = node.into();
        Object::Engine(Box::new(e))
    }

    #[test]
    fn overlapping_reads_keep_the_copy_with_the_higher_resource_version() {
        // The read sent later was served first (at an older revision): the version decides.
        let lists = vec![
            Listed { sent: 3, objects: vec![engine_at("node-2", Some("120"))] },
            Listed { sent: 7, objects: vec![engine_at("node-1", Some("99"))] },
        ];
        let kept = newest_copies(lists);
        assert_eq!(kept.len(), 1);
        let Object::Engine(e) = &kept[0] else { panic!("{kept:?}") };
        assert_eq!(e.spec.node_id, "node-2");
    }

    #[test]
    fn an_object_two_reads_returned_keeps_the_later_reads_copy() {
        // Finished in the other order than they were sent: the engine moved from node-1 to
        // node-2 between the two reads.
        for lists in [
            vec![
                Listed { sent: 7, objects: vec![engine_on("node-2")] },
                Listed { sent: 3, objects: vec![engine_on("node-1")] },
            ],
            vec![
                Listed { sent: 3, objects: vec![engine_on("node-1")] },
                Listed { sent: 7, objects: vec![engine_on("node-2")] },
            ],
        ] {
            let view =
                ClusterView::from_objects(Source::Direct, newest_copies(lists), std::time::SystemTime::now());
            assert_eq!(view.engine("vol-e-0").unwrap().spec.node_id, "node-2");
        }
    }
}
