//! What the init gate reads of a pod, typed. The request's object is converted once, at
//! dispatch ([`super::mutate`]), as the validating rules' objects are (`policy::Handled`); every
//! other field is ignored.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::admission::AdmissionRequest;
use crate::policy::{object, typed, RuleError};

/// A pod as the init gate reads it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Pod {
    pub metadata: PodMeta,
    /// `None`: the pod has no spec, so there is no list to append the gate to.
    pub spec: Option<PodSpec>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodMeta {
    pub namespace: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSpec {
    /// `None`: no list yet (the patch adds one).
    pub init_containers: Option<Vec<Container>>,
    pub containers: Vec<Container>,
    pub ephemeral_containers: Vec<Container>,
    /// `None`: no list yet (the patch adds one).
    pub volumes: Option<Vec<PodVolume>>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Container {
    pub name: String,
    pub volume_mounts: Vec<VolumeMount>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct VolumeMount {
    pub name: String,
    pub mount_path: String,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct PodVolume {
    pub name: String,
    /// As sent: compared whole with the gate's own volume.
    #[serde(rename = "downwardAPI")]
    pub downward_api: Option<Value>,
}

impl Pod {
    /// The request's `object` as a pod: [`RuleError::Missing`] when there is none,
    /// [`RuleError::Malformed`] naming what is wrong when it cannot be read as one.
    pub fn of(req: &AdmissionRequest) -> Result<Self, RuleError> {
        typed("object", object(req)?)
    }
}

/// Whether `list` has a container named `name`.
pub fn has_container(list: &[Container], name: &str) -> bool {
    list.iter().any(|c| c.name == name)
}
