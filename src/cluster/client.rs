//! API clients that count every request they send (`longhorn_guard_api_requests_total`).

use super::stats;

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
