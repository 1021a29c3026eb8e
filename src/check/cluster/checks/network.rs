//! `storage-network`: with the `storage-network` setting set, whether the running Multus writes
//! the status annotation this Longhorn reads (longhorn/longhorn#6953), and which instance-manager
//! pods have no storage-network IP in it (read with the gate's own [`crate::gate::status::check`]).
//!
//! The findings are typed ([`NetworkFinding`]) and worded in one place ([`NetworkFinding::render`]).

use std::collections::BTreeMap;

use super::super::finding::{count, Check, Finding, Severity};
use super::super::inventory::Inventory;
use super::super::network::{Component, DaemonSetImage, ImPod};
use super::versions::{fixed_in, longhorn_reads, multus_writes, LonghornReads, MultusWrites, Version};
use crate::gate::networks::{parse_networks, ExpectedNetwork, NETWORKS_ANNOTATION};
use crate::gate::status::{
    check, Missing, LEGACY_NETWORK_STATUS_ANNOTATION as LEGACY, NETWORK_STATUS_ANNOTATION as NEW,
};

/// The setting that holds the running Longhorn's version (Longhorn 1.2.4 and later).
pub const VERSION_SETTING: &str = "current-longhorn-version";

/// Where the Longhorn version was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionFrom {
    Setting,
    Image { namespace: String, name: String },
}

/// The running Longhorn's version and where it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Longhorn {
    pub version: Version,
    pub from: VersionFrom,
}

/// Why an instance-manager pod has no storage-network IP Longhorn would use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodMiss {
    /// What the init gate's check found missing, in the key(s) this Longhorn reads.
    Gate(Missing),
    /// The network is in `network-status` only, and this Longhorn reads only `networks-status`.
    NewKeyOnly { longhorn: Version },
}

