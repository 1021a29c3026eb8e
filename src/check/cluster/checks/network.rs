//! `storage-network`: with the `storage-network` setting set, whether the running Multus writes
//! the status annotation this Longhorn reads (longhorn/longhorn#6953), and which instance-manager
//! pods have no storage-network IP in it (read with the gate's own [`crate::gate::status::check`]).

use std::collections::BTreeMap;

use super::super::finding::{count, Check, Finding, Severity};
use super::super::inventory::Inventory;
use super::super::network::{Component, DaemonSetImage, ImPod};
use super::versions::{fixed_in, longhorn_reads, multus_writes, LonghornReads, MultusWrites, Version};
use crate::gate::networks::{parse_networks, ExpectedNetwork, NETWORKS_ANNOTATION};
use crate::gate::status::{
    check, LEGACY_NETWORK_STATUS_ANNOTATION as LEGACY, NETWORK_STATUS_ANNOTATION as NEW,
};

/// The setting that holds the running Longhorn's version (Longhorn 1.2.4 and later).
pub const VERSION_SETTING: &str = "current-longhorn-version";

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

/// The running Longhorn's version and where it was read, as messages name it:
/// `current-longhorn-version`, else the longhorn-manager image.
fn longhorn_version(inv: &Inventory) -> Option<(Version, String)> {
    let from_setting = inv.settings.get(VERSION_SETTING).and_then(|v| Version::parse(v));
    from_setting.map(|v| (v, format!("Longhorn {v} ({VERSION_SETTING})"))).or_else(|| {
        inv.network.daemonsets.iter().filter(|d| d.component == Component::LonghornManager).find_map(|d| {
            let v = Version::of_image(&d.image)?;
            Some((v, format!("Longhorn {v} (image of {}/{})", d.namespace, d.name)))
        })
    })
}

/// The check's findings (none when `storage-network` is empty or absent).
pub fn storage_network(inv: &Inventory) -> Vec<Finding> {
    let Some(network) = inv.settings.get("storage-network").map(|v| v.trim()).filter(|v| !v.is_empty())
    else {
        return Vec::new();
    };
    let net = &inv.network;
    let longhorn = longhorn_version(inv);
    let (pods, attached) = pod_findings(inv, network, longhorn.as_ref().map(|l| l.0));
    let multus: Vec<&DaemonSetImage> =
        net.daemonsets.iter().filter(|d| d.component == Component::Multus).collect();
    let mut out = Vec::new();
    if multus.is_empty() {
        let info = |message: String, remedy: String| {
            Check::StorageNetwork.finding(Severity::Info, "daemonsets", message, remedy)
        };
        out.push(if !net.daemonsets_unread.is_empty() {
            let instead = if net.daemonsets_namespaces.is_empty() {
                String::new()
            } else {
                format!(
                    "; no Multus DaemonSet in {}, which could be read",
                    net.daemonsets_namespaces.join(", ")
                )
            };
            info(
                format!(
                    "could not read DaemonSets ({}){instead}: the Multus version is not checked",
                    net.daemonsets_unread.join("; ")
                ),
                "grant list on daemonsets.apps cluster-wide to whoever runs check cluster, or check the Multus image by hand: kubectl get daemonsets -A -o wide | grep multus".into(),
            )
        } else if !net.daemonsets_read {
            info(
                "the snapshot holds no DaemonSets: the Multus version is not checked".into(),
                "add DaemonSets to the snapshot (kubectl get daemonsets -A; README: cluster snapshots)".into(),
            )
        } else if attached > 0 {
            info(
                format!(
                    "none of the {} runs Multus, yet {} {} an IP on {network}: Multus runs outside a DaemonSet, so its version is not checked",
                    count(net.daemonsets_seen, "DaemonSet"),
                    count(attached, "instance manager"),
                    if attached == 1 { "has" } else { "have" },
                ),
                String::new(),
            )
        } else {
            Check::StorageNetwork.finding(
                Severity::Warning,
                "daemonsets",
                format!(
                    "storage-network is set but none of the {} runs Multus: instance managers get no storage-network interface",
                    count(net.daemonsets_seen, "DaemonSet")
                ),
                "install Multus (its DaemonSet runs on every node that runs Longhorn), or clear storage-network",
            )
        });
    }
    for ds in multus {
        out.push(multus_finding(ds, longhorn.as_ref(), network));
    }
    out.extend(pods);
    out
}

