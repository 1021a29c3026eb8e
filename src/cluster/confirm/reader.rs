//! The requests of one confirmation: consistent LISTs (no `resourceVersion`), at most
//! [`MAX_IN_FLIGHT`](super::MAX_IN_FLIGHT) at a time, each body parsed once into typed objects.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde::Deserialize;
use tokio::sync::Semaphore;

use super::selectors::encode_query_value;
use super::summary::{self, TABLE_ACCEPT};
use super::{ConfirmError, MAX_ERROR_CHARS};
use crate::cluster::readset;
use crate::cluster::{InstanceManager, Object, ObjectKind};

/// A Kubernetes list body: only its items are read.
#[derive(Deserialize)]
struct List<T> {
    items: Option<Vec<T>>,
}

/// The objects one LIST returned, and when it was sent among the confirmation's reads. A read
/// sent later reflects every write one sent earlier does, so where two reads hold the same
/// object, the copy of the later one is kept ([`in_send_order`]).
pub(super) struct Listed {
    pub sent: u64,
    pub objects: Vec<Object>,
}

/// Every object of `lists`, later reads' after earlier ones'.
pub(super) fn in_send_order(mut lists: Vec<Listed>) -> impl Iterator<Item = Object> {
    lists.sort_by_key(|l| l.sent);
    lists.into_iter().flat_map(|l| l.objects)
}

/// Issues the reads of one confirmation through `gate`, numbering them as they are sent.
#[derive(Clone, Copy)]
pub(super) struct Reader<'a> {
    pub client: &'a kube::Client,
    pub gate: &'a Semaphore,
    pub sent: &'a AtomicU64,
}

impl Reader<'_> {
    /// One consistent LIST of `kind`, narrowed by `selector`; `what` completes the kind's name
    /// in error messages.
    pub async fn list(
        &self,
        kind: ObjectKind,
        selector: Option<&str>,
        what: String,
    ) -> Result<Listed, ConfirmError> {
        let what = match (what.is_empty(), selector) {
            (false, _) => format!("{} {what}", kind.display()),
            (true, Some(sel)) => format!("{} ({sel})", kind.display()),
            (true, None) => kind.display().to_string(),
        };
        let (sent, body) = self.fetch(kind, selector, None, &what).await?;
        let decode =
            |e: serde_json::Error| ConfirmError::Decode { what: what.clone(), message: e.to_string() };
        let objects = match kind {
            ObjectKind::Node => parse(&body, Object::Node).map_err(decode)?,
            ObjectKind::Pod => parse(&body, Object::Pod).map_err(decode)?,
            ObjectKind::StorageClass => parse(&body, Object::StorageClass).map_err(decode)?,
            ObjectKind::Volume => parse(&body, Object::Volume).map_err(decode)?,
            ObjectKind::Replica => parse(&body, Object::Replica).map_err(decode)?,
            ObjectKind::Engine => parse(&body, Object::Engine).map_err(decode)?,
            ObjectKind::LonghornNode => parse(&body, Object::LonghornNode).map_err(decode)?,
            ObjectKind::Setting => parse(&body, Object::Setting).map_err(decode)?,
            ObjectKind::InstanceManager => parse(&body, Object::InstanceManager).map_err(decode)?,
        };
        Ok(Listed { sent, objects })
    }

    /// Every instance manager as a Table of its printer columns ([`summary`]), or `None` when
    /// the API server cannot print one (406 Not Acceptable) or prints one without those columns:
    /// then the full list is read instead. Any other failure fails the confirmation, as a
    /// failed LIST does.
    pub async fn summary(&self) -> Result<Option<(u64, Vec<InstanceManager>)>, ConfirmError> {
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
        let named_here = |name: &str| here.objects.iter().any(|o| o.name() == name);
        let name_of = |im: &InstanceManager| im.metadata.name.as_deref().unwrap_or_default().to_string();
        let usable = summary.filter(|(_, rows)| {
            !summary::needs_images(rows)
                && rows.iter().all(|im| im.spec.node_id != node || named_here(&name_of(im)))
        });
        let Some((sent, rows)) = usable else {
            return Ok(vec![here, self.list(ObjectKind::InstanceManager, None, String::new()).await?]);
        };
        let others: Vec<Object> = rows
            .into_iter()
            .filter(|im| !named_here(&name_of(im)))
            .map(|im| Object::InstanceManager(Box::new(im)))
            .collect();
        Ok(vec![here, Listed { sent, objects: others }])
    }

    /// The body of one LIST request (no `resourceVersion`: a consistent read); with `accept`, a
    /// Table of every object's printer columns and no object.
    async fn fetch(
        &self,
        kind: ObjectKind,
        selector: Option<&str>,
        accept: Option<&str>,
        what: &str,
    ) -> Result<(u64, String), ConfirmError> {
        let request_error = |message: String| ConfirmError::Request { what: what.to_string(), message };
        let mut url = readset::resource(kind).list_path();
        let mut query = Vec::new();
        if let Some(sel) = selector {
            query.push(format!("labelSelector={}", encode_query_value(sel)));
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
                message: crate::decision::clip(&one_line(&e.to_string()), MAX_ERROR_CHARS),
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
    use crate::cluster::{ClusterView, Engine, Source};

    fn engine_on(node: &str) -> Object {
        let mut e = Engine::default();
        e.metadata.name = Some("vol-e-0".into());
        e.metadata.namespace = Some(crate::cluster::LONGHORN_NAMESPACE.into());
        e.spec.node_id = node.into();
        Object::Engine(Box::new(e))
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
                ClusterView::from_objects(Source::Direct, in_send_order(lists), std::time::SystemTime::now());
            assert_eq!(view.engine("vol-e-0").unwrap().spec.node_id, "node-2");
        }
    }
}
