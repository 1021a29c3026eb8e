//! Snapshots of real Longhorn v1.12.1 beside real Multus (v3.9.3 and v4.2.4, both built from
//! their public sources), taken by `make e2e-longhorn-multus` while the seed's race held and
//! after its remedy (`tests/data/multus-real/README.md`): `check cluster`'s storage-network
//! check, and the gate reading the annotations real Multus wrote the way Longhorn reads them.

use std::collections::BTreeMap;
use std::time::SystemTime;

use longhorn_guard::check::cluster::{load_snapshot, Check, Report, Severity};
use longhorn_guard::gate::networks::parse_networks;
use longhorn_guard::gate::status::{check, LEGACY_NETWORK_STATUS_ANNOTATION, NETWORK_STATUS_ANNOTATION};
use longhorn_guard::policy::Policy;
use serde_json::Value;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/multus-real");
const VERSIONS: [&str; 2] = ["v3.9.3", "v4.2.4"];
/// The instance manager on node-3, the node the harness reboots without the gate.
const RACED: &str = "instance-manager-d9d93a9826e614fac02054c680bffe6c";

fn path(version: &str, when: &str) -> String {
    format!("{DIR}/{version}-{when}.json")
}

fn report(version: &str, when: &str) -> Report {
    let (inv, view) = load_snapshot(std::path::Path::new(&path(version, when))).unwrap();
    Report::build(&inv, &view, &Policy::default(), SystemTime::now())
}

/// `(severity, object, message)` of the storage-network findings.
fn network(r: &Report) -> Vec<(Severity, String, String)> {
    r.findings
        .iter()
        .filter(|f| f.check == Check::StorageNetwork)
        .map(|f| (f.severity, f.object.clone(), f.message.clone()))
        .collect()
}

fn items(version: &str, when: &str) -> Vec<Value> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path(version, when)).unwrap()).unwrap();
    doc["items"].as_array().unwrap().clone()
}

fn instance_managers(items: &[Value]) -> impl Iterator<Item = &Value> {
    items.iter().filter(|o| {
        o["kind"] == "Pod" && o["metadata"]["labels"]["longhorn.io/component"] == "instance-manager"
    })
}

fn annotations(pod: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(pod["metadata"]["annotations"].clone()).unwrap()
}

/// While the race holds, the pod Longhorn made without Multus is the one error, with the reason
/// Longhorn itself logged ("Missing ... annotation, use pod IP").
#[test]
fn the_raced_instance_manager_is_the_one_storage_network_error() {
    for v in VERSIONS {
        let r = report(v, "raced");
        let errors: Vec<_> = network(&r).into_iter().filter(|f| f.0 == Severity::Error).collect();
        assert_eq!(errors.len(), 1, "{v}: {errors:?}");
        assert_eq!(errors[0].1, format!("pod/{RACED}"), "{v}");
        assert_eq!(
            errors[0].2,
            format!(
                "{RACED} on node-3 has no IP on storage network longhorn-system/storage: annotation \
                 k8s.v1.cni.cncf.io/network-status is absent (and legacy k8s.v1.cni.cncf.io/networks-status \
                 too): Multus has not attached this pod's networks; Longhorn uses its pod IP for the replicas \
                 and engines there, and rebuilds to and from node-3 stall"
            ),
            "{v}"
        );
        assert_eq!(r.exit_code(), 1, "{v}");
    }
}

/// After the pod is made again with Multus in place, no instance manager lacks the network.
#[test]
fn after_the_remedy_no_instance_manager_lacks_the_network() {
    for v in VERSIONS {
        let r = report(v, "remedied");
        let bad: Vec<_> = network(&r).into_iter().filter(|f| f.0 != Severity::Info).collect();
        assert_eq!(bad, vec![], "{v}");
    }
}

/// The gate finds, in what real Multus wrote, the very storage IP Longhorn gave the replicas on
/// that node; v3.9.3's legacy key alone gives the same answer.
#[test]
fn the_gate_reads_real_multus_status_as_longhorn_does() {
    for v in VERSIONS {
        for when in ["raced", "remedied"] {
            let items = items(v, when);
            let mut checked = 0;
            for pod in instance_managers(&items) {
                let node = pod["spec"]["nodeName"].as_str().unwrap();
                let ann = annotations(pod);
                let want =
                    parse_networks(&ann["k8s.v1.cni.cncf.io/networks"], Some("longhorn-system")).unwrap();
                let Ok(found) = check(&want, &ann, &|i| i == "lhnet1") else {
                    assert_eq!((when, pod["metadata"]["name"].as_str()), ("raced", Some(RACED)), "{v}");
                    continue;
                };
                assert_eq!(found.len(), 1, "{v} {when} {node}");
                assert_eq!(found[0].key, NETWORK_STATUS_ANNOTATION, "{v} {when} {node}");
                let replicas: Vec<&str> = items
                    .iter()
                    .filter(|o| o["kind"] == "Replica" && o["spec"]["nodeID"] == node)
                    .filter_map(|o| o["status"]["storageIP"].as_str())
                    .collect();
                for ip in &replicas {
                    assert_eq!(*ip, found[0].ip, "{v} {when}: a replica on {node}");
                }
                checked += replicas.len();
                let legacy = ann.get(LEGACY_NETWORK_STATUS_ANNOTATION);
                assert_eq!(legacy.is_some(), v == "v3.9.3", "{v}: networks-status is written by v3 only");
                if let Some(legacy) = legacy {
                    let old =
                        BTreeMap::from([(LEGACY_NETWORK_STATUS_ANNOTATION.to_string(), legacy.clone())]);
                    let found_old = check(&want, &old, &|i| i == "lhnet1").unwrap();
                    assert_eq!(
                        (found_old[0].key, &found_old[0].ip),
                        (LEGACY_NETWORK_STATUS_ANNOTATION, &found[0].ip)
                    );
                }
            }
            assert!(checked >= 2, "{v} {when}: replicas with a storage IP compared: {checked}");
        }
    }
}
