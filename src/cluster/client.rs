//! API clients that count every request they send (`longhorn_guard_api_requests_total`).

use super::stats;

/// The longest a one-shot read (`check drain`, a page of `check cluster`) may take: the client
/// sets no read timeout, since its watches are quiet for minutes, and a stalled API server must
/// not hang a command or freeze `/metrics`.
pub const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A client for `config` whose requests (watches, lists, gets, ...) are counted by kind and verb.
pub fn build(config: kube::Config) -> Result<kube::Client, kube::Error> {
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(builder.with_layer(&tower::util::MapRequestLayer::new(count)).build())
}

/// [`build`] with the configuration `kube::Client::try_default` would use (KUBECONFIG, else
/// in-cluster).
pub async fn try_default() -> Result<kube::Client, kube::Error> {
    let config = kube::Config::infer().await.map_err(kube::Error::InferConfig)?;
    build(config)
}

fn count(req: http::Request<kube::client::Body>) -> http::Request<kube::client::Body> {
    stats::global().api_request(req.method().as_str(), req.uri().path(), req.uri().query().unwrap_or(""));
    req
}
