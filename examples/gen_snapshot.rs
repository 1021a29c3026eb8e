//! Writes the synthetic Longhorn cluster of [`longhorn_guard::synthetic`] as a snapshot file
//! (one JSON `kind: List`, the format `serve --state` and `review --state` read).
//!
//! ```text
//! cargo run --release --example gen_snapshot -- --nodes 60 --volumes 3000 --out /tmp/state.json
//! ```
//!
//! Without `--out` the List goes to stdout. Exit status: 0 written, 1 cannot write, 2 bad sizes.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use longhorn_guard::synthetic::{Group, Synthetic};

#[derive(Parser)]
#[command(about = "Write a synthetic Longhorn cluster snapshot (JSON List)")]
struct Args {
    #[arg(long, default_value_t = 60)]
    nodes: usize,
    #[arg(long, default_value_t = 3_000)]
    volumes: usize,
    /// Output file (default: stdout).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Streams the List item by item, so memory stays flat at any size.
fn write_list(synthetic: &Synthetic, out: &mut dyn Write) -> std::io::Result<()> {
    out.write_all(br#"{"apiVersion":"v1","kind":"List","items":["#)?;
    let mut first = true;
    for group in Group::ALL {
        for object in synthetic.objects(group) {
            if !first {
                out.write_all(b",\n")?;
            }
            first = false;
            serde_json::to_writer(&mut *out, &object)?;
        }
    }
    out.write_all(b"]}\n")?;
    out.flush()
}

fn main() -> ExitCode {
    let args = Args::parse();
    let synthetic = match Synthetic::new(args.nodes, args.volumes) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gen_snapshot: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match &args.out {
        Some(path) => std::fs::File::create(path)
            .and_then(|f| write_list(&synthetic, &mut BufWriter::new(f)))
            .map_err(|e| format!("{}: {e}", path.display())),
        None => {
            write_list(&synthetic, &mut BufWriter::new(std::io::stdout().lock())).map_err(|e| e.to_string())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen_snapshot: cannot write: {e}");
            ExitCode::from(1)
        }
    }
}
