//! What the guard reads of Longhorn, against each supported release's own data
//! (`tests/data/longhorn-v*/crds.json` and `longhorn.json`, read from the release's public
//! sources by `tests/data/longhorn-extract.py`; the README beside them says how): the CRD
//! fields its models read, the printer columns a confirmation reads, the settings and their
//! defaults, node-drain-policy's values, the instance-manager labels and budget, and the
//! storage-network annotations. A release that lacks what the guard reads, or has a value the
//! guard does not know, fails here naming both. The differences found: docs/longhorn-versions.md.

use std::collections::{BTreeMap, BTreeSet};

use longhorn_guard::check::cluster::checks::versions::{longhorn_reads, LonghornReads, Version};
use longhorn_guard::check::cluster::checks::{backups, network, nodes, volumes};
use longhorn_guard::check::cluster::finding::Severity;
use longhorn_guard::check::cluster::inventory::{self as inv, Inventory};
use longhorn_guard::cluster::readset::{
    CHECK_ONLY_KINDS, DRAIN_SETTINGS, INSTANCE_MANAGER_POD_LABEL, RESOURCES,
};
use longhorn_guard::cluster::{self as model, INSTANCE_MANAGER_NODE_LABEL};
use longhorn_guard::gate::networks::{parse_networks, NETWORKS_ANNOTATION};
use longhorn_guard::gate::status::{LEGACY_NETWORK_STATUS_ANNOTATION, NETWORK_STATUS_ANNOTATION};
use longhorn_guard::policy::drain::confirm::summary;
use longhorn_guard::policy::replicas::{parse_default_count, DEFAULT_REPLICA_COUNT};
use longhorn_guard::policy::Policy;
use serde_json::{json, Value};

use crate::support::longhorn::{in_schema, version_dirs, version_key, SUPPORTED};
use crate::support::read_paths::read_paths;

/// One release's data.
struct Release {
    version: String,
    key: (u32, u32, u32),
    crds: Value,
    facts: Value,
}

fn releases() -> Vec<Release> {
    version_dirs()
        .into_iter()
        .map(|(version, dir)| {
            let read = |name: &str| -> Value {
                let path = dir.join(name);
                let text =
                    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            };
            let (crds, facts) = (read("crds.json"), read("longhorn.json"));
            assert_eq!(
                facts["version"],
                version.as_str(),
                "{}: longhorn.json is of another release",
                dir.display()
            );
            Release { key: version_key(&version).unwrap(), version, crds, facts }
        })
        .collect()
}

impl Release {
    fn schema(&self, kind: &str) -> &Value {
        let s = &self.crds[kind]["schema"];
        assert!(s.is_object(), "{}: crds.json has no {kind}", self.version);
        s
    }

    fn settings(&self) -> &serde_json::Map<String, Value> {
        self.facts["settings"].as_object().unwrap()
    }

    fn strings(&self, key: &str) -> BTreeSet<String> {
        let v = &self.facts[key];
        v.as_array()
            .unwrap_or_else(|| panic!("{}: {key}", self.version))
            .iter()
            .map(|s| s.as_str().unwrap().into())
            .collect()
    }
}

/// The paths each Longhorn kind is read at, by every model of it (the drain view's and
/// `check cluster`'s), `metadata` left out (not in the CRD schema).
fn read_by_the_guard() -> BTreeMap<&'static str, BTreeSet<String>> {
    let kinds: [(&str, Vec<BTreeSet<String>>); 9] = [
        ("Volume", vec![read_paths::<model::Volume>(), read_paths::<inv::VolumeInfo>()]),
        ("Replica", vec![read_paths::<model::Replica>()]),
        ("Engine", vec![read_paths::<model::Engine>()]),
        ("Node", vec![read_paths::<model::LonghornNode>(), read_paths::<inv::NodeInfo>()]),
        ("InstanceManager", vec![read_paths::<model::InstanceManager>()]),
        ("Setting", vec![read_paths::<model::Setting>()]),
        ("BackupTarget", vec![read_paths::<inv::BackupTargetInfo>()]),
        ("RecurringJob", vec![read_paths::<inv::RecurringJobInfo>()]),
        ("Snapshot", vec![read_paths::<inv::SnapshotItem>()]),
    ];
    kinds
        .into_iter()
        .map(|(kind, sets)| {
            let paths = sets.into_iter().flatten().filter(|p| !p.starts_with(".metadata")).collect();
            (kind, paths)
        })
        .collect()
}

