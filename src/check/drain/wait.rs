//! `check drain NODE --wait [--timeout D]`: waits, on the same watches `serve` runs (no writes),
//! until nothing of longhorn-guard's blocks a drain of the node. Exit 0 once nothing blocks, 1
//! at the timeout, 2 when the node is unknown or the cluster cannot be read.

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use crate::check::print_and;
use crate::cluster::{ClusterView, SharedView, Source};
use crate::policy::drain::{analyze_node, NodeAnalysis};
use crate::policy::Policy;

/// How often the local view is looked at again.
const TICK: Duration = Duration::from_millis(200);
/// Width of the progress bar, in cells.
const BAR: usize = 20;

/// One thing the drain still waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The volume, or `engine NAME` for an instance-manager entry no known volume owns.
    pub what: String,
    /// The highest rebuild progress of its replicas elsewhere, if one is rebuilding.
    pub progress: Option<i64>,
    pub reason: String,
}

impl Waiting {
    /// `vol-a (rebuild 40%): reason` (the progress only when a rebuild runs).
    pub fn line(&self) -> String {
        match self.progress {
            Some(p) => format!("{} (rebuild {p}%): {}", self.what, self.reason),
            None => format!("{}: {}", self.what, self.reason),
        }
    }

    /// `vol-a  [########------------]  40%  reason` for the in-place display.
    pub fn bar_line(&self, width: usize) -> String {
        let bar = match self.progress {
            Some(p) => {
                let p = p.clamp(0, 100) as usize;
                let full = p * BAR / 100;
                format!("[{}{}] {p:>3}%", "#".repeat(full), "-".repeat(BAR - full))
            }
            None => format!("{:<w$}", "[no rebuild]", w = BAR + 7),
        };
        let line = format!("{}  {bar}  {}", self.what, self.reason);
        line.chars().take(width.saturating_sub(1).max(20)).collect()
    }
}

/// What a drain of the node waits for under `analysis` (guard verdicts only).
pub fn waiting(analysis: &NodeAnalysis) -> Vec<Waiting> {
    let mut out: Vec<Waiting> = analysis
        .blocking()
        .map(|v| Waiting {
            what: v.volume.clone(),
            progress: v.replicas.iter().filter(|r| !r.on_node).filter_map(|r| r.progress).max(),
            reason: v.explanation(),
        })
        .collect();
    out.extend(analysis.blocking_unmapped().map(|u| Waiting {
        what: format!("{} {}", u.kind.as_str(), u.name),
        progress: None,
        reason: u.line(),
    }));
    out
}

/// Runs the wait against the cluster KUBECONFIG (or the pod) names.
pub async fn run(node: &str, policy: &Policy, timeout: Option<Duration>) -> ExitCode {
    let client = match crate::cluster::client::try_default().await {
        Ok(c) => c,
        Err(e) => {
            return crate::output::bad_input(
                "check drain",
                &format!("cannot build a Kubernetes client (KUBECONFIG or in-cluster): {e}"),
            )
        }
    };
    let fresh = ClusterView::new(Source::Watch);
    let view = SharedView::new(fresh.derive(crate::policy::drain::derivations(), SystemTime::now()));
    let watches = tokio::spawn(crate::cluster::watch::run(client, view.clone()));
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let code = wait_on(&view, node, policy, timeout, terminal).await;
    // Wait for the watches to be gone: a watch still running while the runtime shuts down
    // sees its connections closed and logs a failure after the answer.
    watches.abort();
    let _ = watches.await;
    code
}

async fn wait_on(
    view: &SharedView,
    node: &str,
    policy: &Policy,
    timeout: Option<Duration>,
    terminal: bool,
) -> ExitCode {
    let started = Instant::now();
    let mut display = Display { terminal, drawn: 0, last: None, secs: 0 };
    let mut tick = tokio::time::interval(TICK);
    loop {
        tick.tick().await;
        let timed_out = timeout.is_some_and(|t| started.elapsed() >= t);
        let now = SystemTime::now();
        let state = {
            let v = view.read();
            if !v.freshness().synced {
                None
            } else if v.node(node).is_none() && v.longhorn_node(node).is_none() {
                return crate::output::bad_input(
                    "check drain",
                    &format!("node {node} is not in the cluster"),
                );
            } else {
                Some(waiting(&analyze_node(&v, node, policy, now)))
            }
        };
        let Some(state) = state else {
            if timed_out {
                let t = humantime::format_duration(timeout.unwrap_or_default());
                return crate::output::bad_input(
                    "check drain",
                    &format!(
                        "cannot read the cluster: the watches did not finish their first lists within {t}"
                    ),
                );
            }
            continue;
        };
        if state.is_empty() {
            if terminal {
                display.clear();
            } else {
                // The "no longer blocks" lines of what was shown.
                display.show(node, &state, started.elapsed());
            }
            let text = format!("{node}: nothing of longhorn-guard's blocks a drain any more\n");
            return print_and("check drain", 0, &text);
        }
        if timed_out {
            display.clear();
            let t = humantime::format_duration(timeout.unwrap_or_default());
            let mut text = format!("{node}: timed out after {t}; a drain would still BLOCK on:\n");
            for w in &state {
                text.push_str(&format!("  {}\n", w.line()));
            }
            return print_and("check drain", 1, &text);
        }
        display.show(node, &state, started.elapsed());
    }
}

/// What is on the screen (terminal) or was printed last (pipe).
struct Display {
    terminal: bool,
    /// Lines drawn by the last redraw (terminal).
    drawn: usize,
    last: Option<Vec<Waiting>>,
    /// The whole seconds waited at the last redraw (terminal: redrawn when they or the state
    /// change).
    secs: u64,
}

impl Display {
    fn show(&mut self, node: &str, state: &[Waiting], elapsed: Duration) {
        let mut out = String::new();
        if self.terminal {
            let secs = elapsed.as_secs();
            if self.last.as_deref() == Some(state) && self.secs == secs {
                return;
            }
            self.secs = secs;
            out.push_str(&self.erase());
            let width = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).unwrap_or(100);
            let waited = humantime::format_duration(Duration::from_secs(secs));
            out.push_str(&format!("{node}: waiting {waited} for:\n"));
            for w in state {
                out.push_str(&w.bar_line(width));
                out.push('\n');
            }
            self.drawn = state.len() + 1;
        } else {
            let last = self.last.take().unwrap_or_default();
            for w in state.iter().filter(|w| !last.contains(w)) {
                out.push_str(&format!("{node}: waiting on {}\n", w.line()));
            }
            for w in last.iter().filter(|l| !state.iter().any(|w| w.what == l.what)) {
                out.push_str(&format!("{node}: {} no longer blocks\n", w.what));
            }
        }
        self.last = Some(state.to_vec());
        write(&out);
    }

    /// Moves up over the last redraw and clears it.
    fn erase(&mut self) -> String {
        let s = if self.drawn > 0 { format!("\x1b[{}A\x1b[J", self.drawn) } else { String::new() };
        self.drawn = 0;
        s
    }

    fn clear(&mut self) {
        if self.terminal {
            write(&self.erase());
        }
    }
}

/// The live display is best effort: a write that fails is not an error.
fn write(s: &str) {
    let _ = crate::output::stdout(s);
}
