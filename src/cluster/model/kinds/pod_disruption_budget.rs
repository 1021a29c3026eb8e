//! `policy/v1` PodDisruptionBudget in `longhorn-system` (a snapshot may hold them of every
//! namespace): Longhorn's instance-manager budgets, which the drain doctor weighs (`check
//! drain`). No drain decision reads them, so a confirmation skips the kind.

use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};

use super::super::meta::Meta;
use super::super::objects::LONGHORN_NAMESPACE;
use super::super::resource::{ConfirmRead, Resource};
use super::{Kind, Listed};

/// `policy/v1` PodDisruptionBudget: its selector and policy, and the counts the disruption
/// controller writes. A spec or status that does not parse is kept as absent: the doctor reads
/// budgets itself and names an unreadable one, so it never fails a list or a snapshot.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodDisruptionBudget {
    pub metadata: Meta,
    #[serde(deserialize_with = "lenient")]
    pub spec: Option<PodDisruptionBudgetSpec>,
    #[serde(deserialize_with = "lenient")]
    pub status: Option<PodDisruptionBudgetStatus>,
}

fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    Ok(serde_json::from_value(serde_json::Value::deserialize(d)?).ok())
}

impl Kind for PodDisruptionBudget {
    const RESOURCE: Resource = Resource {
        kind: Self::KIND,
        group: "policy",
        version: "v1",
        type_name: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        display: "poddisruptionbudgets.policy",
        namespace: Some(LONGHORN_NAMESPACE),
        confirm: ConfirmRead::Skip,
    };
    const BY_NAMESPACE: bool = true;
}
