//! The one list of the requests the rules handle. Each request's objects are converted here,
//! once, into its kind's type, so no rule reads raw JSON and every handled kind answers an
//! object it cannot read the same way: a [`RuleError`], which the edge denies with 400.

use std::time::SystemTime;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::{drain, object, old_object, replicas, settings, typed, Policy, RuleError};
use crate::admission::{AdmissionRequest, Operation};
use crate::cluster::{
    ClusterView, InstanceManager, Meta, Node, Pod, PodDisruptionBudget, Setting, StorageClass, Volume,
};
use crate::decision::Decision;

/// `policy/v1` Eviction: the rule reads the pod's name from the request, so only its
/// metadata is modelled (every other field is ignored, as in the view's types).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Eviction {
    pub metadata: Meta,
}

/// A request a rule handles, with its objects in their kinds' types.
#[derive(Debug)]
pub enum Handled {
    /// `pods/eviction` CREATE.
    Eviction(Eviction),
    /// Core `pods` DELETE: the pod is in `oldObject` (whatever `options` say: a dry run,
    /// `gracePeriodSeconds: 0`).
    PodDelete { old: Pod },
    /// `instancemanagers.longhorn.io` DELETE: the instance manager is in `oldObject`.
    InstanceManagerDelete { old: InstanceManager },
    /// `poddisruptionbudgets.policy` DELETE: the budget is in `oldObject`.
    BudgetDelete { old: PodDisruptionBudget },
    /// Core `nodes` DELETE: the node is in `oldObject`.
    NodeDelete { old: Node },
    /// Core `nodes` UPDATE.
    NodeUpdate { new: Node, old: Node },
    /// `settings.longhorn.io` CREATE/UPDATE (`old`: an UPDATE's old object, when sent).
    Setting { new: Setting, old: Option<Setting> },
    /// `volumes.longhorn.io` CREATE/UPDATE.
    Volume { new: Volume, old: Option<Volume> },
    /// `storageclasses.storage.k8s.io` CREATE (their parameters are immutable).
    StorageClass(StorageClass),
}

impl Handled {
    /// The handled request `req` is, its objects converted; `Ok(None)` for a request no rule
    /// handles (its objects are not read).
    pub fn of(req: &AdmissionRequest) -> Result<Option<Self>, RuleError> {
        use Operation::{Create, Delete, Update};
        fn new<T: DeserializeOwned>(req: &AdmissionRequest) -> Result<T, RuleError> {
            typed("object", object(req)?)
        }
        fn old<T: DeserializeOwned>(req: &AdmissionRequest) -> Result<T, RuleError> {
            typed("oldObject", old_object(req)?)
        }
        // An UPDATE's old object when it is sent; a CREATE has none.
        fn old_if_sent<T: DeserializeOwned>(req: &AdmissionRequest) -> Result<Option<T>, RuleError> {
            match old_object(req) {
                _ if req.operation != Update => Ok(None),
                Err(RuleError::Missing { .. }) => Ok(None),
                Err(e) => Err(e),
                Ok(v) => typed("oldObject", v).map(Some),
            }
        }
        let res = &req.resource;
        Ok(Some(match (res.group.as_str(), res.resource.as_str(), req.sub_resource(), req.operation) {
            ("", "pods", "eviction", Create) => Self::Eviction(new(req)?),
            ("", "pods", "", Delete) => Self::PodDelete { old: old(req)? },
            ("longhorn.io", "instancemanagers", "", Delete) => Self::InstanceManagerDelete { old: old(req)? },
            ("policy", "poddisruptionbudgets", "", Delete) => Self::BudgetDelete { old: old(req)? },
            ("", "nodes", "", Delete) => Self::NodeDelete { old: old(req)? },
            ("", "nodes", "", Update) => Self::NodeUpdate { new: new(req)?, old: old(req)? },
            ("longhorn.io", "settings", "", Create | Update) => {
                Self::Setting { new: new(req)?, old: old_if_sent(req)? }
            }
            ("longhorn.io", "volumes", "", Create | Update) => {
                Self::Volume { new: new(req)?, old: old_if_sent(req)? }
            }
            ("storage.k8s.io", "storageclasses", "", Create) => Self::StorageClass(new(req)?),
            _ => return Ok(None),
        }))
    }

    /// The decision of the rule that owns the request.
    pub fn decide(
        &self,
        req: &AdmissionRequest,
        view: &ClusterView,
        policy: &Policy,
        now: SystemTime,
    ) -> Result<Decision, RuleError> {
        match self {
            Self::Eviction(_) => drain::eviction(req, view, policy, now),
            Self::PodDelete { old } => drain::pod_delete(req, old, view, policy, now),
            Self::InstanceManagerDelete { old } => {
                drain::instance_manager_delete(req, old, view, policy, now)
            }
            Self::BudgetDelete { old } => drain::budget_delete(req, old, view, policy, now),
            Self::NodeDelete { old } => drain::node_delete(req, old, view, policy, now),
            Self::NodeUpdate { new, old } => Ok(drain::node_update(req, new, old, view, policy, now)),
            Self::Setting { new, old } => Ok(settings::setting(req, new, old.as_ref(), policy)),
            Self::Volume { new, old } => Ok(replicas::volume(req, new, old.as_ref(), view, policy)),
            Self::StorageClass(sc) => Ok(replicas::storage_class(req, sc, view, policy)),
        }
    }
}
