//! A shutdown loses no review written on a kept-alive connection, against a client with Go's
//! pooling behaviour (`net/http`'s Transport, which the API server calls webhooks with), over
//! real TLS to the `serve` process on 127.0.0.1 (docs/server.md, "Shutdown").

use crate::support;

use std::sync::Arc;

use support::serve::ServeChild;
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// One kept-alive connection as Go's Transport keeps it in its pool: the next POST goes out on
/// it without looking whether the server closed it meanwhile (the close may still be in flight),
/// and a POST that gets no answer is not sent again (Go retries only idempotent requests;
/// kubernetes#127335).
struct Pooled {
    tls: TlsStream<TcpStream>,
}

/// What came back for one POST.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// The answer says `Connection: close`.
    close: bool,
    body: String,
}

impl Pooled {
    /// Dials `addr` and has one review answered, leaving the connection idle in the "pool".
    async fn dial(addr: std::net::SocketAddr, client: &Arc<rustls::ClientConfig>, body: &[u8]) -> Self {
        let mut c = Self { tls: connect(addr, client).await.unwrap() };
        let a = c.post(body).await.unwrap();
        assert!(a.status == 200 && !a.close, "{a:?}");
        c
    }

    /// Writes a POST of `body` to `/validate` and reads its answer.
    async fn post(&mut self, body: &[u8]) -> Result<Answer, String> {
        let mut req = format!(
            "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        self.tls.write_all(&req).await.map_err(|e| format!("write: {e}"))?;
        self.tls.flush().await.map_err(|e| format!("write: {e}"))?;
        let mut buf = Vec::new();
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let header = |name: &str| {
                    head.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
                };
                let len: usize = header("content-length:").and_then(|v| v.parse().ok()).unwrap_or(0);
                if buf.len() >= end + 4 + len {
                    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
                    let close = header("connection:").is_some_and(|v| v == "close");
                    let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
                    return Ok(Answer { status, close, body });
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.tls.read(&mut chunk).await {
                Ok(0) => {
                    return Err(format!(
                        "the server closed the connection ({} bytes of an answer)",
                        buf.len()
                    ))
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("read: {e} ({} bytes of an answer)", buf.len())),
            }
        }
    }

    /// Resolves once something arrives from the server unasked (its TLS close_notify, or its FIN),
    /// which is left unread.
    async fn server_closing(&self) {
        let _ = self.tls.get_ref().0.peek(&mut [0u8; 1]).await;
    }

    /// True once the server closed the connection (end of stream, nothing more sent).
    async fn closed(&mut self) -> bool {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(WAIT, self.tls.read_to_end(&mut rest)).await;
        rest.is_empty() && read.is_ok()
    }
}

/// The race of kubernetes#127335 as it happens when a guard replica stops: the API server keeps
/// idle kept-alive connections to the replica (for 90 s), and writes its next review on one of
/// them just as the server closes it. The review must be answered (with `Connection: close`),
/// not lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_written_on_a_pooled_connection_when_the_listener_closes_is_answered() {
    let mut s = ServeChild::start(&["--shutdown-delay", "0s"]).await;
    let body = fixture("eviction-create.json");
    let uid = uid_of(&body);
    let mut pool = Vec::new();
    for _ in 0..8 {
        pool.push(Pooled::dial(s.addr, &s.client, &body).await);
    }

    s.terminate();
    s.logged("termination signal received").await;
    // Once the listener closes, either the server closes the idle connections (each close is on
    // its way to the client), or it says that it leaves them to their clients. Only then the
    // client writes: the moment of the race, made certain.
    let server_closed = futures::future::join_all(pool.iter().map(Pooled::server_closing));
    let waits = s.logged(
        "no longer accepting; each connection closes after its next answer or when its client closes it",
    );
    let seen = tokio::time::timeout(WAIT, async {
        tokio::select! {
            _ = server_closed => "the server closed every idle connection",
            _ = waits => "the server leaves the idle connections to their clients",
        }
    })
    .await
    .expect("the server neither closed the idle connections nor said it leaves them to their clients");

    let mut lost = Vec::new();
    for (i, c) in pool.iter_mut().enumerate() {
        match c.post(&body).await {
            Ok(a) if a.status == 200 && a.body.contains(&uid) && a.close => {
                assert!(c.closed().await, "connection {i}: left open after an answer with Connection: close");
            }
            Ok(a) => lost.push(format!("connection {i}: {a:?}")),
            Err(e) => lost.push(format!("connection {i}: {e}")),
        }
    }
    assert!(
        lost.is_empty(),
        "{} of {} reviews written on a pooled connection ({seen}) got no answer with Connection: close:\n{}",
        lost.len(),
        pool.len(),
        lost.join("\n")
    );
    assert_eq!(s.exit_code().await, Some(0));
}

/// An idle kept-alive connection is left open for its client to close (the API server does at
/// 90 s idle), and once the client has closed it the server stops, without waiting out
/// `--shutdown-idle-wait` (95 s, past the wait's safety net).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_its_client_closes_ends_the_shutdown() {
    let s = TestServer::start(test_limits()).await;
    assert!(s.handle.is_accepting());
    let tls = connect(s.addr, &s.client).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await.unwrap();
    let conn = tokio::spawn(conn);
    assert_eq!(send(&mut sender, "GET", "/healthz", vec![]).await.unwrap().status, 200);

    s.handle.shutdown();
    until("the listener closes", || !s.handle.is_accepting()).await;
    assert!(!conn.is_finished(), "the server closed an idle connection its client may be writing on");
    drop(sender); // the client's idle timeout: it closes the connection
    conn.await.unwrap().unwrap();
    let stopped = tokio::time::timeout(WAIT, s.handle.stopped()).await;
    assert_eq!(stopped, Ok(true), "the server waited for a connection its client had closed");
}
