//! Pure logic of the init gate's readiness check: the Multus status annotations read the way
//! Longhorn picks a storage IP from them, and the messages. No I/O here; the check takes the
//! interface lookup as a function.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::networks::{format_networks, valid_interface_name, ExpectedNetwork};

/// The status annotation Multus writes (v3.4.1 and later).
pub const NETWORK_STATUS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/network-status";
/// The legacy status annotation (Multus up to v3.9; not written by v4).
pub const LEGACY_NETWORK_STATUS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks-status";

/// One entry of the network-status annotation: the fields Longhorn decodes (a `null` name
/// reads as empty, as Go decodes it).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct NetworkStatus {
    #[serde(default, deserialize_with = "crate::cluster::meta::null_as_empty")]
    pub name: String,
    #[serde(default)]
    pub interface: Option<String>,
    #[serde(default)]
    pub ips: Option<Vec<String>>,
}

/// A network found ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// `namespace/name`.
    pub network: String,
    /// The interface checked under `/sys/class/net` (the requested one, else the reported one).
    pub interface: Option<String>,
    /// The IP Longhorn would pick: the first of the entry's IPs sorted as strings.
    pub ip: String,
    /// The annotation key it was read from.
    pub key: &'static str,
}

/// What is still missing for the storage network to be usable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    #[error("the pod's annotations could not be read ({reason})")]
    Unreadable { reason: String },
    #[error(
        "annotation {NETWORK_STATUS_ANNOTATION} is absent (and legacy {LEGACY_NETWORK_STATUS_ANNOTATION} too): \
         Multus has not attached this pod's networks"
    )]
    AnnotationAbsent,
    #[error("annotation {key} is not a JSON list of network statuses: {error}")]
    Malformed { key: &'static str, error: String },
    /// An entry without a name shows as `""`.
    #[error("network {network} is not listed in annotation {key} (listed: {})", listed_names(listed))]
    NotListed { network: String, key: &'static str, listed: Vec<String> },
    #[error("network {network} is listed in annotation {key} with no IP")]
    NoIp { network: String, key: &'static str },
    #[error(
        "interface {interface} of network {network} does not exist in the pod (/sys/class/net/{interface} is missing)"
    )]
    InterfaceAbsent { network: String, interface: String },
}

fn listed_names(listed: &[String]) -> String {
    if listed.is_empty() {
        return "none".to_string();
    }
    listed.iter().map(|n| if n.is_empty() { "\"\"" } else { n }).collect::<Vec<_>>().join(", ")
}

/// Checks the pod's annotations the way Longhorn's `GetIPFromPodByCNISetting` reads them:
/// `network-status` if present, else the legacy `networks-status`; an entry whose `name`
/// equals `namespace/name` with at least one IP. As a local cross-check, `interface_exists`
/// must confirm the interface (the requested one, else the one the entry reports).
pub fn check(
    expected: &[ExpectedNetwork],
    annotations: &BTreeMap<String, String>,
    interface_exists: &dyn Fn(&str) -> bool,
) -> Result<Vec<Found>, Missing> {
    let (key, raw) = [NETWORK_STATUS_ANNOTATION, LEGACY_NETWORK_STATUS_ANNOTATION]
        .into_iter()
        .find_map(|key| Some((key, annotations.get(key)?)))
        .ok_or(Missing::AnnotationAbsent)?;
    // A `null` element decodes, in Go, to an entry with no name: it matches nothing.
    // Keys match fields ignoring case, as Go decodes them (`super::go_json`).
    let malformed =
        |e: serde_json::Error| Missing::Malformed { key, error: crate::decision::clip(&e.to_string(), 100) };
    let mut value: serde_json::Value = serde_json::from_str(raw).map_err(malformed)?;
    super::go_json::fold_field_names(&mut value, &["name", "interface", "ips"]);
    let statuses: Vec<NetworkStatus> = serde_json::from_value::<Vec<Option<NetworkStatus>>>(value)
        .map_err(malformed)?
        .into_iter()
        .flatten()
        .collect();
    let mut found = Vec::with_capacity(expected.len());
    for want in expected {
        let network = want.full_name();
        let named: Vec<&NetworkStatus> = statuses.iter().filter(|s| s.name == network).collect();
        if named.is_empty() {
            let listed = statuses.iter().map(|s| s.name.clone()).collect();
            return Err(Missing::NotListed { network, key, listed });
        }
        // As Longhorn does: an entry of that name without an IP is skipped for a later one.
        let with_ip = named.iter().find_map(|e| {
            let mut ips: Vec<&String> = e.ips.iter().flatten().filter(|ip| !ip.is_empty()).collect();
            ips.sort();
            ips.first().map(|ip| (*e, (*ip).clone()))
        });
        let Some((entry, ip)) = with_ip else {
            return Err(Missing::NoIp { network, key });
        };
        let interface =
            want.interface.clone().or_else(|| entry.interface.clone().filter(|i| valid_interface_name(i)));
        if let Some(iface) = interface.as_ref().filter(|i| !interface_exists(i)) {
            return Err(Missing::InterfaceAbsent { network, interface: iface.clone() });
        }
        found.push(Found { network, interface, ip, key });
    }
    Ok(found)
}