/// A field the guard reads that not every supported release has.
struct Versioned {
    kind: &'static str,
    path: &'static str,
    /// The releases that have it: from `from` (inclusive) up to `to` (exclusive).
    from: Option<(u32, u32, u32)>,
    to: Option<(u32, u32, u32)>,
    /// What the guard makes of it absent.
    absent: &'static str,
}

const VERSIONED: [Versioned; 4] = [
    Versioned {
        kind: "Volume",
        path: ".spec.engineNodeID",
        from: Some((1, 12, 0)),
        to: None,
        absent: "the engine runs on spec.nodeID (v2 engines move off it only from 1.12)",
    },
    Versioned {
        kind: "InstanceManager",
        path: ".status.instanceEngineFrontends.*",
        from: Some((1, 12, 0)),
        to: None,
        absent: "no v2 engine frontends (1.12 made them)",
    },
    Versioned {
        kind: "InstanceManager",
        path: ".status.instances.*.status.type",
        from: None,
        to: Some((1, 11, 0)),
        absent: "no instance manager of API version 3 or older (1.11 dropped the map)",
    },
    Versioned {
        kind: "RecurringJob",
        path: ".spec.retentionPolicy",
        from: Some((1, 13, 0)),
        to: None,
        absent: "count-based, as every job is before 1.13",
    },
];

fn has(key: (u32, u32, u32), from: Option<(u32, u32, u32)>, to: Option<(u32, u32, u32)>) -> bool {
    from.is_none_or(|f| key >= f) && to.is_none_or(|t| key < t)
}

/// Each release serves every Longhorn kind the guard watches or `check cluster` reads at the
/// version, plural and scope the guard asks for.
#[test]
fn every_supported_release_serves_the_kinds_the_guard_reads() {
    let releases = releases();
    let found: Vec<&str> = releases.iter().map(|r| r.version.as_str()).collect();
    for v in SUPPORTED {
        assert!(found.contains(&v), "{v}: {found:?}");
    }
    for r in &releases {
        for res in RESOURCES.iter().filter(|res| res.group == "longhorn.io") {
            let crd = &r.crds[res.type_name];
            assert_eq!(res.version, "v1beta2");
            assert_eq!(
                (&crd["plural"], &crd["served"], &crd["scope"]),
                (&json!(res.plural), &json!(true), &json!("Namespaced")),
                "Longhorn {} {}",
                r.version,
                res.type_name
            );
        }
        for kind in CHECK_ONLY_KINDS {
            assert_eq!(r.crds[kind]["served"], true, "Longhorn {} {kind}", r.version);
        }
    }
}

