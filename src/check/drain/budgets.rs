//! PodDisruptionBudgets as the eviction API applies them to a node's pods (the API server's
//! `pods/eviction`: a pod it may ignore budgets for goes; an unready pod goes when the budget's
//! `unhealthyPodEvictionPolicy` lets it; a pod under two budgets is refused; otherwise
//! `disruptionsAllowed` 0 answers 429).

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::pods::PodFacts;
use super::selector;

/// What the doctor reads of one budget.
#[derive(Clone, Debug)]
pub struct Budget {
    pub namespace: String,
    pub name: String,
    pub pdb: PodDisruptionBudget,
}

/// A budget's status counts (0 where the disruption controller has not written them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub disruptions_allowed: i32,
    pub current_healthy: i32,
    pub desired_healthy: i32,
    pub expected_pods: i32,
}

impl Budget {
    /// Reads a `policy/v1 PodDisruptionBudget`.
    pub fn from_value(v: &Value) -> Result<Self, String> {
        let pdb: PodDisruptionBudget = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
        Ok(Self {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            name: pdb.metadata.name.clone().unwrap_or_default(),
            pdb,
        })
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// True when it selects `pod` (same namespace, selector matches).
    pub fn covers(&self, pod: &PodFacts) -> bool {
        pod.namespace == self.namespace
            && selector::matches(self.pdb.spec.as_ref().and_then(|s| s.selector.as_ref()), &pod.labels)
    }

    pub fn selector_text(&self) -> String {
        selector::text(self.pdb.spec.as_ref().and_then(|s| s.selector.as_ref()))
    }

    pub fn counts(&self) -> Counts {
        let s = self.pdb.status.as_ref();
        Counts {
            disruptions_allowed: s.map_or(0, |s| s.disruptions_allowed),
            current_healthy: s.map_or(0, |s| s.current_healthy),
            desired_healthy: s.map_or(0, |s| s.desired_healthy),
            expected_pods: s.map_or(0, |s| s.expected_pods),
        }
    }

    /// The disruption controller has not (yet) computed this generation: the eviction API
    /// then refuses every eviction it covers.
    pub fn unobserved(&self) -> bool {
        let observed = self.pdb.status.as_ref().and_then(|s| s.observed_generation);
        observed.is_none_or(|o| self.pdb.metadata.generation.is_some_and(|g| o < g))
    }

    /// `minAvailable N` / `maxUnavailable N` as the spec gives it.
    pub fn spec_text(&self) -> String {
        let spec = self.pdb.spec.as_ref();
        let v = |x: &IntOrString| match x {
            IntOrString::Int(i) => i.to_string(),
            IntOrString::String(s) => s.clone(),
        };
        match (spec.and_then(|s| s.min_available.as_ref()), spec.and_then(|s| s.max_unavailable.as_ref())) {
            (Some(m), _) => format!("minAvailable {}", v(m)),
            (None, Some(m)) => format!("maxUnavailable {}", v(m)),
            (None, None) => "no minAvailable or maxUnavailable".into(),
        }
    }

    /// Would an eviction of `pod` (which it covers, alone) be refused now?
    pub fn refuses(&self, pod: &PodFacts) -> bool {
        if pod.ignores_budgets() {
            return false;
        }
        let c = self.counts();
        if !pod.ready {
            let policy = self.pdb.spec.as_ref().and_then(|s| s.unhealthy_pod_eviction_policy.as_deref());
            let healthy_enough = c.current_healthy >= c.desired_healthy && !self.unobserved();
            if policy == Some("AlwaysAllow") || healthy_enough {
                return false;
            }
        }
        self.unobserved() || c.disruptions_allowed <= 0
    }
}
