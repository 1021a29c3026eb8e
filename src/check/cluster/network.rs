//! What the `storage-network` check reads besides settings: the images of the DaemonSets that
//! run Multus or longhorn-manager (any namespace), and the Multus annotations of the
//! instance-manager pods. Only that much is kept of either kind.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::cluster::{COMPONENT_LABEL, INSTANCE_MANAGER_COMPONENT, LONGHORN_NAMESPACE};
use crate::gate::networks::NETWORKS_ANNOTATION;
use crate::gate::status::{LEGACY_NETWORK_STATUS_ANNOTATION, NETWORK_STATUS_ANNOTATION};

/// What kind of component a DaemonSet runs, by its name and container images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    Multus,
    LonghornManager,
}

/// A DaemonSet running Multus or longhorn-manager: where it is and the image it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonSetImage {
    pub namespace: String,
    pub name: String,
    pub component: Component,
    /// The image of the container that runs the component.
    pub image: String,
}

/// An instance-manager pod: its node, phase and the Multus annotations (request and status).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImPod {
    pub name: String,
    pub node: String,
    pub phase: String,
    pub terminating: bool,
    /// Only the `networks`, `network-status` and `networks-status` annotations.
    pub annotations: BTreeMap<String, String>,
}

/// What the storage-network check has read.
#[derive(Clone, Debug, Default)]
pub struct NetworkInventory {
    pub daemonsets: Vec<DaemonSetImage>,
    /// DaemonSets were read (a snapshot that holds some, or a live LIST that answered).
    pub daemonsets_read: bool,
    /// How many DaemonSets were read (of any kind).
    pub daemonsets_seen: usize,
    /// Collections of DaemonSets that could not be read (live: `path: reason`).
    pub daemonsets_unread: Vec<String>,
    /// Namespaces whose DaemonSets were read one by one after a cluster-wide LIST was refused.
    pub daemonsets_namespaces: Vec<String>,
    pub im_pods: Vec<ImPod>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Meta {
    name: String,
    namespace: String,
    #[serde(deserialize_with = "crate::cluster::meta::null_as_empty")]
    labels: BTreeMap<String, String>,
    #[serde(deserialize_with = "crate::cluster::meta::null_as_empty")]
    annotations: BTreeMap<String, String>,
    #[serde(rename = "deletionTimestamp")]
    deletion_timestamp: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Container {
    name: String,
    image: String,
}

/// The last path element of an image's repository: `longhorn-manager` of
/// `registry.example/longhornio/longhorn-manager:v1.9.1@sha256:...`.
fn repository_tail(image: &str) -> &str {
    let no_digest = image.split('@').next().unwrap_or(image);
    let tail = no_digest.rsplit('/').next().unwrap_or(no_digest);
    tail.split(':').next().unwrap_or(tail)
}

impl NetworkInventory {
    /// Reads one `apps/v1` DaemonSet: kept when a container image (or, for Multus, the
    /// DaemonSet's name) says it runs Multus or longhorn-manager.
    pub fn add_daemonset(&mut self, item: &Value) -> Result<(), serde_json::Error> {
        self.daemonsets_read = true;
        self.daemonsets_seen += 1;
        let meta =
            Option::<Meta>::deserialize(item.get("metadata").unwrap_or(&Value::Null))?.unwrap_or_default();
        let containers = Option::<Vec<Container>>::deserialize(
            item.pointer("/spec/template/spec/containers").unwrap_or(&Value::Null),
        )?
        .unwrap_or_default();
        let by_image = |c: &Container| {
            let tail = repository_tail(&c.image);
            if tail.contains("multus") {
                Some(Component::Multus)
            } else if tail.ends_with("longhorn-manager") {
                Some(Component::LonghornManager)
            } else {
                None
            }
        };
        let found = containers.iter().find_map(|c| by_image(c).map(|k| (k, c.image.clone()))).or_else(|| {
            // A Multus build without `multus` in its image name (OpenShift's) still names its
            // DaemonSet and container so.
            meta.name
                .contains("multus")
                .then(|| containers.iter().find(|c| c.name.contains("multus")).or(containers.first()))
                .flatten()
                .map(|c| (Component::Multus, c.image.clone()))
        });
        if let Some((component, image)) = found {
            self.daemonsets.push(DaemonSetImage {
                namespace: meta.namespace,
                name: meta.name,
                component,
                image,
            });
        }
        Ok(())
    }

    /// Reads one core Pod: kept when it is an instance-manager pod in `longhorn-system`.
    pub fn add_pod(&mut self, item: &Value) -> Result<(), serde_json::Error> {
        let meta =
            Option::<Meta>::deserialize(item.get("metadata").unwrap_or(&Value::Null))?.unwrap_or_default();
        let is_im = meta.namespace == LONGHORN_NAMESPACE
            && meta.labels.get(COMPONENT_LABEL).map(String::as_str) == Some(INSTANCE_MANAGER_COMPONENT);
        if !is_im {
            return Ok(());
        }
        let text = |p: &str| item.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
        let kept = [NETWORKS_ANNOTATION, NETWORK_STATUS_ANNOTATION, LEGACY_NETWORK_STATUS_ANNOTATION];
        let annotations = meta.annotations.into_iter().filter(|(k, _)| kept.contains(&k.as_str())).collect();
        self.im_pods.push(ImPod {
            name: meta.name,
            node: text("/spec/nodeName"),
            phase: text("/status/phase"),
            terminating: meta.deletion_timestamp.is_some_and(|t| !t.is_null()),
            annotations,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_repository_tails() {
        assert_eq!(repository_tail("longhornio/longhorn-manager:v1.9.1"), "longhorn-manager");
        assert_eq!(
            repository_tail(
                "registry.suse.com/rancher/mirrored-longhornio-longhorn-manager:v1.5.1@sha256:ab"
            ),
            "mirrored-longhornio-longhorn-manager"
        );
        assert_eq!(repository_tail("localhost:5000/multus-cni:v4.0.2-thick"), "multus-cni");
        assert_eq!(repository_tail("multus"), "multus");
    }
}
