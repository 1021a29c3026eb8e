//! The per-version Longhorn data under `tests/data/longhorn-v*/` (each directory's README says
//! where it came from): the real-cluster snapshots `make e2e-longhorn` writes, and what the
//! version tests read of each release's sources. Every test that reads a snapshot runs over
//! every version directory holding it; a directory without it is skipped with a line on
//! stderr, and the newest supported version's must be there.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Where the version directories are.
pub const DATA_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
/// The versions the guard supports, oldest first: each has a directory.
pub const SUPPORTED: [&str; 3] = ["v1.10.2", "v1.11.3", "v1.12.1"];
/// The version whose snapshots must always be present.
pub const NEWEST: &str = "v1.12.1";

/// `(major, minor, patch)` of `v1.12.1`.
pub fn version_key(version: &str) -> Option<(u32, u32, u32)> {
    let mut parts = version.strip_prefix('v')?.split('.').map(|p| p.parse::<u32>().ok());
    let key = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(key)
}

/// Every `tests/data/longhorn-vX.Y.Z/` directory, oldest first: `(version, dir)`.
pub fn version_dirs() -> Vec<(String, PathBuf)> {
    let mut dirs: Vec<(String, PathBuf)> = std::fs::read_dir(DATA_DIR)
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let name = e.file_name().into_string().ok()?;
            let version = name.strip_prefix("longhorn-")?.to_string();
            version_key(&version)?;
            e.file_type().unwrap().is_dir().then(|| (version, e.path()))
        })
        .collect();
    dirs.sort_by_key(|(v, _)| version_key(v));
    for v in SUPPORTED {
        assert!(dirs.iter().any(|(d, _)| d == v), "no {DATA_DIR}/longhorn-{v}/");
    }
    dirs
}

/// Says on the test process's stderr that a check was skipped, and why: written to the stream
/// itself, not through `eprintln!`, which the test harness captures and shows only for failed
/// tests, so the line shows in every run (`make test` too).
pub fn skip(why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIP {why}");
}

/// Each version's snapshot `name` (`attached.json`, ...), oldest first. A version directory
/// without it is skipped, saying so on stderr; the newest supported version's must exist.
pub fn snapshots(name: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for (version, dir) in version_dirs() {
        let path = dir.join(name);
        if path.is_file() {
            out.push((version, path));
        } else {
            assert_ne!(version, NEWEST, "{} is missing", path.display());
            skip(&format!(
                "Longhorn {version}: no {name} in {} (make e2e-longhorn writes it)",
                dir.display()
            ));
        }
    }
    out
}

/// One snapshot file: a `v1` List of what a live cluster held.
#[derive(Clone)]
pub struct Snapshot {
    pub version: String,
    pub path: PathBuf,
    pub items: Vec<Value>,
}

impl Snapshot {
    pub fn load(version: &str, path: &Path) -> Self {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let list: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let items =
            list["items"].as_array().unwrap_or_else(|| panic!("{}: no items", path.display())).clone();
        Self { version: version.to_string(), path: path.to_path_buf(), items }
    }

    /// Every version's snapshot `name`, loaded (see [`snapshots`]).
    pub fn all(name: &str) -> Vec<Self> {
        snapshots(name).iter().map(|(v, p)| Self::load(v, p)).collect()
    }

