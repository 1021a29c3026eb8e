//! The doctor's part of `check drain`'s table: one line per finding and its remedy, the
//! `kubectl drain` command line, and a summary line.

use super::Diagnosis;
use crate::decision::count;

/// The lines after the guard's own table and summary.
pub fn table(node: &str, d: &Diagnosis) -> String {
    let mut out = format!(
        "{node}: beyond longhorn-guard's verdicts ({} on {node}, {} read):\n",
        count(d.pods_read, "pod"),
        count(d.budgets_read, "PodDisruptionBudget")
    );
    let width = d.findings.iter().map(|f| f.id.len()).max().unwrap_or(0);
    for f in &d.findings {
        let mark = match (f.blocks, f.flag) {
            (true, _) => "BLOCK",
            (false, Some(_)) => "flag",
            (false, None) => "ok",
        };
        out.push_str(&format!("{mark:<5}  {:<width$}  {}: {}\n", f.id, f.object(), f.reason));
        out.push_str(&format!("{:<5}  {:<width$}  remedy: {}\n", "", "", f.remedy));
    }
    if d.findings.is_empty() {
        out.push_str(
            "nothing else: no disruption budget refuses a pod on the node, kubectl drain refuses no pod\n",
        );
    }
    out.push_str(&format!("{node}: drain with: {}\n", d.kubectl_drain));
    let blocking: Vec<&str> = d.findings.iter().filter(|f| f.blocks).map(|f| f.id).collect();
    if blocking.is_empty() {
        out.push_str(&format!("{node}: nothing beyond longhorn-guard's verdicts blocks\n"));
    } else {
        let budgets = d.findings.iter().filter(|f| f.blocks && f.kind == "poddisruptionbudget").count();
        let pods = blocking.len() - budgets;
        let mut parts = Vec::new();
        if budgets > 0 {
            parts.push(count(budgets, "PodDisruptionBudget"));
        }
        if pods > 0 {
            parts.push(count(pods, "pod"));
        }
        out.push_str(&format!("{node}: a drain would also BLOCK on {}\n", parts.join(" and ")));
    }
    out
}
