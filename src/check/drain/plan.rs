//! `check drain --all`: a maintenance plan over every Longhorn node from the webhook's own
//! analysis: which nodes can be drained now, one greedy batch that can go together, and what
//! the rest wait for (docs/drain.md).

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde::Serialize;

use crate::cluster::{ClusterView, Node, Object};
use crate::policy::drain::{analyze_node, analyze_volumes, volumes_on_node};
use crate::policy::Policy;

/// One node's place in the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePlan {
    pub node: String,
    /// A drain of this node alone would proceed now.
    pub drainable_now: bool,
    pub in_batch: bool,
    /// What a drain of it alone waits for: `(volume or entry, reason)`.
    pub waits_for: Vec<(String, String)>,
    /// Drainable alone, but not with the batch: the volumes that would then be stranded.
    pub strands_with_batch: Vec<String>,
}

/// The plan for every Longhorn node, in name order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub nodes: Vec<NodePlan>,
    /// The nodes that can be drained together (greedy, in name order).
    pub batch: Vec<String>,
}

/// Builds the plan.
pub fn plan(view: &ClusterView, policy: &Policy, now: SystemTime) -> Plan {
    let names: BTreeSet<String> =
        view.longhorn_nodes().filter_map(|n| n.metadata.name.as_deref()).map(str::to_string).collect();
    let mut nodes: Vec<NodePlan> = names
        .iter()
        .map(|n| {
            let a = analyze_node(view, n, policy, now);
            NodePlan {
                node: n.clone(),
                drainable_now: !a.would_block(),
                in_batch: false,
                waits_for: super::wait::waiting(&a).into_iter().map(|w| (w.what, w.reason)).collect(),
                strands_with_batch: Vec::new(),
            }
        })
        .collect();
    let mut work = view.clone();
    let mut batch: Vec<String> = Vec::new();
    let mut volumes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in nodes.iter_mut().filter(|p| p.drainable_now) {
        let n = p.node.clone();
        let mine = volumes_on_node(view, &n);
        let original = cordon(&mut work, &n, now);
        let mut stranded: BTreeSet<String> =
            analyze_node(&work, &n, policy, now).blocking().map(|v| v.volume.clone()).collect();
        for m in &batch {
            let shared: Vec<String> = volumes[m].intersection(&mine).cloned().collect();
            if shared.is_empty() {
                continue;
            }
            // A member drains alone, so no engine of these volumes runs in its instance
            // managers: no entry kinds to pass.
            let with = shared.into_iter().map(|v| (v, BTreeSet::new()));
            let a = analyze_volumes(&work, m, with, Vec::new(), policy, now, None);
            stranded.extend(a.blocking().map(|v| v.volume.clone()));
        }
        if stranded.is_empty() {
            p.in_batch = true;
            batch.push(n.clone());
            volumes.insert(n, mine);
        } else {
            p.strands_with_batch = stranded.into_iter().collect();
            if let Some(node) = original {
                work.upsert(Object::Node(Box::new(node)), now);
            }
        }
    }
    Plan { nodes, batch }
}

/// Cordons `node` in `view`, returning its Node as it was (none when the view has no
/// Kubernetes Node of that name, or it is cordoned already).
fn cordon(view: &mut ClusterView, node: &str, now: SystemTime) -> Option<Node> {
    let original = view.node(node).filter(|n| n.spec.unschedulable != Some(true))?.clone();
    let mut cordoned = original.clone();
    cordoned.spec.unschedulable = Some(true);
    view.upsert(Object::Node(Box::new(cordoned)), now);
    Some(original)
}

/// Blockers the table shows per node.
const SHOWN: usize = 3;

/// The plan as a table: NODE, NOW, BATCH, WAITS FOR (at most [`SHOWN`] blockers a node); then
/// a summary.
pub fn table(p: &Plan) -> String {
    let mut rows: Vec<[String; 4]> = vec![["NODE".into(), "NOW".into(), "BATCH".into(), "WAITS FOR".into()]];
    for n in &p.nodes {
        let waits = if !n.waits_for.is_empty() {
            let shown: Vec<String> =
                n.waits_for.iter().take(SHOWN).map(|(v, r)| format!("{v}: {r}")).collect();
            let mut w = shown.join("; ");
            if n.waits_for.len() > SHOWN {
                w.push_str(&format!(" (+{} more; --output json lists all)", n.waits_for.len() - SHOWN));
            }
            w
        } else if !n.strands_with_batch.is_empty() {
            format!("the batch: drained with it, it would strand {}", n.strands_with_batch.join(", "))
        } else {
            "-".into()
        };
        rows.push([
            n.node.clone(),
            if n.drainable_now { "yes" } else { "no" }.into(),
            if n.in_batch { "yes" } else { "-" }.into(),
            waits,
        ]);
    }
    let mut out = crate::output::table(&rows);
    let now = p.nodes.iter().filter(|n| n.drainable_now).count();
    out.push_str(&format!(
        "{now} of {} nodes can be drained now, one at a time; together (greedy batch, in name order): {}\n",
        p.nodes.len(),
        if p.batch.is_empty() { "none".to_string() } else { p.batch.join(", ") }
    ));
    out
}
