//! The layers of `src/` and the one direction they import in (docs/layers.md).
//!
//! Every path a source file names (`use crate::...`, `crate::a::b` inline, `super::...`
//! resolved against the file's module) is an arrow from the file's module to the module it
//! names. The test fails on an arrow from a layer to a layer above it, and on a cycle among the
//! top-level modules or among the modules of one top-level module: each one names what to move.
//! Within `cluster` the same holds between its sub-layers ([`CLUSTER_LAYERS`]), and a file in one
//! of them names the crate's cluster items through their sub-layer, not through the re-exports
//! of `cluster` (which would hide the arrow). Comments are not read (a doc link is no import).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first: a module imports only from its own layer and the layers below.
/// `util` holds the helpers every layer uses (clipping, durations, exposition, heap,
/// output, signals, YAML limits, certificates and TLS), which import nothing else of
/// the crate.
const LAYERS: &[(&str, &[&str])] = &[
    ("util", &["clip", "duration", "exposition", "heap", "output", "signal", "yaml", "certs", "tls"]),
    ("cluster", &["cluster"]),
    ("decision", &["decision", "admission"]),
    ("rules", &["policy", "gate", "mutate", "lint"]),
    ("commands", &["admit", "check", "review", "synthetic"]),
    ("entry", &["server", "cli"]),
];

/// The sub-layers of `cluster`, bottom first: the object model, the view that holds it, the
/// ways the view is filled. `cluster` itself only declares them and re-exports their items.
const CLUSTER_LAYERS: &[&str] = &["model", "store", "sync"];

