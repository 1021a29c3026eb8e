//! The drain doctor: beside longhorn-guard's own verdicts, everything else that keeps
//! `kubectl drain NODE` from finishing, each with its remedy. Pure: the cluster view, the
//! guard's [`NodeAnalysis`], the node's pods and the cluster's disruption budgets
//! ([`Scene`]) and `now` in, [`Diagnosis`] out. Its stable ids are listed in docs/drain.md.

pub mod budgets;
pub mod live;
pub mod longhorn;
pub mod plan;
pub mod pods;
pub mod render;
pub mod selector;
pub mod wait;

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::Value;

use crate::cluster::ClusterView;
use crate::policy::drain::NodeAnalysis;

use budgets::{Budget, Counts};
use pods::PodFacts;

/// The node's pods and the disruption budgets, as read from a snapshot or the API.
#[derive(Clone, Debug, Default)]
pub struct Scene {
    /// Pods whose `spec.nodeName` is the node.
    pub pods: Vec<PodFacts>,
    pub budgets: Vec<Budget>,
    /// Items that could not be read, as `kind namespace/name: why`.
    pub unreadable: Vec<String>,
}

impl Scene {
    /// Takes in one item of a snapshot or a LIST (apiVersion and kind set) if it is a pod on
    /// `node` or a disruption budget; other items are ignored.
    pub fn take(&mut self, node: &str, item: &Value) {
        let api_version = item.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = item.get("kind").and_then(Value::as_str).unwrap_or_default();
        let name = || {
            let ns = item.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
            let n = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("<no name>");
            format!("{ns}/{n}")
        };
        match (api_version, kind) {
            ("v1", "Pod") if item.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node) => {
                match PodFacts::from_value(item) {
                    Ok(p) => self.pods.push(p),
                    Err(e) => self.unreadable.push(format!("pod {}: {e}", name())),
                }
            }
            ("policy/v1", "PodDisruptionBudget") => match Budget::from_value(item) {
                Ok(b) => self.budgets.push(b),
                Err(e) => self.unreadable.push(format!("poddisruptionbudget {}: {e}", name())),
            },
            _ => {}
        }
    }
}

/// One thing that keeps a drain from finishing, or that a drain needs a flag for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Stable id of the kind of finding (docs/drain.md).
    pub id: &'static str,
    /// `pod` or `poddisruptionbudget`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    /// True when it keeps the drain from finishing (the exit status counts it).
    pub blocks: bool,
    pub reason: String,
    pub remedy: String,
    /// The `kubectl drain` flag it needs, for pods kubectl refuses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flag: Option<&'static str>,
    /// A budget's selector, as `kubectl get -l` takes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counts: Option<Counts>,
    /// The node's pods a budget refuses to evict.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<String>,
    /// For Longhorn's budget while it is needed and refuses an eviction: what deleting it, or
    /// the pods it holds, would cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bypass: Option<Bypass>,
}

/// What getting past a needed Longhorn budget would cost: deleting the budget, or deleting its
/// instance-manager pod, which no budget refuses (`kubectl delete pod`, `kubectl drain
/// --disable-eviction`). The volumes are those the budget is needed for, by what they lose.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bypass {
    /// Volumes whose last healthy copy (no replica elsewhere protects them) is on the node.
    pub last_copy: Vec<String>,
    /// Volumes attached on the node, protected elsewhere: their engine stops under the workload.
    pub engine_stops: Vec<String>,
}

impl Finding {
    fn pod(id: &'static str, p: &PodFacts, blocks: bool, reason: String, remedy: String) -> Self {
        Self {
            id,
            kind: "pod",
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            blocks,
            reason,
            remedy,
            ..Self::default()
        }
    }