/// The one log line of a successful gate.
pub fn ready_line(found: &[Found], origin: &str) -> String {
    let parts: Vec<String> = found
        .iter()
        .map(|f| {
            let iface = f.interface.as_deref().unwrap_or("(interface not named)");
            format!("{} on {iface} with IP {}", f.network, f.ip)
        })
        .collect();
    let key = found.first().map(|f| f.key).unwrap_or(NETWORK_STATUS_ANNOTATION);
    format!("storage network ready: {} (from {key}, read from {origin})", parts.join("; "))
}

/// The failure message at the deadline: what was missing and why it matters.
pub fn timeout_message(networks: &[ExpectedNetwork], waited: Duration, missing: &Missing) -> String {
    format!(
        "storage network {} not ready after {}: {missing}. Without a storage-network IP Longhorn uses the \
         pod IP for this node's replicas and rebuilds towards this node stall at 0%. Failing the pod; Longhorn \
         recreates it, and the new pod gets the network once Multus is ready on this node.",
        format_networks(networks),
        humantime::format_duration(shown_wait(waited)),
    )
}

/// `waited` as the message shows it: whole seconds, or milliseconds under a second (a
/// `gate.timeout` of `500ms` reads as such).
fn shown_wait(waited: Duration) -> Duration {
    if waited < Duration::from_secs(1) {
        Duration::from_millis((waited.as_millis() as u64).max(1))
    } else {
        Duration::from_secs(waited.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::kubelet_file::parse_kubelet_map;
    use crate::gate::networks::tests::net;
    use crate::gate::networks::{parse_networks, NETWORKS_ANNOTATION};
    use serde_json::json;

    fn fixture(path: &str) -> serde_json::Value {
        let full = format!("{}/../shared/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(full).unwrap()).unwrap()
    }

    #[test]
    fn statuses_are_read_as_longhorns_go_code_reads_them() {
        // A null name reads as empty; an entry without an IP is skipped for a later one.
        let status = r#"[{"name": null, "ips": ["10.0.0.1"]},
            {"name": "kube-system/storage-net", "interface": "lhnet1"},
            {"name": "kube-system/storage-net", "interface": "lhnet1", "ips": ["192.168.9.7"]}]"#;
        let annotations = BTreeMap::from([(NETWORK_STATUS_ANNOTATION.to_string(), status.to_string())]);
        let found =
            check(&[net("kube-system", "storage-net", Some("lhnet1"))], &annotations, &|_| true).unwrap();
        assert_eq!(found[0].ip, "192.168.9.7");
    }

    #[test]
    fn the_11639_pod_is_missing_the_annotation() {
        let f = fixture("longhorn/multus-network-status-bad-11639.json");
        let ann: BTreeMap<String, String> =
            serde_json::from_value(f["metadata"]["annotations"].clone()).unwrap();
        let want = parse_networks(&ann[NETWORKS_ANNOTATION], Some("longhorn-system")).unwrap();
        let missing = check(&want, &ann, &|_| true).unwrap_err();
        assert_eq!(missing, Missing::AnnotationAbsent);
        let msg = timeout_message(&want, Duration::from_secs(60), &missing);
        assert!(msg.starts_with("storage network harvester-system/storagenetwork-svrwv@lhnet1 not ready after 1m: annotation k8s.v1.cni.cncf.io/network-status is absent"), "{msg}");
        // Whole seconds, or milliseconds under a second (`gate.timeout: 500ms`).
        for (waited, shown) in [(Duration::from_millis(500), "500ms"), (Duration::from_millis(60_400), "1m")]
        {
            let msg = timeout_message(&want, waited, &missing);
            assert!(msg.contains(&format!("not ready after {shown}:")), "{msg}");
        }
    }

    #[test]
    fn check_mirrors_longhorn() {
        let want = [net("kube-system", "storage-net", Some("lhnet1"))];
        let entry =
            |name: &str, ips: serde_json::Value| json!({"name": name, "interface": "lhnet1", "ips": ips});
        const S: &str = NETWORK_STATUS_ANNOTATION;
        let mut ann = BTreeMap::new();

        // Legacy key only: accepted.
        ann.insert(
            LEGACY_NETWORK_STATUS_ANNOTATION.to_string(),
            json!([entry("kube-system/storage-net", json!(["10.0.0.9", "10.0.0.10"]))]).to_string(),
        );
        let found = check(&want, &ann, &|_| true).unwrap();
        // Longhorn sorts the IPs as strings and takes the first.
        assert_eq!((found[0].ip.as_str(), found[0].key), ("10.0.0.10", LEGACY_NETWORK_STATUS_ANNOTATION));

        // The new key wins over the legacy key, even when it is malformed (Longhorn does not fall back).
        ann.insert(S.into(), "{not json".into());
        assert!(matches!(
            check(&want, &ann, &|_| true).unwrap_err(),
            Missing::Malformed { key: NETWORK_STATUS_ANNOTATION, .. }
        ));

        // A null element decodes (as in Go) to an entry with no name, shown as `""`.
        ann.insert(S.into(), json!([null, entry("", json!(["1.2.3.4"]))]).to_string());
        let m = check(&want, &ann, &|_| true).unwrap_err();
        assert!(m.to_string().ends_with(r#"(listed: "")"#), "{m}");
        ann.insert(S.into(), json!([null, entry("kube-system/storage-net", json!(["1.2.3.4"]))]).to_string());
        assert_eq!(check(&want, &ann, &|_| true).unwrap()[0].ip, "1.2.3.4");

        // Listed by its bare name only: not what Longhorn compares.
        ann.insert(S.into(), json!([entry("storage-net", json!(["1.2.3.4"]))]).to_string());
        assert!(matches!(check(&want, &ann, &|_| true).unwrap_err(), Missing::NotListed { .. }));

        // No IP (empty, null, empty string).
        for ips in [json!([]), json!(null), json!([""])] {
            ann.insert(S.into(), json!([entry("kube-system/storage-net", ips)]).to_string());
            assert_eq!(
                check(&want, &ann, &|_| true).unwrap_err(),
                Missing::NoIp { network: "kube-system/storage-net".into(), key: NETWORK_STATUS_ANNOTATION }
            );
        }

        // No interface requested: the one Multus reports is cross-checked.
        ann.insert(S.into(), json!([entry("kube-system/storage-net", json!(["1.2.3.4"]))]).to_string());
        let bare = [net("kube-system", "storage-net", None)];
        assert!(matches!(
            check(&bare, &ann, &|i| i != "lhnet1").unwrap_err(),
            Missing::InterfaceAbsent { .. }
        ));
        assert_eq!(check(&bare, &ann, &|_| true).unwrap()[0].interface.as_deref(), Some("lhnet1"));
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(text in "\\PC*", value in ".*") {
            let _ = parse_kubelet_map(&text);
            let _ = parse_networks(&text, Some("longhorn-system"));
            let mut ann = BTreeMap::new();
            ann.insert(NETWORK_STATUS_ANNOTATION.to_string(), value);
            let want = [net("kube-system", "storage-net", Some("lhnet1"))];
            let _ = check(&want, &ann, &|_| true);
        }

        #[test]
        fn go_quoted_values_round_trip(value in "\\PC*") {
            // strconv.Quote for printable text: only backslash and quote are escaped.
            let quoted = format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""));
            let map = parse_kubelet_map(&format!("k={quoted}")).unwrap();
            proptest::prop_assert_eq!(&map["k"], &value);
        }
    }
}
