//! One kind's plain LIST (no pages, no watch) read object by object while its body arrives.
//!
//! The API server answers a LIST without `limit` or `resourceVersion` as one consistent read
//! from its watch cache (Kubernetes 1.31+), at less of its CPU than a streaming list or pages
//! (docs/scale.md, "How a start lists"). The body is read on the blocking pool from a reader of
//! the response as it comes, and each object's JSON is handed over as soon as it is read, so the
//! guard never holds more than [`IN_FLIGHT`] objects of it beside the view. Objects are parsed
//! by the receiver, so what the view keeps is allocated where the watch events' objects are.

use std::io::BufReader;

use kube::api::{Api, ListParams};
use kube::Resource;
use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

/// Objects read ahead of the view's watch loop.
const IN_FLIGHT: usize = 64;

/// What one LIST yields, in order: every object (its JSON), then its end.
#[derive(Debug)]
pub enum Item {
    Object(Box<RawValue>),
    /// The list is complete; its `metadata.resourceVersion` (`None` if it had none).
    End(Option<String>),
}

/// Starts `api`'s LIST: its objects, then [`Item::End`], or an error that ends it. Once the
/// receiver is dropped the request and the reading of its body end too.
pub fn start<K>(api: &Api<K>) -> mpsc::Receiver<kube::Result<Item>>
where
    K: Resource + Clone,
{
    let (tx, rx) = mpsc::channel(IN_FLIGHT);
    let client = api.clone().into_client();
    let request = kube::core::Request::new(api.resource_url()).list(&ListParams::default());
    tokio::spawn(async move {
        let gone = tx.clone();
        let body = match request.map_err(kube::Error::BuildRequest) {
            Ok(request) => tokio::select! {
                body = client.request_stream(request) => body,
                () = gone.closed() => return,
            },
            Err(e) => Err(e),
        };
        let body = match body {
            Ok(body) => body,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        // The parse blocks on the body's bytes: it runs apart from the runtime's workers, fed
        // here, where the receiver's going is noticed even while no byte comes.
        let (chunks, chunks_rx) = mpsc::channel(4);
        let parser = tokio::task::spawn_blocking(move || read_list(Chunks::new(chunks_rx), &tx));
        let mut body = Box::pin(body);
        loop {
            let chunk = tokio::select! {
                chunk = next_chunk(&mut body) => chunk,
                () = gone.closed() => break,
            };
            let more = matches!(chunk, Ok(Some(_)));
            let Some(chunk) = chunk.transpose() else { break };
            if chunks.send(chunk).await.is_err() || !more {
                break;
            }
        }
        drop(chunks);
        let _ = parser.await;
    });
    rx
}

/// The next bytes of `body` (`None` at its end).
async fn next_chunk(body: &mut (impl futures::AsyncBufRead + Unpin)) -> std::io::Result<Option<Vec<u8>>> {
    use futures::AsyncBufReadExt as _;
    let buf = body.fill_buf().await?;
    if buf.is_empty() {
        return Ok(None);
    }
    let chunk = buf.to_vec();
    body.consume_unpin(chunk.len());
    Ok(Some(chunk))
}

/// A blocking reader of the chunks a body's reader sends; their end is its end.
struct Chunks {
    rx: mpsc::Receiver<std::io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
}

impl Chunks {
    fn new(rx: mpsc::Receiver<std::io::Result<Vec<u8>>>) -> Self {
        Self { rx, chunk: Vec::new(), at: 0 }
    }
}

impl std::io::Read for Chunks {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.chunk.len() {
            match self.rx.blocking_recv() {
                Some(chunk) => (self.chunk, self.at) = (chunk?, 0),
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.chunk.len() - self.at);
        out[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Reads one list from `reader`, sending its objects and then its end to `tx`; an error is
/// sent in place of the end (nothing more once the receiver is gone).
fn read_list(reader: impl std::io::Read, tx: &mpsc::Sender<kube::Result<Item>>) {
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
struct ListSeed<'a> {
    tx: &'a mpsc::Sender<kube::Result<Item>>,
}

impl<'de> DeserializeSeed<'de> for ListSeed<'_> {
    type Value = Option<String>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ListSeed<'_> {
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
struct ItemsSeed<'a> {
    tx: &'a mpsc::Sender<kube::Result<Item>>,
}

impl<'de> DeserializeSeed<'de> for ItemsSeed<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed<'_> {
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
        while let Some(object) = seq.next_element::<Box<RawValue>>()? {
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
        read_list(json.as_bytes(), &tx);
        drop(tx);
        let mut out = Vec::new();
        while let Ok(item) = rx.try_recv() {
            out.push(match item {
                Ok(Item::Object(o)) => {
                    let o: serde_json::Value = serde_json::from_str(o.get()).unwrap();
                    Ok(o["metadata"]["name"].as_str().unwrap_or("?").to_string())
                }
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
