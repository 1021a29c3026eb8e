//! Property: over random cluster states (v1 and v2 volumes, replicas with no node, several
//! replicas on one node, engine frontends, instance-manager entries no volume owns), every
//! rendered message (the denial, the warn-mode warnings, `check drain`'s table and JSON)
//! names no empty node, doubles no separator, and states no count that contradicts the
//! replicas of the volume it speaks of.

use crate::support::states;

use std::collections::BTreeMap;

use longhorn_guard::admission::parse_review;
use longhorn_guard::check::{render_json, render_table};
use longhorn_guard::policy::drain::analyze_node;
use longhorn_guard::policy::{self, DrainAction, Policy};
use proptest::prelude::*;
use regex::Regex;
use serde_json::{json, Value};
use states::*;

const EVICTION: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures/admission/eviction-create.json");
const NODES: usize = 4; // node-0 is drained
const DRAINED: &str = "node-0";

#[derive(Clone, Debug)]
struct R {
    /// None: not scheduled.
    node: Option<usize>,
    healthy: bool,
    failed: bool,
    last_failed: bool,
    deleting: bool,
    stopped: bool,
    /// 0 RW, 1 WO, 2 ERR, 3 absent from the engine's map.
    mode: u8,
}

#[derive(Clone, Debug)]
struct V {
    v2: bool,
    attached: bool,
    engine_node: usize,
    /// A v2 engine frontend on this node (v2 only).
    frontend: Option<usize>,
    number: i64,
    replicas: Vec<R>,
}

#[derive(Clone, Debug)]
struct C {
    cordoned: Vec<bool>,
    im_running: Vec<bool>,
    volumes: Vec<V>,
    /// Entries no volume owns in node-0's instance managers.
    unmapped: Vec<(bool, u8)>,
}

fn r() -> impl Strategy<Value = R> {
    use prop::bool::weighted;
    (
        prop_oneof![1 => Just(None), 6 => (0..NODES).prop_map(Some)],
        weighted(0.7),
        weighted(0.2),
        weighted(0.2),
        weighted(0.1),
        weighted(0.2),
        prop_oneof![4 => Just(0u8), 1 => 1u8..4],
    )
        .prop_map(|(node, healthy, failed, last_failed, deleting, stopped, mode)| R {
            node,
            healthy,
            failed,
            last_failed,
            deleting,
            stopped,
            mode,
        })
}

fn v() -> impl Strategy<Value = V> {
    (
        any::<bool>(),
        any::<bool>(),
        0..NODES,
        prop::option::of(0..NODES),
        1i64..=3,
        prop::collection::vec(r(), 1..5),
    )
        .prop_map(|(v2, attached, engine_node, frontend, number, replicas)| V {
            v2,
            attached,
            engine_node,
            frontend: frontend.filter(|_| v2),
            number,
            replicas,
        })
}

fn c() -> impl Strategy<Value = C> {
    (
        prop::collection::vec(prop::bool::weighted(0.25), NODES),
        prop::collection::vec(prop::bool::weighted(0.8), NODES),
        prop::collection::vec(v(), 1..8),
        prop::collection::vec((any::<bool>(), 0u8..3), 0..3),
    )
        .prop_map(|(cordoned, im_running, volumes, unmapped)| C {
            cordoned,
            im_running,
            volumes,
            unmapped,
        })
}

fn n(i: usize) -> String {
    format!("node-{i}")
}

