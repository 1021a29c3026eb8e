//! The requests of one confirmation: consistent LISTs (no `resourceVersion`), at most
//! [`MAX_IN_FLIGHT`](super::MAX_IN_FLIGHT) at a time, each body parsed once into typed objects.

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

/// Issues the reads of one confirmation through `gate`.
#[derive(Clone, Copy)]
pub(super) struct Reader<'a> {
    pub client: &'a kube::Client,
    pub gate: &'a Semaphore,
}

impl Reader<'_> {
    /// One consistent LIST of `kind`, narrowed by `selector`; `what` completes the kind's name
    /// in error messages.
    pub async fn list(
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
        let body = self.fetch(kind, selector, None, &what).await?;
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

    /// Every instance manager as a Table of its printer columns ([`summary`]), or `None` when
    /// the API server does not give a usable one (then the full list is read instead).
    pub async fn summary(&self) -> Result<Option<Vec<InstanceManager>>, ConfirmError> {
        let what = "instance managers (table)";
        match self.fetch(ObjectKind::InstanceManager, None, Some(TABLE_ACCEPT), what).await {
            Ok(body) => Ok(summary::parse(&body)
                .inspect_err(|e| tracing::debug!(reason = %e, "reading every instance manager instead"))
                .ok()),
            Err(e) => {
                tracing::debug!(reason = %e, "reading every instance manager instead");
                Ok(None)
            }
        }
    }

    /// The instance managers a decision for `node` reads: N's whole (`here`, labelled
    /// `longhorn.io/node=N`) and the others from `summary`. One more LIST reads them all whole
    /// when the summary is missing, names an instance manager on N that the labelled read did
    /// not return, or leaves a replica's instance manager to be picked by image.
    pub async fn instance_managers(
        &self,
        node: &str,
        here: Vec<Object>,
        summary: Option<Vec<InstanceManager>>,
    ) -> Result<Vec<Object>, ConfirmError> {
        let named_here = |name: &str| here.iter().any(|o| o.name() == name);
        let usable = summary.filter(|rows| {
            !summary::needs_images(rows)
                && rows.iter().all(|im| {
                    im.spec.node_id != node || named_here(im.metadata.name.as_deref().unwrap_or_default())
                })
        });
        let Some(rows) = usable else {
            return self.list(ObjectKind::InstanceManager, None, String::new()).await;
        };
        let others: Vec<Object> = rows
            .into_iter()
            .filter(|im| !named_here(im.metadata.name.as_deref().unwrap_or_default()))
            .map(|im| Object::InstanceManager(Box::new(im)))
            .collect();
        Ok(here.into_iter().chain(others).collect())
    }

    /// The body of one LIST request (no `resourceVersion`: a consistent read); with `accept`, a
    /// Table of every object's printer columns and no object.
    async fn fetch(
        &self,
        kind: ObjectKind,
        selector: Option<&str>,
        accept: Option<&str>,
        what: &str,
    ) -> Result<String, ConfirmError> {
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
        let started = std::time::Instant::now();
        let body = self
            .client
            .request_text(request)
            .await
            // The API server may echo the (long) selector back: keep the reason short.
            .map_err(|e| ConfirmError::Api {
                what: what.to_string(),
                message: crate::decision::clip(&one_line(&e.to_string()), MAX_ERROR_CHARS),
            })?;
        tracing::debug!(
            what,
            bytes = body.len(),
            took_ms = started.elapsed().as_millis() as u64,
            "confirmation read"
        );
        Ok(body)
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
