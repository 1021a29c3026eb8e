//! One kind's plain LIST (no pages, no watch) read object by object while its body arrives.
//!
//! The API server answers a LIST without `limit` or `resourceVersion` as one consistent read
//! from its watch cache (Kubernetes 1.31+), at less of its CPU than a streaming list or pages
//! (docs/scale.md, "How a start lists"). The body is parsed on the blocking pool from a reader
//! of the response as it comes, and each object is handed over as soon as it is read, so the
//! guard never holds more than [`IN_FLIGHT`] objects of it beside the view.

use std::io::BufReader;

use kube::api::{Api, ListParams};
use kube::Resource;
use serde::de::{DeserializeOwned, DeserializeSeed, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use tokio::sync::mpsc;
use tokio_util::compat::FuturesAsyncReadCompatExt as _;
use tokio_util::io::SyncIoBridge;

/// Objects read ahead of the view's watch loop.
const IN_FLIGHT: usize = 64;

/// What one LIST yields, in order: every object, then its end.
#[derive(Debug)]
pub enum Item<K> {
    Object(K),
    /// The list is complete; its `metadata.resourceVersion` (`None` if it had none).
    End(Option<String>),
}

/// Starts `api`'s LIST: its objects, then [`Item::End`], or an error that ends it.
pub fn start<K>(api: &Api<K>) -> mpsc::Receiver<kube::Result<Item<K>>>
where
    K: Resource + Clone + DeserializeOwned + Send + 'static,
{
    let (tx, rx) = mpsc::channel(IN_FLIGHT);
    let client = api.clone().into_client();
    let request = kube::core::Request::new(api.resource_url()).list(&ListParams::default());
    tokio::spawn(async move {
        let body = match request.map_err(kube::Error::BuildRequest) {
            Ok(request) => client.request_stream(request).await,
            Err(e) => Err(e),
        };
        let body = match body {
            Ok(body) => body,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        let reader = SyncIoBridge::new(body.compat());
        // The parse blocks on the body: it runs apart from the runtime's workers.
        let _ = tokio::task::spawn_blocking(move || read_list(reader, &tx)).await;
    });
    rx
}

/// Reads one list from `reader`, sending its objects and then its end to `tx`; an error is
/// sent in place of the end (nothing more once the receiver is gone).
fn read_list<K: DeserializeOwned>(reader: impl std::io::Read, tx: &mpsc::Sender<kube::Result<Item<K>>>) {
    let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(64 * 1024, reader));
    let read = ListSeed { tx }.deserialize(&mut de).and_then(|rv| de.end().map(|()| rv));
    let last = match read {
        Ok(rv) => Ok(Item::End(rv)),
        Err(_) if tx.is_closed() => return,
        Err(e) => Err(kube::Error::SerdeError(e)),
    };
    let _ = tx.blocking_send(last);
}

/// The list object: `items` are sent one by one, `metadata.resourceVersion` returned, the
/// rest skipped.
struct ListSeed<'a, K> {
    tx: &'a mpsc::Sender<kube::Result<Item<K>>>,
}

impl<'de, K: DeserializeOwned> DeserializeSeed<'de> for ListSeed<'_, K> {
    type Value = Option<String>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K: DeserializeOwned> Visitor<'de> for ListSeed<'_, K> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes list object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        #[derive(serde::Deserialize)]
        struct ListMeta {
            #[serde(rename = "resourceVersion")]
            resource_version: Option<String>,
        }
        let (mut rv, mut items) = (None, false);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "items" => {
                    map.next_value_seed(ItemsSeed { tx: self.tx })?;
                    items = true;
                }
                "metadata" => rv = map.next_value::<ListMeta>()?.resource_version,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !items {
            return Err(A::Error::missing_field("items"));
        }
        Ok(rv.filter(|rv| !rv.is_empty()))
    }
}

/// The `items` array (or `null`, an empty list): each object sent as it is read.
struct ItemsSeed<'a, K> {
    tx: &'a mpsc::Sender<kube::Result<Item<K>>>,
}

impl<'de, K: DeserializeOwned> DeserializeSeed<'de> for ItemsSeed<'_, K> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, K: DeserializeOwned> Visitor<'de> for ItemsSeed<'_, K> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list's items")
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(object) = seq.next_element::<K>()? {
            if self.tx.blocking_send(Ok(Item::Object(object))).is_err() {
                return Err(A::Error::custom("the list's reader is gone"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Vec<Result<String, String>> {
        let (tx, mut rx) = mpsc::channel(1024);
        read_list::<serde_json::Value>(json.as_bytes(), &tx);
        drop(tx);
        let mut out = Vec::new();
        while let Ok(item) = rx.try_recv() {
            out.push(match item {
                Ok(Item::Object(o)) => Ok(o["metadata"]["name"].as_str().unwrap_or("?").to_string()),
                Ok(Item::End(rv)) => Ok(format!("end {rv:?}")),
                Err(e) => Err(e.to_string()),
            });
        }
        out
    }

    #[test]
    fn objects_then_the_end_in_either_field_order() {
        let ok = |s: &str| Ok(s.to_string());
        // As the API server's streaming encoder writes it (metadata first), and as a Go map
        // is marshalled (sorted keys: items before metadata).
        let first = r#"{"kind":"ReplicaList","apiVersion":"longhorn.io/v1beta2","metadata":{"resourceVersion":"42"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#;
        assert_eq!(read(first), [ok("a"), ok("b"), ok("end Some(\"42\")")]);
        let sorted = r#"{"apiVersion":"v1","items":[{"metadata":{"name":"a"}}],"kind":"PodList","metadata":{"resourceVersion":"7","continue":""}}"#;
        assert_eq!(read(sorted), [ok("a"), ok("end Some(\"7\")")]);
        assert_eq!(read(r#"{"items":null,"metadata":{}}"#), [ok("end None")]);
    }

    #[test]
    fn a_broken_body_ends_in_an_error_after_what_it_read() {
        let cut = r#"{"metadata":{"resourceVersion":"42"},"items":[{"metadata":{"name":"a"}},{"metad"#;
        let out = read(cut);
        assert_eq!(out[0], Ok("a".to_string()));
        assert!(matches!(&out[1..], [Err(e)] if e.contains("EOF")), "{out:?}");
        for bad in ["", "[]", r#"{"metadata":{}}"#, r#"{"items":{}}"#, r#"{"items":[]} trailing"#] {
            let out = read(bad);
            assert!(matches!(out.as_slice(), [Err(_)]), "{bad}: {out:?}");
        }
    }
}