fn build(c: &C) -> Vec<Value> {
    let mut items = Vec::new();
    for i in 0..NODES {
        items.push(node(&n(i), c.cordoned[i]));
        for e in ["v1", "v2"] {
            items.push(im(&n(i), e, if c.im_running[i] { "running" } else { "error" }, &[], &[]));
            items.push(im_pod(&n(i), e));
        }
    }
    for (vi, v) in c.volumes.iter().enumerate() {
        let vol = format!("vol-{vi}");
        let de = if v.v2 { "v2" } else { "v1" };
        let (state, on) =
            if v.attached { ("attached", n(v.engine_node)) } else { ("detached", String::new()) };
        items.push(volume(&vol, de, v.number, state, &on));
        let mut modes = Vec::new();
        for (ri, r) in v.replicas.iter().enumerate() {
            let name = format!("{vol}-r-{ri}");
            let node = r.node.map(n).unwrap_or_default();
            let mut x = replica(&vol, &name, &node, de);
            x["spec"]["healthyAt"] = json!(if r.healthy { T } else { "" });
            x["spec"]["failedAt"] = json!(if r.failed { T } else { "" });
            x["spec"]["lastFailedAt"] = json!(if r.failed || r.last_failed { T } else { "" });
            if !r.healthy && !r.failed && !r.last_failed {
                x["spec"]["lastHealthyAt"] = json!("");
            }
            if r.deleting {
                x["metadata"]["deletionTimestamp"] = json!(T);
            }
            if r.stopped {
                x["spec"]["desireState"] = json!("stopped");
                x["status"]["currentState"] = json!("stopped");
            }
            if r.mode < 3 {
                modes.push((name.clone(), ["RW", "WO", "ERR"][r.mode as usize]));
            }
            items.push(x);
        }
        if v.attached {
            let modes: Vec<(&str, &str)> = modes.iter().map(|(a, b)| (a.as_str(), *b)).collect();
            items.push(engine(&vol, &on, de, &modes));
        }
        if let Some(f) = v.frontend {
            edit(&mut items, "InstanceManager", &im_name(&n(f), "v2"), |im| {
                im["status"]["instanceEngineFrontends"][format!("{vol}-ef-0")] = json!({});
            });
        }
    }
    for (i, (v2, kind)) in c.unmapped.iter().enumerate() {
        let entry = match kind {
            0 => format!("gone-{i}-e-0"),
            1 => format!("gone-{i}-ef-2"),
            _ => format!("odd-name-{i}"),
        };
        let list = if *kind == 1 { "instanceEngineFrontends" } else { "instanceEngines" };
        edit(&mut items, "InstanceManager", &im_name(DRAINED, if *v2 { "v2" } else { "v1" }), |im| {
            im["status"][list][entry] = json!({});
        });
    }
    items
}

/// Every message a drain of node-0 renders.
fn messages(items: &[Value]) -> Vec<String> {
    let view = view(items);
    let mut body: Value = serde_json::from_str(&std::fs::read_to_string(EVICTION).unwrap()).unwrap();
    body["request"]["name"] = json!(im_name(DRAINED, "v1"));
    let req = parse_review(body.to_string().as_bytes()).unwrap();
    let mut out = Vec::new();
    let enforce = Policy::default();
    let d = policy::validate(&req, &view, &enforce, now());
    out.extend(d.status.as_ref().map(|s| s.message.clone()));
    out.extend(d.warnings.clone());
    let mut warn = Policy::default();
    warn.drain.action = DrainAction::Warn;
    let warnings = policy::validate(&req, &view, &warn, now()).warnings;
    // As one list too, so the head's count can be checked against the lines.
    out.push(warnings.join("\n- "));
    out.extend(warnings);
    let a = analyze_node(&view, DRAINED, &enforce, now());
    out.push(render_table(&a));
    let json = render_json(&a);
    for v in json["volumes"].as_array().unwrap() {
        let (volume, reason, remedy) =
            (v["volume"].as_str().unwrap(), v["reason"].as_str().unwrap(), v["remedy"].as_str().unwrap());
        out.push(if remedy.is_empty() {
            format!("{volume}: {reason}")
        } else {
            format!("{volume}: {reason}; {remedy}")
        });
        for r in v["replicas"].as_array().unwrap() {
            if let Some(w) = r["whyNot"].as_str() {
                out.push(format!("its replica {w}"));
            }
        }
    }
    out
}

/// The replicas of each volume: (node or "", healthy and not failed nor deleting).
fn replicas(items: &[Value]) -> BTreeMap<String, Vec<(String, bool)>> {
    let mut out: BTreeMap<String, Vec<(String, bool)>> = BTreeMap::new();
    for o in items.iter().filter(|o| o["kind"] == "Replica") {
        let healthy = o["spec"]["healthyAt"] != ""
            && o["spec"]["failedAt"] == ""
            && o["metadata"]["deletionTimestamp"].is_null();
        out.entry(o["spec"]["volumeName"].as_str().unwrap().to_string())
            .or_default()
            .push((o["spec"]["nodeID"].as_str().unwrap().to_string(), healthy));
    }
    out
}

