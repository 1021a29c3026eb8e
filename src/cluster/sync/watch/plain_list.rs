//! One kind's plain LIST (no pages, no watch) read object by object while its body arrives.
//!
//! The API server answers a LIST without `limit` or `resourceVersion` as one consistent read
//! from its watch cache (Kubernetes 1.31+), at less of its CPU than a streaming list or pages
//! (docs/scale.md, "How a start lists"). The body is read as it comes, on the runtime, and each
//! object's JSON is handed over as soon as all of it has arrived, so the guard never holds
//! more than [`IN_FLIGHT`] objects of it beside the view. serde_json reads every value from the
//! bytes at hand, as a slice (far faster than through its reader, docs/scale.md); what is done
//! here by hand is only the list object's punctuation between those values.

use futures::{AsyncBufRead, AsyncBufReadExt as _};
use kube::api::{Api, ListParams};
use kube::Resource;
use serde::de::{DeserializeOwned, Error as _, IgnoredAny};
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
        let read = async {
            let request = request.map_err(kube::Error::BuildRequest)?;
            let body = client.request_stream(request).await?;
            match read_list(Box::pin(body), &tx).await {
                Ok(rv) => Ok(Some(Item::End(rv))),
                Err(Failure::Gone) => Ok(None),
                Err(Failure::Json(e)) => Err(kube::Error::SerdeError(e)),
            }
        };
        finish(read, &tx).await;
    });
    rx
}

/// Sends what `read` ends with to `tx`, unless the receiver goes first: that is noticed even
/// while no byte comes, and ends `read`.
async fn finish(
    read: impl std::future::Future<Output = kube::Result<Option<Item>>>,
    tx: &mpsc::Sender<kube::Result<Item>>,
) {
    let last = tokio::select! {
        last = read => last,
        () = tx.closed() => return,
    };
    if let Some(last) = last.transpose() {
        let _ = tx.send(last).await;
    }
}

/// Why a list was not read to its end.
enum Failure {
    /// The receiver went away.
    Gone,
    /// The body is not a list, was cut off, or could not be read.
    Json(serde_json::Error),
}

impl From<serde_json::Error> for Failure {
    fn from(e: serde_json::Error) -> Self {
        Self::Json(e)
    }
}

/// Reads one list from `body`, sending its objects to `tx`; its `metadata.resourceVersion`.
async fn read_list(
    body: impl AsyncBufRead + Unpin,
    tx: &mpsc::Sender<kube::Result<Item>>,
) -> Result<Option<String>, Failure> {
    #[derive(serde::Deserialize)]
    struct ListMeta {
        #[serde(rename = "resourceVersion")]
        resource_version: Option<String>,
    }
    let mut body = Body { body, buf: Vec::new(), at: 0, dropped: 0, ended: false };
    body.expect(b'{', "a Kubernetes list object").await?;
    let (mut rv, mut items) = (None, false);
    if body.peek().await? == Some(b'}') {
        body.at += 1;
    } else {
        loop {
            let key: String = body.value().await?;
            body.expect(b':', "':' after a key").await?;
            match key.as_str() {
                "items" => {
                    read_items(&mut body, tx).await?;
                    items = true;
                }
                "metadata" => rv = body.value::<ListMeta>().await?.resource_version,
                _ => {
                    body.value::<IgnoredAny>().await?;
                }
            }
            if body.next_of(b'}', "',' or '}' after a value in the list object").await? {
                break;
            }
        }
    }
    if body.peek().await?.is_some() {
        return Err(body.error("trailing characters after the list object").into());
    }
    if !items {
        return Err(serde_json::Error::missing_field("items").into());
    }
    Ok(rv.filter(|rv| !rv.is_empty()))
}