    /// `path` as text, for `--state`.
    pub fn state(&self) -> &str {
        self.path.to_str().unwrap()
    }

    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.items.iter().filter(move |o| o["kind"] == kind)
    }

    /// The Kubernetes Nodes' names, sorted.
    pub fn nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self
            .of_kind("Node")
            .filter(|n| n["apiVersion"] == "v1")
            .map(|n| text(&n["metadata"]["name"]))
            .collect();
        nodes.sort();
        nodes
    }

    /// `(replica, node)` of each replica of `volume`, by replica name.
    pub fn replicas(&self, volume: &str) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .of_kind("Replica")
            .filter(|r| r["spec"]["volumeName"] == volume)
            .map(|r| (text(&r["metadata"]["name"]), text(&r["spec"]["nodeID"])))
            .collect();
        out.sort();
        out
    }

    /// The nodes of `volume`'s replicas, sorted.
    pub fn replica_nodes(&self, volume: &str) -> Vec<String> {
        let mut nodes: Vec<String> = self.replicas(volume).into_iter().map(|(_, n)| n).collect();
        nodes.sort();
        nodes
    }

    /// The v1 instance manager of `node` (Longhorn names its pod and budget alike).
    pub fn instance_manager(&self, node: &str) -> String {
        let ims: Vec<String> = self
            .of_kind("InstanceManager")
            .filter(|im| im["spec"]["nodeID"] == node && im["spec"]["dataEngine"] != "v2")
            .map(|im| text(&im["metadata"]["name"]))
            .collect();
        assert_eq!(ims.len(), 1, "{}: v1 instance managers on {node}: {ims:?}", self.path.display());
        ims.into_iter().next().unwrap()
    }

    /// The pod on `node` whose name starts with `prefix` (`longhorn-manager-`, `engine-image-`).
    pub fn pod_on(&self, node: &str, prefix: &str) -> String {
        self.of_kind("Pod")
            .find(|p| p["spec"]["nodeName"] == node && text(&p["metadata"]["name"]).starts_with(prefix))
            .map(|p| text(&p["metadata"]["name"]))
            .unwrap_or_else(|| panic!("{}: no pod {prefix}* on {node}", self.path.display()))
    }

    /// The node `volume`'s engine runs on (`status.currentNodeID`).
    pub fn attached_to(&self, volume: &str) -> String {
        self.of_kind("Volume")
            .find(|v| v["metadata"]["name"] == volume)
            .map(|v| text(&v["status"]["currentNodeID"]))
            .unwrap_or_else(|| panic!("{}: no Volume {volume}", self.path.display()))
    }

    /// A rebuild of a two-replica `volume` (scenario c): its engine's node, the node of its
    /// healthy (`RW`) replica and of its rebuilding (`WO`) one with the progress, and a node
    /// holding none of them, if any.
    pub fn rebuild(&self, volume: &str) -> Rebuild {
        let engine = self
            .of_kind("Engine")
            .find(|e| e["spec"]["volumeName"] == volume && e["spec"]["active"] == true)
            .unwrap_or_else(|| panic!("{}: no active Engine of {volume}", self.path.display()));
        let modes = engine["status"]["replicaModeMap"].as_object().cloned().unwrap_or_default();
        let node_of = |mode: &str| {
            let names: Vec<&String> = modes.iter().filter(|(_, m)| *m == mode).map(|(r, _)| r).collect();
            assert_eq!(names.len(), 1, "{}: {volume}'s {mode} replicas: {names:?}", self.path.display());
            self.replicas(volume).into_iter().find(|(r, _)| r == names[0]).unwrap().1
        };
        let progress: Vec<i64> = engine["status"]["rebuildStatus"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, s)| s["isRebuilding"] == true)
            .map(|(_, s)| s["progress"].as_i64().unwrap_or(0))
            .collect();
        assert_eq!(progress.len(), 1, "{}: {volume}'s rebuilds: {progress:?}", self.path.display());
        let (attached, healthy, rebuilding) = (self.attached_to(volume), node_of("RW"), node_of("WO"));
        let idle = self
            .nodes()
            .into_iter()
            .find(|n| ![&attached, &healthy, &rebuilding].contains(&n) && self.holds_nothing(n));
        Rebuild { attached, healthy, rebuilding, progress: progress[0], idle }
    }

    /// True when no replica and no engine of any volume is on `node`.
    pub fn holds_nothing(&self, node: &str) -> bool {
        !self.of_kind("Replica").chain(self.of_kind("Engine")).any(|o| o["spec"]["nodeID"] == node)
    }
}

/// The roles of scenario c's nodes in one snapshot.
#[derive(Clone, Debug)]
pub struct Rebuild {
    /// Where the volume is attached (its engine).
    pub attached: String,
    /// The node of the last healthy replica.
    pub healthy: String,
    /// The node of the replica Longhorn rebuilds, and its progress in percent.
    pub rebuilding: String,
    pub progress: i64,
    /// A node with no replica or engine of any volume.
    pub idle: Option<String>,
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// The row of `volume` in `check drain`'s table, its cells joined by one space (the table pads
/// them to its widths).
pub fn row(out: &str, volume: &str) -> Option<String> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(volume))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// True when `path` (`.spec.disks.*.path`, `.status.conditions[].type`) is in a CRD's
/// `schema` (a `crds.json` entry's).
pub fn in_schema(schema: &Value, path: &str) -> bool {
    let mut node = schema;
    let mut rest = path;
    while !rest.is_empty() {
        if node["x-kubernetes-preserve-unknown-fields"] == true {
            return true;
        }
        let next = if let Some(r) = rest.strip_prefix("[]") {
            rest = r;
            &node["items"]
        } else if let Some(r) = rest.strip_prefix(".*") {
            rest = r;
            &node["additionalProperties"]
        } else {
            let r = rest.strip_prefix('.').unwrap_or_else(|| panic!("path {path}"));
            let end = r.find(['.', '[']).unwrap_or(r.len());
            rest = &r[end..];
            &node["properties"][&r[..end]]
        };
        if !next.is_object() {
            return false;
        }
        node = next;
    }
    true
}