/// A Multus DaemonSet's version compared with Longhorn's: an error when Longhorn reads no key
/// Multus writes.
fn multus_finding(ds: &DaemonSetImage, longhorn: Option<&(Version, String)>, network: &str) -> Finding {
    let object = format!("daemonset/{}/{}", ds.namespace, ds.name);
    let info = |message: String| Check::StorageNetwork.finding(Severity::Info, object.clone(), message, "");
    let Some(multus) = Version::of_image(&ds.image) else {
        return info(format!("Multus image {} names no version: not compared with Longhorn's", ds.image));
    };
    let Some((longhorn, shown)) = longhorn else {
        return info(format!(
            "Multus {multus} writes {}; Longhorn's version could not be read (no {VERSION_SETTING} setting, no longhorn-manager image with a version): not compared",
            writes(multus_writes(multus))
        ));
    };
    let (w, r) = (multus_writes(multus), longhorn_reads(*longhorn));
    let text = format!(
        "Multus {multus} ({}/{}) writes {}; {shown} reads {}",
        ds.namespace,
        ds.name,
        writes(w),
        reads(r)
    );
    let fixed = fixed_in(*longhorn);
    match (w, r) {
        (MultusWrites::NewOnly, LonghornReads::LegacyOnly) => Check::StorageNetwork.finding(
            Severity::Error,
            object,
            format!("{text}: every instance manager's storage IP is its pod IP, so {network} carries no replica traffic (longhorn/longhorn#6953)"),
            format!("upgrade Longhorn to {fixed} or later; until then keep Multus below v4.0.0 (v3.x writes {LEGACY})"),
        ),
        (MultusWrites::Both, LonghornReads::LegacyOnly) => Check::StorageNetwork.finding(
            Severity::Info,
            object,
            format!("{text}: Multus v4 writes only {NEW}"),
            format!("upgrade Longhorn to {fixed} or later before Multus v4"),
        ),
        _ => info(text),
    }
}

/// The running instance-manager pods without the network, then those with it, by key; and how
/// many have it. The pods are read as Longhorn reads them: a name of `namespace/name` (an
/// invalid value is the `settings` check's error, and no pod can match it).
fn pod_findings(inv: &Inventory, network: &str, longhorn: Option<Version>) -> (Vec<Finding>, usize) {
    let mut out = Vec::new();
    let Ok(expected) = parse_networks(network, None) else { return (out, 0) };
    let legacy_only = longhorn.filter(|v| longhorn_reads(*v) == LonghornReads::LegacyOnly);
    let mut by_key: BTreeMap<&'static str, usize> = BTreeMap::new();
    for pod in inv.network.im_pods.iter().filter(|p| p.phase == "Running" && !p.terminating) {
        match pod_network(pod, &expected, legacy_only, network) {
            Ok(key) => *by_key.entry(key).or_default() += 1,
            Err(why) => out.push(pod_without_network(pod, network, &why)),
        }
    }
    if !by_key.is_empty() {
        let parts: Vec<String> = by_key
            .iter()
            .map(|(key, n)| format!("{} with an IP on {network} in {key}", count(*n, "instance manager")))
            .collect();
        out.push(Check::StorageNetwork.finding(Severity::Info, "pods", parts.join("; "), ""));
    }
    (out, by_key.values().sum())
}

/// A running instance manager without a storage-network IP Longhorn would use, and why.
fn pod_without_network(pod: &ImPod, network: &str, why: &str) -> Finding {
    let node = if pod.node.is_empty() { "its node" } else { pod.node.as_str() };
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
    Check::StorageNetwork.finding(
        Severity::Error,
        format!("pod/{}", pod.name),
        format!("{} on {node} has no IP on storage network {network}{hint}: {why}; Longhorn uses its pod IP for the replicas and engines there, and rebuilds to and from {node} stall", pod.name),
        remedy,
    )
}

/// The key the pod's storage-network IP is read from, or why there is none: what the init
/// gate's check finds missing, or, with `legacy_only` (a Longhorn that reads only
/// `networks-status`), the network listed only in `network-status`. The interface cannot be
/// looked up from here: only the annotation is checked.
fn pod_network(
    pod: &ImPod,
    expected: &[ExpectedNetwork],
    legacy_only: Option<Version>,
    network: &str,
) -> Result<&'static str, String> {
    let mut annotations = pod.annotations.clone();
    if let Some(longhorn) = legacy_only {
        if annotations.remove(NEW).is_some() && !annotations.contains_key(LEGACY) {
            return Err(format!(
                "{network} is listed only in {NEW}, which Longhorn {longhorn} does not read"
            ));
        }
    }
    let found = check(expected, &annotations, &|_| true).map_err(|m| m.to_string())?;
    Ok(found.first().map_or(NEW, |f| f.key))
}
