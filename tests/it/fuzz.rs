//! Fuzzing, as property tests: malformed and mutated inputs to every parser and decision never
//! panic. Inputs are the shared fixtures and shipped samples with random structural mutations
//! (values replaced by other types, huge or odd strings, keys dropped) and byte-level damage
//! (truncation, flipped bytes, raw random bytes).
//!
//! `FUZZ_CASES` sets the cases per target (default 300, sized for CI); `make fuzz` runs
//! 250,000 per target (1,250,000 in all) in a release build.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use longhorn_guard::admit::{Admitter, WebhookKind};
use longhorn_guard::cluster::{snapshot, SharedView};
use longhorn_guard::lint::{lint_inputs, source::Input};
use longhorn_guard::policy::drain::confirm::summary;
use longhorn_guard::policy::Policy;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn cases() -> u32 {
    std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300)
}

fn runner() -> TestRunner {
    TestRunner::new(Config { cases: cases(), failure_persistence: None, ..Config::default() })
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A JSON value of any type, including long and unusual strings.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        4 => Just(Value::Null),
        4 => any::<bool>().prop_map(Value::Bool),
        4 => any::<i64>().prop_map(Value::from),
        4 => any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null)),
        4 => ".{0,40}".prop_map(Value::String),
        1 => (0usize..70_000).prop_map(|n| Value::String("x".repeat(n))),
        8 => prop_oneof![
            Just(""),
            Just("-1"),
            Just("0"),
            Just("999999999999999999999"),
            Just("1e400"),
            Just("RW"),
            Just("ERR"),
            Just("running"),
            Just("longhorn-system"),
            Just("2026-01-01T00:00:00Z"),
            Just("not-a-date"),
            Just("\u{0}\u{202e}é"),
        ]
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One structural edit: walk `path` (indices taken modulo the children) and replace, drop or
/// wrap what is there.
#[derive(Clone, Debug)]
struct Edit {
    path: Vec<usize>,
    op: u8,
    value: Value,
}

fn edit() -> impl Strategy<Value = Edit> {
    (prop::collection::vec(any::<usize>(), 0..7), 0u8..4, any_value()).prop_map(|(path, op, value)| Edit {
        path,
        op,
        value,
    })
}

fn apply(root: &mut Value, e: &Edit) {
    apply_at(root, &e.path, e);
}

fn apply_at(cur: &mut Value, path: &[usize], e: &Edit) {
    let drop_here = path.len() == 1 && e.op == 1;
    match (cur, path.first()) {
        (Value::Object(m), Some(i)) if !m.is_empty() => {
            let key = m.keys().nth(i % m.len()).cloned().unwrap_or_default();
            if drop_here {
                m.remove(&key);
            } else {
                apply_at(&mut m[key.as_str()], &path[1..], e);
            }
        }
        (Value::Array(a), Some(i)) if !a.is_empty() => {
            let n = i % a.len();
            if drop_here {
                a.remove(n);
            } else {
                apply_at(&mut a[n], &path[1..], e);
            }
        }
        (cur, _) if e.op == 2 => *cur = Value::Array(vec![cur.take()]),
        (cur, _) => *cur = e.value.clone(),
    }
}

/// Byte damage: 0 none, 1 truncate, 2 flip a byte, 3 replace with random bytes.
#[derive(Clone, Debug)]
struct Damage {
    kind: u8,
    at: usize,
    byte: u8,
    noise: Vec<u8>,
}

fn damage() -> impl Strategy<Value = Damage> {
    (
        prop_oneof![6 => Just(0u8), 1 => 1u8..4],
        any::<usize>(),
        any::<u8>(),
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(kind, at, byte, noise)| Damage { kind, at, byte, noise })
}

fn damaged(mut bytes: Vec<u8>, d: &Damage) -> Vec<u8> {
    let at = if bytes.is_empty() { 0 } else { d.at % bytes.len() };
    match d.kind {
        1 => bytes.truncate(at),
        2 if !bytes.is_empty() => bytes[at] ^= d.byte | 1,
        3 => bytes = d.noise.clone(),
        _ => {}
    }
    bytes
}