/// Every field a model reads is in each release's CRD schema, but for the few in
/// [`VERSIONED`], which are in exactly the releases it says (so the table cannot go stale).
#[test]
fn the_guard_reads_only_fields_each_release_has() {
    let read = read_by_the_guard();
    for v in &VERSIONED {
        assert!(read[v.kind].contains(v.path), "VERSIONED names {} {}, which no model reads", v.kind, v.path);
    }
    let mut wrong = Vec::new();
    for r in releases() {
        for (kind, paths) in &read {
            let schema = r.schema(kind);
            for path in paths {
                let versioned = VERSIONED.iter().find(|v| v.kind == *kind && v.path == path);
                let want = versioned.is_none_or(|v| has(r.key, v.from, v.to));
                if in_schema(schema, path) != want {
                    let is = if want { "lacks" } else { "has" };
                    let absent =
                        versioned.map(|v| format!(" (VERSIONED; absent: {})", v.absent)).unwrap_or_default();
                    wrong.push(format!("Longhorn {} {is} {kind} {path}{absent}", r.version));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "read by the guard (src/cluster/model, src/check/cluster/inventory.rs):\n{}",
        wrong.join("\n")
    );
}

/// A confirmation reads the other nodes' instance managers as the Table of the CRD's printer
/// columns: each release's columns make a Table the guard reads.
#[test]
fn the_instance_manager_table_of_each_release_is_read() {
    for r in releases() {
        let columns: Vec<String> = std::iter::once("Name".to_string())
            .chain(
                r.crds["InstanceManager"]["printerColumns"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c[0].as_str().unwrap().into()),
            )
            .collect();
        let cell = |c: &str| match c {
            "Name" => json!("instance-manager-a"),
            "Data Engine" => json!("v1"),
            "State" => json!("running"),
            "Type" => json!("aio"),
            "Node" => json!("node-1"),
            _ => json!("1d"),
        };
        let table = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "columnDefinitions": columns.iter().map(|c| json!({"name": c})).collect::<Vec<_>>(),
            "rows": [{"cells": columns.iter().map(|c| cell(c)).collect::<Vec<_>>()}]});
        let ims = summary::parse(&table.to_string())
            .unwrap_or_else(|e| panic!("Longhorn {}: {e}: {columns:?}", r.version));
        let im = &ims[0];
        assert_eq!(
            (
                im.spec.node_id.as_str(),
                im.spec.type_.as_str(),
                im.spec.data_engine.as_str(),
                im.status.current_state.as_str()
            ),
            ("node-1", "aio", "v1", "running"),
            "Longhorn {}",
            r.version
        );
    }
}

/// Every setting the guard names (a string literal in src/ that is a setting of some
/// release) is a setting of every release, and the defaults it assumes when one is absent
/// are each release's.
#[test]
fn the_settings_the_guard_reads_exist_with_the_defaults_it_assumes() {
    let releases = releases();
    let all: BTreeSet<String> = releases.iter().flat_map(|r| r.settings().keys().cloned()).collect();
    let named = string_literals_in_src();
    let read: BTreeSet<&String> = named.iter().filter(|s| all.contains(*s)).collect();
    for must in
        [DEFAULT_REPLICA_COUNT, "node-drain-policy", "replica-soft-anti-affinity", network::VERSION_SETTING]
            .into_iter()
            .chain(DRAIN_SETTINGS)
    {
        assert!(read.contains(&must.to_string()), "{must} not found among the settings src/ names: {read:?}");
    }
    for r in &releases {
        let missing: Vec<&&String> = read.iter().filter(|s| !r.settings().contains_key(s.as_str())).collect();
        assert!(missing.is_empty(), "Longhorn {} has no setting {missing:?}", r.version);
        // backup-target was a setting before Longhorn 1.8: read only when present.
        assert!(!r.settings().contains_key("backup-target"), "Longhorn {}", r.version);
        let default = |name: &str| {
            r.settings()[name]["default"].as_str().unwrap_or_else(|| panic!("{name}")).to_string()
        };
        for (name, assumed) in
            [nodes::MINIMAL_AVAILABLE, nodes::OVER_PROVISIONING, backups::SNAPSHOT_MAX_COUNT]
        {
            assert_eq!(default(name), assumed.to_string(), "Longhorn {} {name}", r.version);
        }
        let count = parse_default_count(&default(DEFAULT_REPLICA_COUNT)).unwrap();
        assert_eq!(
            (count.for_engine("v1"), count.for_engine("v2")),
            (Some(3), Some(3)),
            "Longhorn {}",
            r.version
        );
        // The Helm values `lint` reads.
        let chart = r.strings("chartDefaultSettings");
        for key in ["defaultReplicaCount", "nodeDrainPolicy", "storageNetwork"] {
            assert!(chart.contains(key), "Longhorn {} chart: no defaultSettings.{key}", r.version);
        }
        assert!(r.strings("chartPersistence").contains("defaultClassReplicaCount"), "Longhorn {}", r.version);
    }
}

/// Every `"a-b"` string literal in src/.
fn string_literals_in_src() -> BTreeSet<String> {
    fn walk(dir: &std::path::Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for piece in text.split('"').skip(1).step_by(2) {
                    if piece.contains('-')
                        && piece.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    {
                        out.insert(piece.to_string());
                    }
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")), &mut out);
    out
}

/// What `check cluster` says of each node-drain-policy value; a release with another value
/// fails here until the guard knows what it means.
const DRAIN_POLICIES: [(&str, Option<Severity>); 5] = [
    ("block-if-contains-last-replica", None),
    ("block-for-eviction", None),
    ("block-for-eviction-if-contains-last-replica", None),
    ("allow-if-replica-is-stopped", Some(Severity::Info)),
    ("always-allow", Some(Severity::Warning)),
];

#[test]
fn every_node_drain_policy_of_every_release_is_known() {
    let known: BTreeSet<String> = DRAIN_POLICIES.iter().map(|(p, _)| p.to_string()).collect();
    // Scenario b of make e2e-longhorn drains under each value (e2e/longhorn/drains.sh).
    let drains =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/e2e/longhorn/drains.sh")).unwrap();
    let line = drains.lines().find(|l| l.starts_with("POLICIES=(")).expect("drains.sh POLICIES");
    let e2e: BTreeSet<String> = line
        .trim_start_matches("POLICIES=(")
        .trim_end_matches(')')
        .split_whitespace()
        .map(String::from)
        .collect();
    for r in releases() {
        let values = r.strings("nodeDrainPolicies");
        assert_eq!(values, known, "Longhorn {}'s node-drain-policy values", r.version);
        assert_eq!(values, e2e, "Longhorn {}: e2e/longhorn/drains.sh POLICIES", r.version);
        assert_eq!(r.settings()["node-drain-policy"]["default"], "block-if-contains-last-replica");
    }
    for (value, severity) in DRAIN_POLICIES {
        let mut inventory = Inventory::default();
        inventory.settings.insert("node-drain-policy".into(), value.into());
        let said: Vec<Severity> =
            volumes::settings(&inventory, &Policy::default()).iter().map(|f| f.severity).collect();
        assert_eq!(said, severity.into_iter().collect::<Vec<_>>(), "{value}");
    }
}

/// The annotation Longhorn writes on an instance-manager pod for its storage network reads as
/// that network, and the status annotations it reads back are the ones the gate waits for.
#[test]
fn the_storage_network_annotations_of_every_release_are_the_gates() {
    for r in releases() {
        let net = &r.facts["storageNetwork"];
        assert_eq!(net["annotation"], NETWORKS_ANNOTATION, "Longhorn {}", r.version);
        let parsed = parse_networks(net["sample"].as_str().unwrap(), Some("longhorn-system")).unwrap();
        assert_eq!(parsed.len(), 1, "Longhorn {}", r.version);
        assert_eq!(
            (parsed[0].namespace.as_str(), parsed[0].name.as_str(), parsed[0].interface.as_deref()),
            ("kube-system", "storage", net["interface"].as_str()),
            "Longhorn {}",
            r.version
        );
        let read: Vec<&str> =
            net["statusRead"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
        assert_eq!(
            read,
            [NETWORK_STATUS_ANNOTATION, LEGACY_NETWORK_STATUS_ANNOTATION],
            "Longhorn {}",
            r.version
        );
        let v = Version::parse(&r.version).unwrap();
        assert_eq!(longhorn_reads(v), LonghornReads::NewThenLegacy, "Longhorn {}", r.version);
    }
}

/// The labels the guard tells instance-manager pods and budgets by, and the budget's name.
#[test]
fn instance_manager_pods_and_budgets_carry_what_the_guard_matches() {
    for r in releases() {
        let labels = &r.facts["instanceManagerPodLabels"];
        let (component, value) = INSTANCE_MANAGER_POD_LABEL;
        assert_eq!(labels[component], value, "Longhorn {}", r.version);
        assert_eq!(labels[INSTANCE_MANAGER_NODE_LABEL], "<node>", "Longhorn {}", r.version);
        // The budget selects the pod's labels and is named after its instance manager.
        let pdb = &r.facts["instanceManagerPdb"];
        assert_eq!(pdb["selector"], "instanceManagerPodLabels", "Longhorn {}", r.version);
        assert_eq!(pdb["name"], "the instance manager's name", "Longhorn {}", r.version);
    }
}