/// What the check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetworkFinding<'a> {
    /// DaemonSets could not be listed (live) and no Multus was found where they could.
    DaemonSetsUnread { reasons: &'a [String], namespaces: &'a [String] },
    /// The snapshot holds no DaemonSets.
    NoDaemonSets,
    /// DaemonSets were read in full and none runs Multus, and no instance manager has the network.
    NoMultus { read: usize },
    /// No DaemonSet runs Multus, yet `attached` instance managers have the network: Multus is
    /// installed on the nodes (a real harness found this), so its version cannot be read.
    MultusOutsideDaemonSets { read: usize, attached: usize, network: &'a str },
    /// A Multus image without a version in its tag.
    MultusUnversioned { ds: &'a DaemonSetImage },
    /// A Multus version was read but Longhorn's was not.
    LonghornUnknown { ds: &'a DaemonSetImage, multus: Version },
    /// Multus and Longhorn, compared; an error when Longhorn reads no key Multus writes.
    Compared { ds: &'a DaemonSetImage, multus: Version, longhorn: Longhorn, network: &'a str },
    /// A running instance manager without a storage-network IP Longhorn would use.
    PodWithoutNetwork { pod: &'a ImPod, network: &'a str, miss: PodMiss },
    /// Running instance managers that have it, by the annotation it was read from.
    PodsAttached { by_key: BTreeMap<&'static str, usize>, network: &'a str },
}

fn writes(w: MultusWrites) -> String {
    match w {
        MultusWrites::LegacyOnly => format!("only {LEGACY}"),
        MultusWrites::Both => format!("{NEW} and {LEGACY}"),
        MultusWrites::NewOnly => format!("only {NEW}"),
    }
}

fn reads(r: LonghornReads) -> String {
    match r {
        LonghornReads::LegacyOnly => format!("only {LEGACY}"),
        LonghornReads::NewThenLegacy => format!("{NEW} (else {LEGACY})"),
    }
}

impl Longhorn {
    fn shown(&self) -> String {
        match &self.from {
            VersionFrom::Setting => format!("Longhorn {} ({VERSION_SETTING})", self.version),
            VersionFrom::Image { namespace, name } => {
                format!("Longhorn {} (image of {namespace}/{name})", self.version)
            }
        }
    }
}

impl NetworkFinding<'_> {
    /// The finding as `check cluster` prints it.
    pub fn render(&self) -> Finding {
        let f = |severity, object: String, message: String, remedy: String| {
            Check::StorageNetwork.finding(severity, object, message, remedy)
        };
        let ds_object = |ds: &DaemonSetImage| format!("daemonset/{}/{}", ds.namespace, ds.name);
        let by_hand = "check the Multus image by hand: kubectl get daemonsets -A -o wide | grep multus";
        match self {
            Self::DaemonSetsUnread { reasons, namespaces } => {
                let instead = if namespaces.is_empty() {
                    String::new()
                } else {
                    format!("; no Multus DaemonSet in {}, which could be read", namespaces.join(", "))
                };
                f(
                    Severity::Info,
                    "daemonsets".into(),
                    format!(
                        "could not read DaemonSets ({}){instead}: the Multus version is not checked",
                        reasons.join("; ")
                    ),
                    format!("grant list on daemonsets.apps cluster-wide to whoever runs check cluster, or {by_hand}"),
                )
            }
            Self::NoDaemonSets => f(
                Severity::Info,
                "daemonsets".into(),
                "the snapshot holds no DaemonSets: the Multus version is not checked".into(),
                "add DaemonSets to the snapshot (kubectl get daemonsets -A; README: cluster snapshots)".into(),
            ),
            Self::NoMultus { read } => f(
                Severity::Warning,
                "daemonsets".into(),
                format!(
                    "storage-network is set but none of the {} runs Multus: instance managers get no storage-network interface",
                    count(*read, "DaemonSet")
                ),
                "install Multus (its DaemonSet runs on every node that runs Longhorn), or clear storage-network".into(),
            ),
            Self::MultusOutsideDaemonSets { read, attached, network } => f(
                Severity::Info,
                "daemonsets".into(),
                format!(
                    "none of the {} runs Multus, yet {} {} an IP on {network}: Multus runs outside a DaemonSet, so its version is not checked",
                    count(*read, "DaemonSet"),
                    count(*attached, "instance manager"),
                    if *attached == 1 { "has" } else { "have" },
                ),
                String::new(),
            ),
            Self::MultusUnversioned { ds } => f(
                Severity::Info,
                ds_object(ds),
                format!("Multus image {} names no version: not compared with Longhorn's", ds.image),
                String::new(),
            ),
            Self::LonghornUnknown { ds, multus } => f(
                Severity::Info,
                ds_object(ds),
                format!(
                    "Multus {multus} writes {}; Longhorn's version could not be read (no {VERSION_SETTING} setting, no longhorn-manager image with a version): not compared",
                    writes(multus_writes(*multus))
                ),
                String::new(),
            ),
            Self::Compared { ds, multus, longhorn, network } => {
                let (w, r) = (multus_writes(*multus), longhorn_reads(longhorn.version));
                let text = format!(
                    "Multus {multus} ({}/{}) writes {}; {} reads {}",
                    ds.namespace,
                    ds.name,
                    writes(w),
                    longhorn.shown(),
                    reads(r)
                );
                let fixed = fixed_in(longhorn.version);
                match (w, r) {
                    (MultusWrites::NewOnly, LonghornReads::LegacyOnly) => f(
                        Severity::Error,
                        ds_object(ds),
                        format!("{text}: every instance manager's storage IP is its pod IP, so {network} carries no replica traffic (longhorn/longhorn#6953)"),
                        format!("upgrade Longhorn to {fixed} or later; until then keep Multus below v4.0.0 (v3.x writes {LEGACY})"),
                    ),
                    (MultusWrites::Both, LonghornReads::LegacyOnly) => f(
                        Severity::Info,
                        ds_object(ds),
                        format!("{text}: Multus v4 writes only {NEW}"),
                        format!("upgrade Longhorn to {fixed} or later before Multus v4"),
                    ),
                    _ => f(Severity::Info, ds_object(ds), text, String::new()),
                }
            }
            Self::PodWithoutNetwork { pod, network, miss } => {
                let node = if pod.node.is_empty() { "its node" } else { pod.node.as_str() };
                let why = match miss {
                    PodMiss::Gate(m) => m.to_string(),
                    PodMiss::NewKeyOnly { longhorn } => {
                        format!("{network} is listed only in {NEW}, which Longhorn {longhorn} does not read")
                    }
                };
                let requested = pod.annotations.contains_key(NETWORKS_ANNOTATION);
                let (hint, remedy) = if requested {
                    (
                        String::new(),
                        format!("check Multus on {node}, then drain {node} (or detach its volumes) and delete the pod: Longhorn recreates it with the network; the init gate (gate.enabled) keeps a new one from starting without it"),
                    )
                } else {
                    (
                        format!(" (the pod does not ask for it: no {NETWORKS_ANNOTATION} annotation)"),
                        format!("drain {node} (or detach its volumes): Longhorn recreates the instance manager with the storage network once none of its instances runs"),
                    )
                };
                f(
                    Severity::Error,
                    format!("pod/{}", pod.name),
                    format!("{} on {node} has no IP on storage network {network}{hint}: {why}; Longhorn uses its pod IP for the replicas and engines there, and rebuilds to and from {node} stall", pod.name),
                    remedy,
                )
            }
            Self::PodsAttached { by_key, network } => {
                let parts: Vec<String> = by_key
                    .iter()
                    .map(|(key, n)| format!("{} with an IP on {network} in {key}", count(*n, "instance manager")))
                    .collect();
                f(Severity::Info, "pods".into(), parts.join("; "), String::new())
            }
        }
    }
}

/// The running Longhorn's version: `current-longhorn-version`, else the longhorn-manager image.
pub fn longhorn_version(inv: &Inventory) -> Option<Longhorn> {
    let from_setting = inv.settings.get(VERSION_SETTING).and_then(|v| Version::parse(v));
    from_setting.map(|version| Longhorn { version, from: VersionFrom::Setting }).or_else(|| {
        inv.network.daemonsets.iter().filter(|d| d.component == Component::LonghornManager).find_map(|d| {
            Version::of_image(&d.image).map(|version| Longhorn {
                version,
                from: VersionFrom::Image { namespace: d.namespace.clone(), name: d.name.clone() },
            })
        })
    })
}

/// The typed findings of the check (none when `storage-network` is empty or absent).
pub fn findings(inv: &Inventory) -> Vec<NetworkFinding<'_>> {
    let Some(network) = inv.settings.get("storage-network").map(|v| v.trim()).filter(|v| !v.is_empty())
    else {
        return Vec::new();
    };
    let net = &inv.network;
    let longhorn = longhorn_version(inv);
    let mut out = Vec::new();
    let pods = pod_findings(inv, network, longhorn.as_ref());
    let attached: usize = pods
        .iter()
        .map(|p| match p {
            NetworkFinding::PodsAttached { by_key, .. } => by_key.values().sum(),
            _ => 0,
        })
        .sum();
    let multus: Vec<&DaemonSetImage> =
        net.daemonsets.iter().filter(|d| d.component == Component::Multus).collect();
    if multus.is_empty() {
        if !net.daemonsets_unread.is_empty() {
            out.push(NetworkFinding::DaemonSetsUnread {
                reasons: &net.daemonsets_unread,
                namespaces: &net.daemonsets_namespaces,
            });
        } else if !net.daemonsets_read {
            out.push(NetworkFinding::NoDaemonSets);
        } else if attached > 0 {
            out.push(NetworkFinding::MultusOutsideDaemonSets {
                read: net.daemonsets_seen,
                attached,
                network,
            });
        } else {
            out.push(NetworkFinding::NoMultus { read: net.daemonsets_seen });
        }
    }
    for ds in multus {
        out.push(match (Version::of_image(&ds.image), &longhorn) {
            (None, _) => NetworkFinding::MultusUnversioned { ds },
            (Some(multus), None) => NetworkFinding::LonghornUnknown { ds, multus },
            (Some(multus), Some(longhorn)) => {
                NetworkFinding::Compared { ds, multus, longhorn: longhorn.clone(), network }
            }
        });
    }
    out.extend(pods);
    out
}

