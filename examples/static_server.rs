//! The baseline of `make bench-https`: an HTTPS server on the same rustls / tokio-rustls /
//! hyper HTTP/1.1 stack and TLS configuration as `longhorn-guard serve`, answering every
//! request (after reading its body) with one fixed AdmissionReview: an allow, or the contents
//! of `--answer FILE` (bench-https passes longhorn-guard's own denial, so both servers send the
//! same bytes). With `--parse` it first parses each body as longhorn-guard does and answers an
//! allow for its uid (or the `--answer` bytes): the floor of any webhook that reads its request.
//!
//! ```text
//! cargo run --release --example static_server -- --tls-dir certs/dev --listen 127.0.0.1:18444
//! cargo run --release --example static_server -- --tls-dir certs/dev --answer /tmp/denial.json
//! ```
//!
//! Prints `listening on ADDR` once bound; stops on SIGTERM or Ctrl-C. Exit status: 0 after a
//! signal, 1 when it cannot start.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use longhorn_guard::tls::{provider, server_config, ReloadingCert, TlsFiles};
use tokio::net::TcpListener;

/// The answer to every request: an allow for the uid of the shared eviction fixture.
const ANSWER: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"1f682fde-188d-4d35-a16d-fdf844d8208c","allowed":true}}"#;

#[derive(Parser)]
#[command(about = "Static-answer HTTPS AdmissionReview server (bench-https baseline)")]
struct Args {
    /// Directory holding tls.crt and tls.key (as written by `longhorn-guard certs`).
    #[arg(long, value_name = "DIR")]
    tls_dir: PathBuf,
    #[arg(long, default_value = "127.0.0.1:18444")]
    listen: SocketAddr,
    /// Answer with this file's bytes instead of the built-in allow.
    #[arg(long, value_name = "FILE")]
    answer: Option<PathBuf>,
    /// Parse each body as longhorn-guard does, then answer an allow for its uid (or, with
    /// --answer, that file's bytes): the least any webhook that reads its request does.
    #[arg(long)]
    parse: bool,
}

/// What a request is answered with, once its body is read.
#[derive(Clone, Copy)]
enum Reply {
    /// The fixed bytes.
    Fixed,
    /// The fixed bytes, once the body parses (400 when it does not).
    ParsedFixed,
    /// An allow for the parsed request's uid (400 when the body does not parse).
    ParsedAllow,
}

async fn answer(
    req: hyper::Request<Incoming>,
    body: Bytes,
    reply: Reply,
) -> Result<hyper::Response<Full<Bytes>>, hyper::Error> {
    // Read the whole body, as the real server does before deciding.
    let read = req.into_body().collect().await?.to_bytes();
    let parsed = match reply {
        Reply::Fixed => None,
        Reply::ParsedFixed | Reply::ParsedAllow => Some(longhorn_guard::admission::parse_review(&read)),
    };
    let body = match parsed {
        // As longhorn-guard answers a body it cannot read (and wrk counts it as non-2xx).
        Some(Err(e)) => {
            let mut resp = hyper::Response::new(Full::new(Bytes::from(e.to_string())));
            *resp.status_mut() = hyper::StatusCode::BAD_REQUEST;
            return Ok(resp);
        }
        Some(Ok(request)) if matches!(reply, Reply::ParsedAllow) => {
            let allow = longhorn_guard::decision::Decision::allow();
            Bytes::from(longhorn_guard::admission::response_review(&request.uid, &allow).to_bytes())
        }
        _ => body,
    };
    let mut resp = hyper::Response::new(Full::new(body));
    resp.headers_mut()
        .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    Ok(resp)
}

async fn serve(args: Args) -> Result<(), String> {
    let body = match &args.answer {
        Some(path) => Bytes::from(std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?),
        None => Bytes::from_static(ANSWER.as_bytes()),
    };
    let cert = ReloadingCert::load(TlsFiles::in_dir(&args.tls_dir), provider()).map_err(|e| e.to_string())?;
    let config = server_config(Arc::new(cert)).map_err(|e| e.to_string())?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind(args.listen).await.map_err(|e| format!("bind {}: {e}", args.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let reply = match (args.parse, args.answer.is_some()) {
        (false, _) => Reply::Fixed,
        (true, true) => Reply::ParsedFixed,
        (true, false) => Reply::ParsedAllow,
    };
    println!("listening on {addr}");
    loop {
        let (tcp, _) = tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = terminated() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(_) => continue,
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let body = body.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).keep_alive(true);
            let service = hyper::service::service_fn(move |req| answer(req, body.clone(), reply));
            let _ = builder.serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

#[cfg(unix)]
async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            term.recv().await;
        }
        Err(_) => std::future::pending::<()>().await,
    }
}

#[cfg(not(unix))]
async fn terminated() {
    std::future::pending::<()>().await
}

#[tokio::main]
async fn main() -> ExitCode {
    match serve(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("static_server: {e}");
            ExitCode::from(1)
        }
    }
}
