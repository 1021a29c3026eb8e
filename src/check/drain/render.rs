//! `check drain NODE`'s table, the one place its text is written: the guard's per-volume table,
//! the doctor's findings with their remedies (and, under a needed Longhorn budget, what getting
//! past it would cost), then one verdict line and, only when the drain can go, the `kubectl
//! drain` command line.

use super::{Bypass, Diagnosis};
use crate::check::cluster::finding::some_names;
use crate::decision::count;
use crate::policy::drain::{waits_for, NodeAnalysis, ReplicaReport, Verdict};

/// The whole report: [`volumes`], the doctor's findings, the verdict over both, and the
/// command line when nothing blocks.
pub fn report(a: &NodeAnalysis, d: &Diagnosis) -> String {
    let mut out = volumes(a);
    out.push_str(&findings(&a.node, d));
    out.push_str(&verdict(a, Some(d)));
    if !a.would_block() && !d.blocks() {
        out.push_str(&format!("{}: drain with: {}\n", a.node, d.kubectl_drain));
    }
    out
}

/// The guard's table: VOLUME, REPLICAS (node:state, `unscheduled:state` without a node),
/// PROTECTING (elsewhere), VERDICT, REASON; then one line per instance-manager entry no known
/// volume owns.
pub fn volumes(a: &NodeAnalysis) -> String {
    let mut rows: Vec<[String; 5]> =
        vec![["VOLUME".into(), "REPLICAS".into(), "PROTECTING".into(), "VERDICT".into(), "REASON".into()]];
    for v in &a.volumes {
        let at =
            |r: &ReplicaReport| if r.node.is_empty() { "unscheduled".to_string() } else { r.node.clone() };
        let replicas: Vec<String> = v.replicas.iter().map(|r| format!("{}:{}", at(r), r.state)).collect();
        let protecting: Vec<String> =
            v.replicas.iter().filter(|r| r.protecting).map(|r| format!("{}:{}", r.node, r.state)).collect();
        let mut reason = v.explanation();
        if let Some(by) = &v.overridden {
            reason.push_str(&format!(" [override: {by}]"));
        }
        rows.push([
            v.volume.clone(),
            if replicas.is_empty() { "-".into() } else { replicas.join(",") },
            if protecting.is_empty() { "-".into() } else { protecting.join(",") },
            v.verdict.as_str().to_string(),
            reason,
        ]);
    }
    let mut out = if a.volumes.is_empty() { String::new() } else { crate::output::table(&rows) };
    for u in &a.unmapped_instances {
        let verdict = if u.overridden { Verdict::Overridden } else { Verdict::Block };
        out.push_str(&format!("{}: {} [{}]\n", a.node, u.line(), verdict.as_str()));
    }
    out
}

/// The doctor's part: a head line with what was read, then one line per finding and its
/// remedy; with no finding, the head line says so itself.
fn findings(node: &str, d: &Diagnosis) -> String {
    let mut out = format!(
        "{node}: beyond longhorn-guard's verdicts ({} on {node}, {} read):",
        count(d.pods_read, "pod"),
        count(d.budgets_read, "PodDisruptionBudget")
    );
    if d.findings.is_empty() {
        out.push_str(" no disruption budget refuses a pod on the node, kubectl drain refuses no pod\n");
        return out;
    }
    out.push('\n');
    let width = d.findings.iter().map(|f| f.id.len()).max().unwrap_or(0);
    for f in &d.findings {
        let mark = match (f.blocks, f.flag) {
            (true, _) => "BLOCK",
            (false, Some(_)) => "flag",
            (false, None) => "ok",
        };
        out.push_str(&format!("{mark:<5}  {:<width$}  {}: {}\n", f.id, f.object(), f.reason));
        out.push_str(&format!("{:<5}  {:<width$}  remedy: {}\n", "", "", f.remedy));
        if let Some(b) = &f.bypass {
            out.push_str(&format!("{:<5}  {:<width$}  bypass: {}\n", "", "", bypass(b)));
        }
    }
    out
}