/// The instance-manager pods without the network, then those with it, by key. The pods are
/// read as Longhorn reads them: a name of `namespace/name` (an invalid value is the
/// `settings` check's error, and no pod can match it).
fn pod_findings<'a>(
    inv: &'a Inventory,
    network: &'a str,
    longhorn: Option<&Longhorn>,
) -> Vec<NetworkFinding<'a>> {
    let mut out = Vec::new();
    let Ok(expected) = parse_networks(network, None) else { return out };
    let legacy_only = longhorn.filter(|l| longhorn_reads(l.version) == LonghornReads::LegacyOnly);
    let mut by_key: BTreeMap<&'static str, usize> = BTreeMap::new();
    for pod in inv.network.im_pods.iter().filter(|p| p.phase == "Running" && !p.terminating) {
        match pod_network(pod, &expected, legacy_only.map(|l| l.version)) {
            Ok(key) => *by_key.entry(key).or_default() += 1,
            Err(miss) => out.push(NetworkFinding::PodWithoutNetwork { pod, network, miss }),
        }
    }
    if !by_key.is_empty() {
        out.push(NetworkFinding::PodsAttached { by_key, network });
    }
    out
}

/// The key the pod's storage-network IP is read from, or why there is none. With
/// `legacy_only` (a Longhorn that reads only `networks-status`) only that key is looked at.
/// The interface cannot be looked up from here: only the annotation is checked.
fn pod_network(
    pod: &ImPod,
    expected: &[ExpectedNetwork],
    legacy_only: Option<Version>,
) -> Result<&'static str, PodMiss> {
    let mut annotations = pod.annotations.clone();
    if let Some(longhorn) = legacy_only {
        if annotations.remove(NEW).is_some() && !annotations.contains_key(LEGACY) {
            return Err(PodMiss::NewKeyOnly { longhorn });
        }
    }
    let found = check(expected, &annotations, &|_| true).map_err(PodMiss::Gate)?;
    Ok(found.first().map_or(NEW, |f| f.key))
}

/// The check's findings as `check cluster` prints them.
pub fn storage_network(inv: &Inventory) -> Vec<Finding> {
    findings(inv).iter().map(NetworkFinding::render).collect()
}
