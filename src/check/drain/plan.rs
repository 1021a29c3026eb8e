//! `check drain --all`: a maintenance plan over every Longhorn node from the webhook's own
//! analysis: which nodes can be drained now, one greedy batch that can go together, what the
//! rest wait for, and what a rolling window adds to each drain (docs/drain.md).

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde::Serialize;

use crate::cluster::{ClusterView, Node, Object, Replica};
use crate::policy::drain::{analyze_node, analyze_volumes, is_available_healthy, volumes_on_node};
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
    /// A rolling window (one node at a time, in name order, round after round, each rebooted):
    /// the nodes whose drain may also wait for rebuilds that the reboots before it start.
    pub rolling: Vec<RollingWait>,
}

/// One node's rebuild waits in a rolling window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RollingWait {
    pub node: String,
    /// Attached volumes with a healthy replica on this node whose every other healthy replica
    /// is on the nodes rebooted just before it: until Longhorn has rebuilt those, this node
    /// holds the last healthy copy. From the first round on.
    pub rebuilds: Vec<String>,
    /// The same from the second round on: the nodes just before it wrap around the order.
    pub rebuilds_from_second_round: Vec<String>,
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
    let rolling = rolling(view, &names.into_iter().collect::<Vec<_>>());
    Plan { nodes, batch, rolling }
}

/// A replica that counts as a healthy copy now: available and healthy as the drain analysis
/// reads it, and not `ERR` in its engine's mode map.
fn healthy_copy(view: &ClusterView, r: &Replica) -> bool {
    let erred = || {
        let volume = r.volume().unwrap_or_default();
        let name = r.metadata.name.as_deref().unwrap_or_default();
        view.engine_of(volume)
            .and_then(|e| e.status.replica_mode_map.get(name))
            .is_some_and(|m| m.as_str() == "ERR")
    };
    is_available_healthy(r) && !erred()
}

/// What a rolling window over `order` adds to each drain. A hard reboot fails the replicas of
/// an attached volume on the rebooted node until Longhorn rebuilds them (a detached volume's
/// replicas are stopped, not failed); the next node holding a copy of that volume then holds
/// its last healthy one while the rebuild runs, whenever the volume's other copies all sit on
/// the nodes rebooted just before it (as many of them as it has other copies).
fn rolling(view: &ClusterView, order: &[String]) -> Vec<RollingWait> {
    let at: BTreeMap<&str, usize> = order.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
    let mut waits: Vec<RollingWait> = order
        .iter()
        .map(|n| RollingWait {
            node: n.clone(),
            rebuilds: Vec::new(),
            rebuilds_from_second_round: Vec::new(),
        })
        .collect();
    for volume in view.volume_names() {
        if view.volume(volume).is_none_or(|v| v.status.state.as_str() != "attached") {
            continue;
        }
        let copies: BTreeSet<usize> = view
            .replicas_of_volume(volume)
            .filter(|r| healthy_copy(view, r))
            .filter_map(|r| r.node().and_then(|n| at.get(n)).copied())
            .collect();
        if copies.len() < 2 {
            continue; // one copy: its node waits for good, as the table says
        }
        for &i in &copies {
            let before: BTreeSet<usize> =
                (1..copies.len()).map(|back| (i + order.len() - back) % order.len()).collect();
            if !copies.iter().all(|c| *c == i || before.contains(c)) {
                continue;
            }
            // A copy later in the order is rebooted before this node only in the next round.
            let w = &mut waits[i];
            match copies.iter().any(|c| *c > i) {
                false => w.rebuilds.push(volume.to_string()),
                true => w.rebuilds_from_second_round.push(volume.to_string()),
            }
        }
    }
    waits.retain(|w| !w.rebuilds.is_empty() || !w.rebuilds_from_second_round.is_empty());
    waits
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
/// a summary, and each node's rebuild waits in a rolling window when there are any.
pub fn table(p: &Plan) -> String {
    let mut rows: Vec<[String; 4]> = vec![["NODE".into(), "NOW".into(), "BATCH".into(), "WAITS FOR".into()]];
    for n in &p.nodes {
        let waits = if !n.waits_for.is_empty() {
            capped(&n.waits_for, "; ", |(v, r)| format!("{v}: {r}"))
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
    if !p.rolling.is_empty() {
        out.push_str(
            "in a rolling window (one node at a time in name order, each rebooted), each drain may also \
             wait for the rebuilds that the reboots just before it start:\n",
        );
        for w in &p.rolling {
            let mut line = format!("  {}: ", w.node);
            if !w.rebuilds.is_empty() {
                line.push_str(&capped(&w.rebuilds, ", ", String::clone));
            }
            if !w.rebuilds_from_second_round.is_empty() {
                let sep = if w.rebuilds.is_empty() { "" } else { "; " };
                line.push_str(&format!(
                    "{sep}from the second round on, {}",
                    capped(&w.rebuilds_from_second_round, ", ", String::clone)
                ));
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// At most [`SHOWN`] items, each shown by `show` (only those), joined by `sep`, and how many
/// more the JSON output lists.
fn capped<T>(items: &[T], sep: &str, show: impl Fn(&T) -> String) -> String {
    let mut s = items.iter().take(SHOWN).map(show).collect::<Vec<_>>().join(sep);
    if items.len() > SHOWN {
        s.push_str(&format!(" (+{} more; --output json lists all)", items.len() - SHOWN));
    }
    s
}
