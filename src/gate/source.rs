//! Where the gate reads its pod's annotations: the API server (its own pod, with the pod's
//! service account) or the downward-API annotations file. The only I/O of the gate besides
//! `/sys/class/net`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::kubelet_file::parse_kubelet_map;
use crate::clip::one_line;

/// Reads one pod's annotations from the API server.
#[derive(Clone)]
pub struct ApiSource {
    pods: Api<Pod>,
    namespace: String,
    name: String,
    request_timeout: Duration,
}

impl ApiSource {
    /// In-cluster: `KUBERNETES_SERVICE_HOST`/`_PORT` and the service-account token and CA under
    /// `/var/run/secrets/kubernetes.io/serviceaccount`.
    pub fn in_cluster(namespace: &str, name: &str) -> Result<Self, String> {
        let config = kube::Config::incluster().map_err(|e| format!("no in-cluster API config: {e}"))?;
        Self::from_config(config, namespace, name)
    }

    /// From an explicit configuration (cluster URL, root certificate, token).
    pub fn from_config(mut config: kube::Config, namespace: &str, name: &str) -> Result<Self, String> {
        // The gate polls on its own; bounded requests keep each poll short.
        config.connect_timeout = Some(Duration::from_secs(3));
        config.read_timeout = Some(Duration::from_secs(5));
        config.default_retry = false;
        let client =
            kube::Client::try_from(config).map_err(|e| format!("cannot build the API client: {e}"))?;
        Ok(Self {
            pods: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
            request_timeout: Duration::from_secs(5),
        })
    }

    /// The pod's annotations, or a one-line reason.
    pub async fn annotations(&self) -> Result<BTreeMap<String, String>, String> {
        let what = format!("GET pod {}/{}", self.namespace, self.name);
        match tokio::time::timeout(self.request_timeout, self.pods.get(&self.name)).await {
            Ok(Ok(pod)) => Ok(pod.metadata.annotations.unwrap_or_default()),
            Ok(Err(e)) => {
                Err(format!("{what} failed: {}", crate::decision::clip(&one_line(&e.to_string()), 200)))
            }
            Err(_) => Err(format!("{what} did not answer within {}s", self.request_timeout.as_secs())),
        }
    }
}

/// Reads the downward-API annotations file (kubelet format).
pub async fn file_annotations(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text =
        tokio::fs::read_to_string(path).await.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_kubelet_map(&text)
        .map_err(|e| format!("{} is not in the kubelet's key=\"value\" format: {e}", path.display()))
}
