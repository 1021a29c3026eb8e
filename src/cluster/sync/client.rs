//! API clients that count every request they send (`longhorn_guard_api_requests_total`), and
//! that can renew their connections while the view cannot be proven ([`build_renewing`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::stats;

/// The longest a one-shot read (`check drain`, a page of `check cluster`) may take: the client
/// sets no read timeout, since its watches are quiet for minutes, and a stalled API server must
/// not hang a command or freeze `/metrics`.
pub const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A client for `config` whose requests (watches, lists, gets, ...) are counted by kind and verb.
pub fn build(config: kube::Config) -> Result<kube::Client, kube::Error> {
    build_renewing(config, Arc::new(|| false))
}

/// Says whether the client should renew its connections now (the view is unproven).
pub type Renew = Arc<dyn Fn() -> bool + Send + Sync>;

/// [`Renew`] while `view` is unproven under `max_age` ([`super::ClusterView::unproven`]; the
/// age counts when `by_age`, as when probes run).
pub fn renew_while_unproven(view: super::SharedView, max_age: std::time::Duration, by_age: bool) -> Renew {
    Arc::new(move || view.read().unproven(std::time::SystemTime::now(), max_age, by_age).is_some())
}

/// [`build`], sending each request with `Connection: close` while `renew()` is true: the
/// connection ends with its answer and the next request opens a new one. A Service in front of
/// several API servers (`kubernetes.default.svc`) may then land the watches and probes on another
/// one than the API server whose watches went silent (its etcd member cut off from its peers),
/// where a kept-alive connection would stay with it for good. HTTP/1.1 only, as kube's client is.
pub fn build_renewing(config: kube::Config, renew: Renew) -> Result<kube::Client, kube::Error> {
    let builder = kube::client::ClientBuilder::try_from(config)?;
    let renewing = Arc::new(AtomicBool::new(false));
    let mark = move |mut req: http::Request<kube::client::Body>| {
        let now = renew();
        if renewing.swap(now, Ordering::Relaxed) != now {
            if now {
                tracing::info!("cluster view unproven: each API request now opens a new connection");
            } else {
                tracing::info!("cluster view proven again: API connections are kept alive again");
            }
        }
        if now {
            req.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
        }
        stats::global().api_request(req.method().as_str(), req.uri().path(), req.uri().query().unwrap_or(""));
        req
    };
    Ok(builder.with_layer(&tower::util::MapRequestLayer::new(mark)).build())
}

/// [`build`] with the configuration [`infer`] gives.
pub async fn try_default() -> Result<kube::Client, kube::Error> {
    build(infer().await?)
}

/// The configuration `kube::Client::try_default` would use (KUBECONFIG, else in-cluster).
pub async fn infer() -> Result<kube::Config, kube::Error> {
    kube::Config::infer().await.map_err(kube::Error::InferConfig)
}