    /// `pod ns/name` or `poddisruptionbudget ns/name`.
    pub fn object(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// The doctor's answer for one node.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    pub findings: Vec<Finding>,
    /// The one `kubectl drain` command line that gets past every pod kubectl would refuse.
    pub kubectl_drain: String,
    /// How many pods on the node and budgets were read.
    pub pods_read: usize,
    pub budgets_read: usize,
}

impl Diagnosis {
    pub fn blocks(&self) -> bool {
        self.findings.iter().any(|f| f.blocks)
    }
}

/// Everything besides the guard's verdicts that keeps `kubectl drain node` from finishing, for a
/// drain run with `kubectl drain --timeout` `drain_timeout` (`--drain-timeout`).
pub fn diagnose(
    view: &ClusterView,
    analysis: &NodeAnalysis,
    scene: &Scene,
    drain_timeout: Option<Duration>,
    now: SystemTime,
) -> Diagnosis {
    let node = analysis.node.as_str();
    let mut findings = budget_findings(view, analysis, scene);
    let mut flags = BTreeSet::new();
    let mut pods: Vec<&PodFacts> = scene.pods.iter().collect();
    pods.sort_by_key(|p| p.key());
    for p in pods {
        if let Some((flag, id, reason)) = pods::refusal(p) {
            flags.insert(flag);
            let mut f = Finding::pod(id, p, false, reason, format!("kubectl drain {node} {}", flag.as_str()));
            f.flag = Some(flag.as_str());
            findings.push(f);
        }
        if let Some((id, reason, remedy)) = pods::never_goes(p, drain_timeout, now) {
            findings.push(Finding::pod(id, p, true, reason, remedy));
        }
    }
    let mut kubectl_drain = format!("kubectl drain {node}");
    for f in &flags {
        kubectl_drain.push(' ');
        kubectl_drain.push_str(f.as_str());
    }
    if let Some(t) = drain_timeout {
        kubectl_drain.push_str(&format!(" --timeout={}s", t.as_secs()));
    }
    Diagnosis { findings, kubectl_drain, pods_read: scene.pods.len(), budgets_read: scene.budgets.len() }
}

/// The budgets that refuse an eviction of a pod on the node (and Longhorn's for the node,
/// whether they do or not), in budget order.
fn budget_findings(view: &ClusterView, analysis: &NodeAnalysis, scene: &Scene) -> Vec<Finding> {
    let node = analysis.node.as_str();
    let mut budgets: Vec<&Budget> = scene.budgets.iter().collect();
    budgets.sort_by_key(|b| b.key());
    let evicted: Vec<&PodFacts> = scene.pods.iter().filter(|p| p.evicted_by_drain()).collect();
    let mut out = Vec::new();
    for p in &evicted {
        let covering: Vec<&&Budget> = budgets.iter().filter(|b| b.covers(p)).collect();
        if covering.len() > 1 && !p.ignores_budgets() {
            let names: Vec<String> = covering.iter().map(|b| b.name.clone()).collect();
            out.push(Finding::pod(
                "pod-with-several-pdbs",
                p,
                true,
                format!(
                    "covered by {} PodDisruptionBudgets ({}): the eviction API refuses it (500: more than one \
                     PodDisruptionBudget)",
                    names.len(),
                    names.join(", ")
                ),
                "make the budgets' selectors disjoint so that one budget covers the pod".into(),
            ));
        }
    }
    for b in budgets {
        let refused: Vec<String> =
            evicted.iter().filter(|p| b.covers(p) && b.refuses(p)).map(|p| p.key()).collect();
        let longhorn = longhorn::is_instance_manager_budget(b);
        if longhorn && (longhorn::node_of(view, b) == Some(node) || !refused.is_empty()) {
            let (id, blocks, mut reason, remedy) = longhorn::explain(view, b, node, analysis);
            let blocks = blocks && !refused.is_empty();
            if refused.is_empty() {
                reason.push_str(
                    "; it refuses no eviction now (no pod of it on the node is evictable under it)",
                );
            }
            let mut f = budget_finding(b, id, blocks, reason, remedy, refused);
            if blocks && id == longhorn::NEEDED {
                f.bypass = longhorn::bypass(view, b, analysis);
            }
            out.push(f);
        } else if !refused.is_empty() {
            let c = b.counts();
            let why = if b.unobserved() {
                "the disruption controller has not computed its status (kube-controller-manager running?), so \
                 every eviction it covers is refused"
                    .to_string()
            } else {
                format!(
                    "disruptionsAllowed 0 ({}; currentHealthy {}, desiredHealthy {}, expectedPods {})",
                    b.spec_text(),
                    c.current_healthy,
                    c.desired_healthy,
                    c.expected_pods
                )
            };
            let reason = format!(
                "selector {} covers {} on {node}; {why}: each eviction gets 429 and kubectl drain retries it every 5 s",
                b.selector_text(),
                refused.join(", ")
            );
            let remedy = if c.current_healthy < c.desired_healthy {
                format!(
                    "bring the workload's pods back to health elsewhere ({} of {} healthy), or scale it up; then the \
                     budget allows a disruption",
                    c.current_healthy, c.desired_healthy
                )
            } else {
                format!(
                    "scale the workload up so that one pod may go, or relax the budget ({}); deleting it drops the \
                     protection for good",
                    b.spec_text()
                )
            };
            out.push(budget_finding(b, "pdb-at-zero", true, reason, remedy, refused));
        }
    }
    out
}

fn budget_finding(
    b: &Budget,
    id: &'static str,
    blocks: bool,
    reason: String,
    remedy: String,
    pods: Vec<String>,
) -> Finding {
    Finding {
        id,
        kind: "poddisruptionbudget",
        namespace: b.namespace.clone(),
        name: b.name.clone(),
        blocks,
        reason,
        remedy,
        selector: Some(b.selector_text()),
        counts: Some(b.counts()),
        pods,
        ..Finding::default()
    }
}