/// A fixture (picked by `pick`) with `edits` applied, then damaged.
fn mutated(seeds: &[Value], pick: usize, edits: &[Edit], d: &Damage) -> Vec<u8> {
    let mut v = seeds[pick % seeds.len()].clone();
    for e in edits {
        apply(&mut v, e);
    }
    damaged(serde_json::to_vec(&v).unwrap_or_default(), d)
}

fn mutations() -> impl Strategy<Value = (usize, Vec<Edit>, Damage)> {
    (any::<usize>(), prop::collection::vec(edit(), 0..5), damage())
}

fn admission_seeds() -> Vec<Value> {
    let mut names: Vec<_> = std::fs::read_dir(format!("{FIXTURES}/admission"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    names.sort();
    let mut seeds: Vec<Value> =
        names.iter().map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()).collect();
    // The deletes no capture holds, built as the tests of it::drain_deletes build them.
    let snapshot: Value =
        serde_json::from_str(&read(&format!("{FIXTURES}/cluster/snapshot-three-nodes.json"))).unwrap();
    let pod = snapshot["items"].as_array().unwrap().iter().find(|o| o["kind"] == "Pod").unwrap();
    let budget: Value =
        serde_json::from_str(&read(&format!("{FIXTURES}/longhorn/pdb-instance-manager.json"))).unwrap();
    let im: Value =
        serde_json::from_str(&read(&format!("{FIXTURES}/longhorn/instancemanager.json"))).unwrap();
    seeds.push(crate::support::delete_of("", "v1", "pods", pod, "kubernetes-admin"));
    seeds.push(crate::support::delete_of(
        "policy",
        "v1",
        "poddisruptionbudgets",
        &budget,
        "kubernetes-admin",
    ));
    seeds.push(crate::support::delete_of(
        "longhorn.io",
        "v1beta2",
        "instancemanagers",
        &im,
        "kubernetes-admin",
    ));
    seeds
}

fn view() -> SharedView {
    SharedView::new(
        snapshot::load(Path::new(&format!("{FIXTURES}/cluster/snapshot-three-nodes.json"))).unwrap(),
    )
}

#[test]
fn fuzz_admission_reviews_through_every_decision() {
    let seeds = admission_seeds();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let admitter = Admitter::new(view(), Arc::new(Policy::default()), None);
    runner()
        .run(&mutations(), |(pick, edits, d)| {
            let body = mutated(&seeds, pick, &edits, &d);
            for kind in [WebhookKind::Validate, WebhookKind::Mutate] {
                if let Ok(a) = rt.block_on(admitter.admit(kind, &body, Duration::from_secs(1))) {
                    // Whatever was decided serializes to a response echoing the uid.
                    let json = a.response_json();
                    prop_assert_eq!(json["response"]["uid"].as_str(), Some(a.request.uid.as_str()));
                }
            }
            Ok(())
        })
        .unwrap();
}

fn snapshot_seeds() -> Vec<Value> {
    let full: Value =
        serde_json::from_str(&read(&format!("{FIXTURES}/cluster/snapshot-three-nodes.json"))).unwrap();
    let items = full["items"].as_array().cloned().unwrap_or_default();
    assert!(items.len() > 10, "the snapshot fixture has items");
    // Small snapshots (a few objects each) keep every case fast; the full one is damaged whole.
    let mut seeds = Vec::new();
    for chunk in items.chunks(6) {
        let mut v = full.clone();
        v["items"] = Value::Array(chunk.to_vec());
        seeds.push(v);
    }
    seeds
}

#[test]
fn fuzz_snapshot_loader_and_decisions_on_what_it_loads() {
    let seeds = snapshot_seeds();
    let eviction: Value =
        serde_json::from_str(&read(&format!("{FIXTURES}/admission/eviction-create.json"))).unwrap();
    let req = longhorn_guard::admission::parse_review(&serde_json::to_vec(&eviction).unwrap()).unwrap();
    let yaml = read(&format!("{FIXTURES}/cluster/snapshot-three-nodes.yaml"));
    runner()
        .run(&(mutations(), any::<bool>()), |((pick, edits, d), as_yaml)| {
            // The full YAML snapshot, truncated or with a flipped byte.
            let text = if as_yaml && edits.is_empty() && matches!(d.kind, 1 | 2) {
                damaged(yaml.clone().into_bytes(), &d)
            } else {
                mutated(&seeds, pick, &edits, &d)
            };
            let text = String::from_utf8_lossy(&text);
            if let Ok(view) = snapshot::parse(&text, Path::new("fuzz.json")) {
                let _ = longhorn_guard::policy::validate(&req, &view, &Policy::default(), SystemTime::now());
                let _ = longhorn_guard::mutate::mutate(&req, &view, &Policy::default());
            }
            Ok(())
        })
        .unwrap();
}

fn lint_seeds() -> Vec<(String, String)> {
    let mut seeds = Vec::new();
    for dir in ["examples/lint/manifests", "examples/lint/malformed"] {
        let mut paths: Vec<_> =
            std::fs::read_dir(format!("{ROOT}/{dir}")).unwrap().map(|e| e.unwrap().path()).collect();
        paths.sort();
        for p in paths {
            seeds.push((p.display().to_string(), std::fs::read_to_string(&p).unwrap()));
        }
    }
    seeds
}

#[test]
fn fuzz_lint_inputs() {
    let seeds = lint_seeds();
    let policy = Policy::default();
    runner()
        .run(&(mutations(), any::<bool>()), |((pick, edits, d), structural)| {
            let (path, text) = &seeds[pick % seeds.len()];
            let docs = snapshot::parse_documents(text).unwrap_or_default();
            let bytes = if structural && !docs.is_empty() {
                // As JSON (valid YAML), one document per line of `---`.
                let mut out = Vec::new();
                for (i, doc) in docs.into_iter().enumerate() {
                    let mut doc = doc;
                    for e in &edits {
                        apply(&mut doc, e);
                    }
                    if i > 0 {
                        out.extend_from_slice(b"\n---\n");
                    }
                    out.extend(serde_json::to_vec(&doc).unwrap_or_default());
                }
                damaged(out, &d)
            } else {
                damaged(text.clone().into_bytes(), &d)
            };
            let input = Input { path: path.clone(), text: String::from_utf8_lossy(&bytes).into_owned() };
            let _ = lint_inputs(&[input], &policy);
            Ok(())
        })
        .unwrap();
}

#[test]
fn fuzz_policy_files_and_decisions_under_them() {
    let texts = [
        read(&format!("{ROOT}/examples/lint/policy-deny.yaml")),
        read(&format!("{ROOT}/manifests/base/policy.yaml")),
    ];
    // The policy file itself lives in the ConfigMap's data.
    let mut seeds: Vec<Value> = Vec::new();
    for t in &texts {
        for doc in snapshot::parse_documents(t).unwrap() {
            if let Some(inner) = doc.pointer("/data/policy.yaml").and_then(Value::as_str) {
                seeds.extend(snapshot::parse_documents(inner).unwrap());
            } else {
                seeds.push(doc);
            }
        }
    }
    assert!(!seeds.is_empty());
    let view = view();
    let eviction = longhorn_guard::admission::parse_review(
        read(&format!("{FIXTURES}/admission/eviction-create.json")).as_bytes(),
    )
    .unwrap();
    runner()
        .run(&mutations(), |(pick, edits, d)| {
            let bytes = mutated(&seeds, pick, &edits, &d);
            if let Ok(policy) = Policy::parse(&String::from_utf8_lossy(&bytes)) {
                let _ = longhorn_guard::policy::validate(&eviction, &view.read(), &policy, SystemTime::now());
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn fuzz_the_instance_manager_table_of_a_confirmation() {
    // A Table a real kube-apiserver 1.36 printed (tests/data/confirm), mutated and damaged.
    let seed: Value =
        serde_json::from_str(&read(&format!("{ROOT}/tests/data/confirm/instancemanagers-table.json")))
            .unwrap();
    let seeds = [seed];
    runner()
        .run(&mutations(), |(pick, edits, d)| {
            let text = mutated(&seeds, pick, &edits, &d);
            if let Ok(ims) = summary::parse(&String::from_utf8_lossy(&text)) {
                let _ = summary::needs_images(&ims);
            }
            Ok(())
        })
        .unwrap();
}