/// The `items` array (or `null`, an empty list): each object sent as soon as it is read.
async fn read_items<B: AsyncBufRead + Unpin>(
    body: &mut Body<B>,
    tx: &mpsc::Sender<kube::Result<Item>>,
) -> Result<(), Failure> {
    match body.peek().await? {
        Some(b'n') => return Ok(body.value::<()>().await?),
        Some(b'[') => body.at += 1,
        Some(_) => return Err(body.error("the list's items are not an array").into()),
        None => return Err(body.error("the body ended where the list's items were expected").into()),
    }
    if body.peek().await? == Some(b']') {
        body.at += 1;
        return Ok(());
    }
    loop {
        let object: Box<RawValue> = body.value().await?;
        tx.send(Ok(Item::Object(object))).await.map_err(|_| Failure::Gone)?;
        if body.next_of(b']', "',' or ']' after an object of the items").await? {
            return Ok(());
        }
    }
}

/// A body's bytes as they arrive: those not yet read are `buf[at..]`, `dropped` before `buf`.
struct Body<B> {
    body: B,
    buf: Vec<u8>,
    at: usize,
    dropped: usize,
    ended: bool,
}

/// The bytes no number or literal goes on from: a slice cut after one holds no cut token, so
/// a value it cuts short fails as at the end of its input ([`serde_json::Error::is_eof`]).
const TOKEN_END: &[u8] = b",:[]{}\" \n\r\t";

impl<B: AsyncBufRead + Unpin> Body<B> {
    /// Reads the body's next bytes into `buf`, dropping those read; false at its end.
    async fn more(&mut self) -> Result<bool, serde_json::Error> {
        if self.ended {
            return Ok(false);
        }
        if self.at >= self.buf.len() / 2 {
            self.buf.drain(..self.at);
            self.dropped += self.at;
            self.at = 0;
        }
        let chunk = self.body.fill_buf().await.map_err(serde_json::Error::io)?;
        let n = chunk.len();
        self.buf.extend_from_slice(chunk);
        self.body.consume_unpin(n);
        self.ended = n == 0;
        Ok(!self.ended)
    }

    /// The next byte that is not white space, not read yet (`None` at the body's end).
    async fn peek(&mut self) -> Result<Option<u8>, serde_json::Error> {
        loop {
            let rest = &self.buf[self.at..];
            self.at += rest.iter().take_while(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t')).count();
            if let Some(&b) = self.buf.get(self.at) {
                return Ok(Some(b));
            }
            if !self.more().await? {
                return Ok(None);
            }
        }
    }

    /// Reads `byte`, else fails naming `what` was expected.
    async fn expect(&mut self, byte: u8, what: &str) -> Result<(), serde_json::Error> {
        match self.peek().await? {
            Some(b) if b == byte => {
                self.at += 1;
                Ok(())
            }
            Some(b) => Err(self.error(format_args!("expected {what}, found {:?}", char::from(b)))),
            None => Err(self.error(format_args!("the body ended where {what} was expected"))),
        }
    }

    /// After a value: true at `end` (read), false at a ',' (read), else fails naming `what`.
    async fn next_of(&mut self, end: u8, what: &str) -> Result<bool, serde_json::Error> {
        let at_end = self.peek().await? == Some(end);
        if !at_end {
            self.expect(b',', what).await?;
        } else {
            self.at += 1;
        }
        Ok(at_end)
    }

    /// The next value, read by serde_json once all of it has arrived. An attempt that runs
    /// into the end of the bytes at hand is made again only once they have doubled, so a large
    /// value is read a bounded number of times.
    async fn value<T: DeserializeOwned>(&mut self) -> Result<T, serde_json::Error> {
        let mut wanted = 0;
        self.peek().await?;
        loop {
            let at_hand = &self.buf[self.at..];
            if at_hand.len() >= wanted || self.ended {
                let whole = match self.ended {
                    true => at_hand.len(),
                    false => at_hand.iter().rposition(|b| TOKEN_END.contains(b)).map_or(0, |i| i + 1),
                };
                let mut values = serde_json::Deserializer::from_slice(&at_hand[..whole]).into_iter::<T>();
                match (values.next(), values.byte_offset()) {
                    (Some(Ok(value)), read) => {
                        self.at += read;
                        return Ok(value);
                    }
                    (Some(Err(e)), _) if !e.is_eof() || self.ended => {
                        return Err(self.error(format_args!("{e} of the value")))
                    }
                    (None, _) if self.ended => {
                        return Err(self.error("the body ended where a value was expected"))
                    }
                    _ => wanted = at_hand.len().saturating_mul(2).max(1),
                }
            }
            self.more().await?;
        }
    }

    /// An error of the body at the next byte not read yet.
    fn error(&self, what: impl std::fmt::Display) -> serde_json::Error {
        serde_json::Error::custom(format_args!("{what} (at byte {} of the body)", self.dropped + self.at))
    }
}

#[cfg(test)]
mod tests {
    use futures::{FutureExt as _, TryStreamExt as _};
    use serde_json::Value;