/// The module path of a source file: `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib" || p == "main") {
        parts.pop();
    }
    parts
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The paths named on one line of `module`'s file (modules or items: the caller keeps the
/// longest prefix that is a module).
fn named(line: &str, module: &[String]) -> Vec<Vec<String>> {
    let code = match line.trim_start() {
        l if l.starts_with("//") => return Vec::new(),
        l => l.split(" //").next().unwrap_or(l),
    };
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for (i, _) in code.match_indices("crate::").chain(code.match_indices("super::")) {
        if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b'$') {
            continue;
        }
        if code[i..].starts_with("super::") && i >= 7 && code[..i].ends_with("super::") {
            continue; // the tail of a `super::super::` counted at its head
        }
        let mut base: Vec<String> =
            if code[i..].starts_with("crate::") { Vec::new() } else { module.to_vec() };
        let mut rest = &code[i..];
        if let Some(r) = rest.strip_prefix("crate::") {
            rest = r;
        }
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        let mut path = base;
        loop {
            let id = ident_at(rest);
            if id.is_empty() || rest[id.len()..].starts_with('!') || rest[id.len()..].starts_with('(') {
                break;
            }
            path.push(id.to_string());
            match rest[id.len()..].strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::a::{b, c}`: each of b and c (modules or items of a).
            let inner = group.split('}').next().unwrap_or("");
            for id in inner.split(',').map(|s| ident_at(s.trim())).filter(|s| !s.is_empty()) {
                let mut p = path.clone();
                p.push(id.to_string());
                out.push(p);
            }
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
    out
}

/// One path a source file names.
struct Name {
    /// The file, under `src/`.
    file: String,
    /// The file's module.
    module: Vec<String>,
    /// The path as named.
    path: Vec<String>,
    /// The longest prefix of `path` that is a module.
    resolved: Vec<String>,
}

/// Every path each source file names.
fn names() -> Vec<Name> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let modules: BTreeSet<Vec<String>> = all.iter().map(|f| module_of(&src, f)).collect();
    let mut out = Vec::new();
    for file in &all {
        let module = module_of(&src, file);
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(&src).unwrap().display().to_string();
        for line in text.lines() {
            for path in named(line, &module) {
                let mut resolved = path.clone();
                while !resolved.is_empty() && !modules.contains(&resolved) {
                    resolved.pop();
                }
                out.push(Name { file: shown.clone(), module: module.clone(), path, resolved });
            }
        }
    }
    out
}

/// Arrows between modules, with one file that draws each. At `depth` 1, between top-level
/// modules; at `depth` 0, between sibling modules at every level (`a::b::c` naming `a::d::e`
/// is an arrow `a::b -> a::d`; a module naming its parent or its children draws none).
fn arrows(depth: usize) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for Name { file, module, resolved: path, .. } in names() {
        let shared = module.iter().zip(&path).take_while(|(a, b)| a == b).count();
        if shared >= module.len() || shared >= path.len() || (depth == 1 && shared > 0) {
            continue;
        }
        let (from, to) = (module[..=shared].join("::"), path[..=shared].join("::"));
        out.entry((from, to)).or_insert(file);
    }
    out
}

/// The sub-layer of `cluster` a module path lies in (`cluster::store::queries`: 1), if any.
fn cluster_layer_of(module: &str) -> Option<usize> {
    let sub = module.strip_prefix("cluster::")?.split("::").next()?;
    CLUSTER_LAYERS.iter().position(|l| *l == sub)
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, modules)| modules.contains(&module))
}

/// A cycle through the arrows, if any, as the modules it passes.
fn cycle(arrows: &BTreeMap<(String, String), String>) -> Option<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in arrows.keys() {
        next.entry(from).or_default().push(to);
    }
    fn visit<'a>(
        at: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|m| *m == at) {
            let mut c: Vec<String> = path[i..].iter().map(|s| s.to_string()).collect();
            c.push(at.to_string());
            return Some(c);
        }
        if !done.insert(at) {
            return None;
        }
        path.push(at);
        for to in next.get(at).into_iter().flatten() {
            if let Some(c) = visit(to, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    next.keys().find_map(|m| visit(m, &next, &mut Vec::new(), &mut done))
}

fn explain(cycle: &[String], arrows: &BTreeMap<(String, String), String>) -> String {
    cycle
        .windows(2)
        .map(|w| format!("{} -> {} ({})", w[0], w[1], arrows[&(w[0].clone(), w[1].clone())]))
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn every_top_level_module_has_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    for line in lib.lines().filter_map(|l| l.strip_prefix("pub mod ").or_else(|| l.strip_prefix("mod "))) {
        let module = line.trim_end_matches(';');
        assert!(layer_of(module).is_some(), "src/{module}: add it to a layer in LAYERS (tests/it/layers.rs)");
    }
}

#[test]
fn no_layer_imports_from_a_layer_above_it() {
    let upward: Vec<String> = arrows(1)
        .iter()
        .filter(|((from, to), _)| layer_of(from) < layer_of(to))
        .map(|((from, to), file)| {
            format!(
                "{from} ({}) imports {to} ({}) in src/{file}",
                LAYERS[layer_of(from).unwrap()].0,
                LAYERS[layer_of(to).unwrap()].0
            )
        })
        .collect();
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
}

#[test]
fn no_cycle_among_top_level_modules() {
    let arrows = arrows(1);
    if let Some(c) = cycle(&arrows) {
        panic!("import cycle: {}", explain(&c, &arrows));
    }
}

#[test]
fn no_cycle_among_the_modules_of_any_module() {
    let arrows = arrows(0);
    if let Some(c) = cycle(&arrows) {
        panic!("import cycle: {}", explain(&c, &arrows));
    }
}

#[test]
fn every_module_of_cluster_has_a_sub_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src.join("cluster"), &mut all);
    for file in all {
        let module = module_of(&src, &file).join("::");
        assert!(
            cluster_layer_of(&module).is_some(),
            "src/{}: put it under one of {CLUSTER_LAYERS:?} (tests/it/layers.rs, docs/layers.md)",
            file.strip_prefix(&src).unwrap().display()
        );
    }
}

#[test]
fn no_sub_layer_of_cluster_imports_from_one_above_it() {
    let upward: Vec<String> = arrows(0)
        .iter()
        .filter_map(|((from, to), file)| {
            let (f, t) = (cluster_layer_of(from)?, cluster_layer_of(to)?);
            (f < t).then(|| format!("{from} imports {to} in src/{file}"))
        })
        .collect();
    assert!(
        upward.is_empty(),
        "upward imports within cluster (model <- store <- sync):\n{}",
        upward.join("\n")
    );
}

#[test]
fn cluster_files_name_cluster_items_through_their_sub_layer() {
    let hidden: Vec<String> = names()
        .into_iter()
        .filter(|n| {
            n.module.first().is_some_and(|m| m == "cluster")
                && n.module.len() > 1
                && n.resolved == ["cluster"]
                && n.path.len() > 1
        })
        .map(|n| format!("src/{} names {}", n.file, n.path.join("::")))
        .collect();
    assert!(
        hidden.is_empty(),
        "name these through their sub-layer (crate::cluster::model::..., store::..., sync::...):\n{}",
        hidden.join("\n")
    );
}

#[test]
fn the_reader_finds_the_arrows_a_file_draws() {
    let m = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    assert_eq!(
        named("use crate::cluster::ClusterView;", &m("policy::drain")),
        vec![m("cluster::ClusterView")]
    );
    assert_eq!(
        named("use super::super::readset;", &m("cluster::confirm::cached")),
        vec![m("cluster::readset")]
    );
    assert_eq!(
        named("    let x = crate::policy::drain::DrainIndex::default();", &m("cluster")),
        vec![m("policy::drain::DrainIndex")]
    );
    assert_eq!(named("/// see [`crate::policy::drain`]", &m("cluster")), Vec::<Vec<String>>::new());
    assert_eq!(named("crate::stderr_line!(x)", &m("certs")), Vec::<Vec<String>>::new());
    assert_eq!(named("use crate::{clip, yaml};", &m("lint")), vec![m("clip"), m("yaml")]);
    assert_eq!(
        named("use crate::cluster::{a, b::C};", &m("lint")),
        vec![m("cluster::a"), m("cluster::b"), m("cluster")]
    );
    assert!(arrows(1).contains_key(&("policy".to_string(), "cluster".to_string())));
    assert!(arrows(0).contains_key(&("cluster::sync".to_string(), "cluster::store".to_string())));
    assert!(arrows(0).contains_key(&("cluster::store".to_string(), "cluster::model".to_string())));
    assert_eq!(cluster_layer_of("cluster::store::queries"), Some(1));
    assert_eq!(cluster_layer_of("cluster"), None);
}