/// Names a cost line shows before "and N more" (`--output json` lists all).
const SHOWN: usize = 3;

/// `deleting it, or its instance-manager pod as kubectl drain --disable-eviction does, takes
/// the last healthy replica of 2 volumes (a, b) and stops the engine of 1 attached volume
/// under its workload (c)` (the pod has the budget's name; the JSON's `pods` names it).
fn bypass(b: &Bypass) -> String {
    let mut costs = Vec::new();
    if !b.last_copy.is_empty() {
        costs.push(format!(
            "takes the last healthy replica of {} ({})",
            count(b.last_copy.len(), "volume"),
            some_names(&b.last_copy, SHOWN)
        ));
    }
    if !b.engine_stops.is_empty() {
        costs.push(format!(
            "stops the engine of {} under its workload ({})",
            count(b.engine_stops.len(), "attached volume"),
            some_names(&b.engine_stops, SHOWN)
        ));
    }
    format!(
        "deleting it, or its instance-manager pod as kubectl drain --disable-eviction does, {}",
        costs.join(" and ")
    )
}

/// The one verdict line: `NODE: a drain would BLOCK on 2 of 3 volumes and 1
/// PodDisruptionBudget`, `... BLOCK on 2 PodDisruptionBudgets and 3 pods (1 volume checked,
/// none blocking)`, `... proceed (2 volumes checked, none blocking)`; with `; N allowed by
/// override` when overrides let volumes through. Without a diagnosis, the guard's verdicts only.
pub fn verdict(a: &NodeAnalysis, d: Option<&Diagnosis>) -> String {
    let total = a.volumes.len();
    let blocking = a.blocking().count();
    let unmapped = a.blocking_unmapped().count();
    let overridden = a.volumes.iter().filter(|v| v.verdict == Verdict::Overridden).count()
        + a.overridden_unmapped().count();
    let checked = count(total, "volume");
    let mut on = Vec::new();
    if blocking > 0 {
        on.push(format!("{blocking} of {checked}"));
    }
    if unmapped > 0 {
        on.push(waits_for(0, unmapped));
    }
    if let Some(d) = d {
        let budgets = d.findings.iter().filter(|f| f.blocks && f.kind == "poddisruptionbudget").count();
        let pods = d.findings.iter().filter(|f| f.blocks).count() - budgets;
        if budgets > 0 {
            on.push(count(budgets, "PodDisruptionBudget"));
        }
        if pods > 0 {
            on.push(count(pods, "pod"));
        }
    }
    let node = &a.node;
    let mut line = match on.split_last() {
        None if total == 0 && a.unmapped_instances.is_empty() => {
            format!("{node}: a drain would proceed (no volume has a replica or engine on it)")
        }
        None => format!("{node}: a drain would proceed ({checked} checked, none blocking)"),
        Some((last, first)) => {
            let list =
                if first.is_empty() { last.clone() } else { format!("{} and {last}", first.join(", ")) };
            match (blocking, total) {
                (0, 0) => format!("{node}: a drain would BLOCK on {list} ({checked} checked)"),
                (0, _) => format!("{node}: a drain would BLOCK on {list} ({checked} checked, none blocking)"),
                _ => format!("{node}: a drain would BLOCK on {list}"),
            }
        }
    };
    if overridden > 0 {
        line.push_str(&format!("; {overridden} allowed by override"));
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bypass_cost_names_three_volumes_of_each_kind_then_counts() {
        let names = |n: usize| (1..=n).map(|i| format!("vol-{i}")).collect::<Vec<_>>();
        let b = Bypass { last_copy: names(5), engine_stops: vec![] };
        assert_eq!(
            bypass(&b),
            "deleting it, or its instance-manager pod as kubectl drain --disable-eviction does, takes the last \
             healthy replica of 5 volumes (vol-1, vol-2, vol-3 and 2 more)"
        );
        let b = Bypass { last_copy: vec![], engine_stops: names(1) };
        assert!(bypass(&b).ends_with(", stops the engine of 1 attached volume under its workload (vol-1)"));
    }
}