    use super::*;

    /// A body whose bytes arrive as `chunks`.
    fn body(chunks: Vec<std::io::Result<Vec<u8>>>) -> impl AsyncBufRead + Unpin {
        futures::stream::iter(chunks).into_async_read()
    }

    /// What `json` yields, its bytes arriving cut at `cuts`: each object (as a JSON value), then
    /// the end or the error.
    async fn read_cut(json: &str, cuts: &[usize]) -> Vec<Result<String, String>> {
        let mut chunks = Vec::new();
        let mut from = 0;
        for &cut in cuts.iter().chain([json.len()].iter()) {
            chunks.push(Ok(json.as_bytes()[from..cut].to_vec()));
            from = cut;
        }
        let (tx, mut rx) = mpsc::channel(1024);
        let last = match read_list(body(chunks), &tx).await {
            Ok(rv) => Ok(format!("end {rv:?}")),
            Err(Failure::Json(e)) => Err(e.to_string()),
            Err(Failure::Gone) => Err("gone".to_string()),
        };
        drop(tx);
        let mut out = Vec::new();
        while let Ok(item) = rx.try_recv() {
            out.push(match item {
                Ok(Item::Object(o)) => Ok(serde_json::from_str::<Value>(o.get()).unwrap().to_string()),
                Ok(Item::End(rv)) => Err(format!("an end sent as an object: {rv:?}")),
                Err(e) => Err(e.to_string()),
            });
        }
        out.push(last);
        out
    }

    /// What `json` yields, required to be the same however its bytes arrive: cut once at every
    /// byte, and in chunks of a few sizes.
    async fn read(json: &str) -> Vec<Result<String, String>> {
        let whole = read_cut(json, &[]).await;
        for cut in 0..=json.len() {
            assert_eq!(read_cut(json, &[cut]).await, whole, "{json} cut at {cut}");
        }
        for size in [1, 2, 3, 5, 8, 13, 64] {
            let cuts: Vec<usize> = (size..json.len()).step_by(size).collect();
            assert_eq!(read_cut(json, &cuts).await, whole, "{json} in chunks of {size}");
        }
        whole
    }

    /// `json`'s objects as a whole-body parse reads them, then `end`.
    fn objects_of(json: &str, end: &str) -> Vec<Result<String, String>> {
        let list: Value = serde_json::from_str(json).unwrap();
        let items = list["items"].as_array().cloned().unwrap_or_default();
        items.iter().map(|o| Ok(o.to_string())).chain([Ok(end.to_string())]).collect()
    }