fn check_text(text: &str) -> Result<(), String> {
    for bad in [
        ", ,", ",,", ";;", "; ;", "; ,", ", ;", ": :", "::", "on ,", "on ;", "on )", "on :", " ,", " ;", "()",
    ] {
        if text.contains(bad) {
            return Err(format!("{bad:?} in {text:?}"));
        }
    }
    for line in text.lines() {
        let t = line.trim_end();
        if t.ends_with(',') || t.ends_with(';') || t.ends_with(" on") {
            return Err(format!("dangling separator in {line:?}"));
        }
        // `node:state` cells of the table: never without a node.
        if line.split_whitespace().any(|w| w.starts_with(':') || w.contains(",:")) {
            return Err(format!("a replica without a node name in {line:?}"));
        }
    }
    Ok(())
}

/// A compiled regex, compiled once per pattern.
fn re(pattern: &'static str) -> Regex {
    static CACHE: std::sync::LazyLock<std::sync::Mutex<BTreeMap<&'static str, Regex>>> =
        std::sync::LazyLock::new(Default::default);
    let mut cache = CACHE.lock().unwrap();
    cache.entry(pattern).or_insert_with(|| Regex::new(pattern).unwrap()).clone()
}

/// The counts in one volume's line agree with its replicas.
fn check_counts(
    line: &str,
    reps: &BTreeMap<String, Vec<(String, bool)>>,
    numbers: &BTreeMap<String, i64>,
) -> Result<(), String> {
    let Some((vol, rest)) = line.trim_start_matches("- ").split_once(": ") else { return Ok(()) };
    // A warning clipped to 120 characters may end in a partial clause: drop it.
    let clipped = line.ends_with("...");
    let rest = if clipped { rest.rsplit_once("; ").map_or("", |(head, _)| head) } else { rest };
    let Some(all) = reps.get(vol) else { return Ok(()) };
    let others: Vec<&(String, bool)> = all.iter().filter(|(n, _)| n != DRAINED).collect();
    let on = |node: &str| all.iter().filter(|(n, _)| n == node).count();
    let fail = |what: &str| Err(format!("{what}: {line:?} vs {all:?}"));
    let num = |s: &str| s.parse::<usize>().unwrap();

    if let Some(c) = re(r"numberOfReplicas=(\d+)").captures(rest) {
        if numbers.get(vol).copied() != Some(num(&c[1]) as i64) {
            return fail("numberOfReplicas");
        }
    }
    if rest.starts_with("1 replica (") && all.len() != 1 {
        return fail("1 replica");
    }
    if rest.contains("no other replica exists") && all.len() != 1 {
        return fail("no other replica");
    }
    if let Some(c) = re(r"all (\d+) of its replicas are on ([\w-]+)").captures(rest) {
        if num(&c[1]) != all.len() || on(&c[2]) != all.len() {
            return fail("all of its replicas");
        }
    }
    if let Some(c) = re(r"all (\d+) healthy replicas are on ([\w-]+)").captures(rest) {
        if all.iter().filter(|(n, h)| n == &c[2] && *h).count() != num(&c[1]) {
            return fail("healthy replicas");
        }
    }
    if rest.starts_with("last healthy replica is on")
        && all.iter().filter(|(n, h)| n == DRAINED && *h).count() != 1
    {
        return fail("last healthy replica");
    }
    if let Some(c) = re(r"^(\d+) replicas on ([\w-]+) (were|are)").captures(rest) {
        if on(&c[2]) != num(&c[1]) {
            return fail("replicas on the node");
        }
    }
    // Clauses about replicas elsewhere: their counts add up to the replicas elsewhere.
    let clause = re(
        r"its (?:(\d+) )?replicas? (?:on ([\w-]+(?:, [\w-]+)*)|with no node|has no node|have no node)( each)?",
    );
    let mut listed = 0;
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    let mut any = false;
    for c in clause.captures_iter(rest) {
        any = true;
        let nodes: Vec<&str> = c.get(2).map(|m| m.as_str().split(", ").collect()).unwrap_or_default();
        let count = match (c.get(1), nodes.len()) {
            (Some(k), _) => num(k.as_str()),
            (None, 0) => 1,
            (None, k) => k,
        };
        if count > 1 && c.get(3).is_none() && !c[0].ends_with("have no node") {
            return fail("several replicas without 'each'");
        }
        if nodes.is_empty() && others.iter().filter(|(n, _)| n.is_empty()).count() < count {
            return fail("replicas with no node");
        }
        for nd in &nodes {
            if *nd == DRAINED || on(nd) == 0 {
                return fail("a node without a replica");
            }
            *per_node.entry(nd.to_string()).or_default() += 1;
        }
        if !nodes.is_empty() && count < nodes.len() {
            return fail("fewer replicas than nodes");
        }
        listed += count;
    }
    for (nd, k) in per_node {
        if k > on(&nd) {
            return fail("more clauses on a node than replicas");
        }
    }
    if let Some(c) = re(r"and (\d+) more replicas?").captures(rest) {
        listed += num(&c[1]);
    }
    // A clipped warning may lose clauses, never gain one.
    if any && (listed > others.len() || (!clipped && listed != others.len())) {
        return fail("replicas elsewhere listed");
    }
    if let Some(c) = re(r"protected by healthy replicas? on ([\w-]+(?:, [\w-]+)*)").captures(rest) {
        for nd in c[1].split(", ") {
            if !all.iter().any(|(n, h)| n == nd && *h) {
                return fail("protected by a node without a healthy replica");
            }
        }
    }
    Ok(())
}

