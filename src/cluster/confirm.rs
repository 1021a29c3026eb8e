//! Confirming drain-relevant state with consistent reads from the API server, for allows
//! that would otherwise rest on watch data older than `drain.maxViewAge`.

use crate::admit::Confirmer;

/// A [`Confirmer`] that reads from the API server through `client`.
pub fn confirmer(_client: kube::Client) -> Confirmer {
    std::sync::Arc::new(|node: String| {
        Box::pin(async move { Err(format!("confirmation reads for {node} are not built yet")) })
    })
}