    #[tokio::test]
    async fn objects_then_the_end_in_either_field_order() {
        // As the API server's streaming encoder writes it (metadata first), and as a Go map
        // is marshalled (sorted keys: items before metadata); numbers, literals and escapes
        // wherever a value goes, and white space between them as for curl.
        let first = r#"{"kind":"ReplicaList","apiVersion":"longhorn.io/v1beta2","metadata":{"resourceVersion":"42","remainingItemCount":-1},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b","n":[-1,-0.5E-3,1e+5,0,12,true,false,null,"}]\\\"\u00e9,"]}}]}"#;
        assert_eq!(read(first).await, objects_of(first, "end Some(\"42\")"));
        let sorted = r#"{"apiVersion":"v1","items":[{"metadata":{"name":"a"},"x":-2.25e-2}],"kind":"PodList","n":-12.5E+1,"t":true,"metadata":{"resourceVersion":"7","continue":""}}"#;
        assert_eq!(read(sorted).await, objects_of(sorted, "end Some(\"7\")"));
        let pretty = "{\n  \"items\": [\n    {\"metadata\": {\"name\": \"a\"}} ,\n {}\n  ],\n  \"n\": 12,\r\n\t\"metadata\": {}\n}\n";
        assert_eq!(read(pretty).await, objects_of(pretty, "end None"));
        assert_eq!(read(r#"{"items":null,"metadata":{}}"#).await, [Ok("end None".to_string())]);
        assert_eq!(
            read(r#"{"items":[],"metadata":{"resourceVersion":""}}"#).await,
            [Ok("end None".to_string())]
        );
    }

    #[tokio::test]
    async fn a_broken_body_ends_in_an_error_after_what_it_read() {
        let cut = r#"{"metadata":{"resourceVersion":"42"},"items":[{"metadata":{"name":"a"}},{"metad"#;
        let out = read(cut).await;
        assert_eq!(out[0], Ok(r#"{"metadata":{"name":"a"}}"#.to_string()));
        let eof = "EOF while parsing a string at line 1 column 7 of the value (at byte 72 of the body)";
        assert_eq!(out[1..], [Err(eof.to_string())]);
        for (bad, says) in [
            ("", "the body ended where a Kubernetes list object was expected (at byte 0 of the body)"),
            ("[]", "expected a Kubernetes list object, found '[' (at byte 0 of the body)"),
            (r#"{"metadata":{}}"#, "missing field `items`"),
            (r#"{"items":{}}"#, "the list's items are not an array (at byte 9 of the body)"),
            (r#"{"items":"#, "the body ended where the list's items were expected (at byte 9 of the body)"),
            (r#"{"items":[]} trailing"#, "trailing characters after the list object (at byte 13 of the body)"),
            (r#"{"items":[{}"#, "the body ended where ',' or ']' after an object of the items was expected (at byte 12 of the body)"),
            (r#"{"items":[{}] "n": 1}"#, "expected ',' or '}' after a value in the list object, found '\"' (at byte 14 of the body)"),
            (r#"{"items":[],"n":-12"#, "the body ended where ',' or '}' after a value in the list object was expected (at byte 19 of the body)"),
            (r#"{"items":[],"n":1x}"#, "trailing characters at line 1 column 2 of the value (at byte 16 of the body)"),
            (r#"{"items":[{"a":1.}]}"#, "invalid number at line 1 column 8 of the value (at byte 10 of the body)"),
            (r#"{7:1,"items":[]}"#, "invalid type: integer `7`, expected a string at line 1 column 1 of the value (at byte 1 of the body)"),
            (r#"{"items"[]}"#, "expected ':' after a key, found '[' (at byte 8 of the body)"),
        ] {
            let out = read(bad).await;
            assert_eq!(out.last(), Some(&Err(says.to_string())), "{bad}: {out:?}");
        }
    }

    #[tokio::test]
    async fn a_body_that_fails_to_arrive_ends_in_its_error() {
        let broken = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset");
        let (tx, _rx) = mpsc::channel(8);
        let read = read_list(body(vec![Ok(br#"{"items":[{}"#.to_vec()), Err(broken)]), &tx).await;
        assert!(matches!(read, Err(Failure::Json(e)) if e.to_string() == "connection reset"));
    }

    #[tokio::test]
    async fn the_receiver_going_ends_the_reading() {
        // Before its list object's first byte, as a silent connection.
        let (tx, rx) = mpsc::channel(1);
        let silent = futures::stream::pending::<std::io::Result<Vec<u8>>>().into_async_read();
        let read = async {
            read_list(silent, &tx).await.map(|_| None).map_err(|_| kube::Error::Service("never".into()))
        };
        let mut finished = Box::pin(finish(read, &tx));
        assert!((&mut finished).now_or_never().is_none(), "no byte has come");
        drop(rx);
        assert!(finished.now_or_never().is_some(), "ends once the receiver is gone");
        // Between objects: the next one is not sent.
        let (tx, rx) = mpsc::channel(1);
        drop(rx);
        let read = read_list(body(vec![Ok(br#"{"items":[{},{}]}"#.to_vec())]), &tx).await;
        assert!(matches!(read, Err(Failure::Gone)));
    }
}
