//! Writes the synthetic Longhorn cluster of [`longhorn_guard::synthetic`] as a snapshot file
//! (one JSON `kind: List`, the format `serve --state`, `review --state` and `check cluster
//! --state` read).
//!
//! ```text
//! cargo run --release --example gen_snapshot -- --nodes 60 --volumes 3000 --out /tmp/state.json
//! cargo run --release --example gen_snapshot -- --nodes 30 --volumes 10000 --snapshots 100000 --out /tmp/state-10k.json
//! ```
//!
//! `--first-node-engines N` attaches exactly N volumes on the first node (`make bench-https`'s
//! denial strands exactly N). `--snapshots N` adds what only `check cluster` reads: a BackupTarget, two RecurringJobs and N
//! Snapshot objects spread over the volumes. Without `--out` the List goes to stdout. Exit
//! status: 0 written, 1 cannot write, 2 bad sizes.

use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use longhorn_guard::synthetic::checks::{write_list, CheckObjects};
use longhorn_guard::synthetic::Synthetic;

#[derive(Parser)]
#[command(about = "Write a synthetic Longhorn cluster snapshot (JSON List)")]
struct Args {
    #[arg(long, default_value_t = 60)]
    nodes: usize,
    #[arg(long, default_value_t = 3_000)]
    volumes: usize,
    /// Also write a BackupTarget, two RecurringJobs and this many Snapshots (check cluster).
    #[arg(long, value_name = "N")]
    snapshots: Option<usize>,
    /// Exactly this many volumes (the first ones) run their engine on the first node, the
    /// rest on the others but the last: evicting the first node's instance manager strands N.
    #[arg(long, value_name = "N")]
    first_node_engines: Option<usize>,
    /// Output file (default: stdout).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let synthetic = Synthetic::new(args.nodes, args.volumes)
        .and_then(|s| match args.first_node_engines {
            Some(n) => s.with_first_node_engines(n),
            None => Ok(s),
        })
        .map_err(|e| e.to_string());
    let extra = args.snapshots.map(CheckObjects::new).transpose().map_err(|e| e.to_string());
    let (synthetic, extra) = match (synthetic, extra) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("gen_snapshot: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match &args.out {
        Some(path) => std::fs::File::create(path)
            .and_then(|f| write_list(&synthetic, extra.as_ref(), &mut BufWriter::new(f)))
            .map_err(|e| format!("{}: {e}", path.display())),
        None => write_list(&synthetic, extra.as_ref(), &mut BufWriter::new(std::io::stdout().lock()))
            .map_err(|e| e.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen_snapshot: cannot write: {e}");
            ExitCode::from(1)
        }
    }
}