/// The head's count agrees with the lines below it.
fn check_head(msg: &str) -> Result<(), String> {
    if !msg.contains('\n') {
        return Ok(());
    }
    let Some(c) = re(r"would strand (\d+) volumes?(?: and stop (\d+))?").captures(msg) else {
        return Ok(());
    };
    let want: usize = c[1].parse::<usize>().unwrap() + c.get(2).map_or(0, |m| m.as_str().parse().unwrap());
    let lines = msg.lines().skip(1).filter(|l| !l.starts_with("- and ")).count();
    let more: usize = re(r"- and (\d+) more").captures(msg).map_or(0, |m| m[1].parse().unwrap());
    if msg.starts_with("longhorn-guard: draining") && lines + more != want {
        return Err(format!("head says {want}, lists {lines} + {more}: {msg:?}"));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_message_names_real_nodes_and_true_counts(c in c()) {
        let items = build(&c);
        let reps = replicas(&items);
        let numbers: BTreeMap<String, i64> = items
            .iter()
            .filter(|o| o["kind"] == "Volume")
            .map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), o["spec"]["numberOfReplicas"].as_i64().unwrap()))
            .collect();
        for m in messages(&items) {
            prop_assert!(check_text(&m).is_ok(), "{}", check_text(&m).unwrap_err());
            prop_assert!(check_head(&m).is_ok(), "{}", check_head(&m).unwrap_err());
            for line in m.lines() {
                // Table rows carry the reason in the last column.
                let line = match line.find(" block    ").or(line.find(" safe     ")) {
                    Some(_) => {
                        let vol = line.split_whitespace().next().unwrap_or("");
                        let reason = line.rsplit("    ").next().unwrap_or("");
                        format!("{vol}: {}", reason.trim_start())
                    }
                    None => line.to_string(),
                };
                let r = check_counts(&line, &reps, &numbers);
                prop_assert!(r.is_ok(), "{}", r.unwrap_err());
            }
        }
    }
}

#[test]
fn the_checks_catch_the_old_wording() {
    let mut reps = BTreeMap::new();
    reps.insert(
        "vol-a".to_string(),
        vec![("node-0".to_string(), true), ("".to_string(), false), ("".to_string(), false)],
    );
    let numbers = BTreeMap::from([("vol-a".to_string(), 3)]);
    assert!(check_text(
        "vol-a: last healthy replica is on node-0; its replicas on ,  each has never been healthy"
    )
    .is_err());
    let both = BTreeMap::from([(
        "vol-b".to_string(),
        vec![("node-0".to_string(), true), ("node-0".to_string(), true)],
    )]);
    assert!(check_counts(
        "vol-b: last healthy replica is on node-0; no other replica exists (numberOfReplicas=2)",
        &both,
        &BTreeMap::from([("vol-b".to_string(), 2)])
    )
    .is_err());
    assert!(check_counts(
        "vol-a: last healthy replica is on node-0; its replica with no node has never been healthy",
        &reps,
        &numbers
    )
    .is_err());
    assert!(check_counts(
        "vol-a: last healthy replica is on node-0; its 2 replicas with no node each has never been healthy",
        &reps,
        &numbers
    )
    .is_ok());
    assert!(check_head("longhorn-guard: draining node-0 would strand 2 volumes:\n- vol-a: x").is_err());
    assert!(
        check_head("longhorn-guard: draining node-0 would strand 2 volumes:\n- vol-a: x\n- vol-b: y").is_ok()
    );
}
