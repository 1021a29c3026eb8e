//! The networks an instance-manager pod asks Multus for: the `k8s.v1.cni.cncf.io/networks`
//! annotation in either of Multus' forms, and the comma form the gate's `--networks` takes.
//! No I/O here.

use std::fmt;

use serde::Deserialize;

/// The request annotation Longhorn sets on instance-manager pods when the storage network is on.
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";

/// One network the pod requested: `namespace/name`, optionally on a named interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedNetwork {
    pub namespace: String,
    pub name: String,
    pub interface: Option<String>,
}

impl ExpectedNetwork {
    /// `namespace/name`: what Multus writes as `name` in the network status, and what Longhorn
    /// compares with its `storage-network` setting.
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl fmt::Display for ExpectedNetwork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)?;
        if let Some(iface) = &self.interface {
            write!(f, "@{iface}")?;
        }
        Ok(())
    }
}

/// Renders networks in the short comma form, `ns/name@iface,ns2/name2`; it parses back with
/// [`parse_networks`].
pub fn format_networks(networks: &[ExpectedNetwork]) -> String {
    networks.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

/// Why a networks annotation (or `--networks` value) cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworksError {
    #[error("not a JSON list of networks: {0}")]
    Json(String),
    #[error("entry {index} has no name")]
    NoName { index: usize },
    #[error("entry {entry:?} is not of the form [namespace/]name[@interface]")]
    BadEntry { entry: String },
    #[error("network {network:?} has no namespace and the pod namespace is unknown")]
    NoNamespace { network: String },
    #[error("interface name {0:?} is not a valid Linux interface name")]
    BadInterface(String),
}

#[derive(Deserialize)]
struct SelectionElement {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    interface: Option<String>,
}

/// Parses the `k8s.v1.cni.cncf.io/networks` annotation in either of Multus' forms: the JSON list
/// Longhorn writes (`[{"namespace": "kube-system", "name": "storage-net", "interface": "lhnet1"}]`)
/// or the comma form (`ns/name@iface,name2`). A name without namespace is in `default_namespace`.
/// An empty value requests no networks.
pub fn parse_networks(
    value: &str,
    default_namespace: Option<&str>,
) -> Result<Vec<ExpectedNetwork>, NetworksError> {
    let text = value.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let ns_for = |network: &str, ns: Option<String>| -> Result<String, NetworksError> {
        match ns.filter(|n| !n.is_empty()) {
            Some(n) => Ok(n),
            None => default_namespace
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .ok_or_else(|| NetworksError::NoNamespace { network: network.to_string() }),
        }
    };
    let mut out = Vec::new();
    // Multus reads the value as JSON when it holds any of `[{"` (and then only a list parses).
    if text.contains(['[', '{', '"']) {
        let json = |e: serde_json::Error| NetworksError::Json(e.to_string());
        let mut value: serde_json::Value = serde_json::from_str(text).map_err(json)?;
        // Keys match fields ignoring case, as Multus decodes them (`super::go_json`).
        super::go_json::fold_field_names(&mut value, &["name", "namespace", "interface"]);
        let elements: Vec<SelectionElement> = serde_json::from_value(value).map_err(json)?;
        for (index, el) in elements.into_iter().enumerate() {
            let name = el.name.filter(|n| !n.is_empty()).ok_or(NetworksError::NoName { index })?;
            // An empty namespace is the pod's, as Multus reads it (Longhorn writes one for a
            // `storage-network` setting of `/<name>`).
            let namespace = el.namespace.filter(|n| !n.is_empty());
            if !valid_name_part(&name) || namespace.as_deref().is_some_and(|n| !valid_name_part(n)) {
                return Err(NetworksError::BadEntry { entry: name });
            }
            let namespace = ns_for(&name, namespace)?;
            let interface = el.interface.filter(|i| !i.is_empty());
            check_interface(interface.as_deref())?;
            out.push(ExpectedNetwork { namespace, name, interface });
        }
        return Ok(out);
    }
    for raw in text.split(',') {
        let entry = raw.trim();
        let bad = || NetworksError::BadEntry { entry: entry.to_string() };
        let (target, interface) = match entry.split_once('@') {
            Some((t, i)) => (t, Some(i.to_string())),
            None => (entry, None),
        };
        let (namespace, name) = match target.split_once('/') {
            Some((ns, n)) => (Some(ns.to_string()), n),
            None => (None, target),
        };
        if !valid_name_part(name)
            || namespace.as_deref().is_some_and(|n| !valid_name_part(n))
            || interface.as_deref().is_some_and(|i| i.is_empty() || i.contains('@'))
        {
            return Err(bad());
        }
        check_interface(interface.as_deref())?;
        let namespace = ns_for(name, namespace)?;
        out.push(ExpectedNetwork { namespace, name: name.to_string(), interface });
    }
    Ok(out)
}

/// A namespace or NetworkAttachmentDefinition name: a Kubernetes object name (lower-case
/// alphanumerics, `-` and `.`, alphanumeric at both ends, at most 253 bytes).
fn valid_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 253
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

fn check_interface(iface: Option<&str>) -> Result<(), NetworksError> {
    match iface {
        Some(i) if !valid_interface_name(i) => Err(NetworksError::BadInterface(i.to_string())),
        _ => Ok(()),
    }
}

/// A Linux interface name as the kernel accepts it (`dev_valid_name`): 1..15 bytes, not `.`
/// or `..`, no `/`, `:` or whitespace. Only such names are looked up under `/sys/class/net`.
pub fn valid_interface_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        // `,` and `@` separate networks and interfaces in --networks.
        && !name.contains(['/', ':', ',', '@'])
        && !name.chars().any(char::is_whitespace)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::gate) fn net(ns: &str, name: &str, iface: Option<&str>) -> ExpectedNetwork {
        ExpectedNetwork { namespace: ns.into(), name: name.into(), interface: iface.map(Into::into) }
    }

    #[test]
    fn networks_comma_form() {
        let got = parse_networks(" kube-system/storage-net@lhnet1 , other,ns2/n2 ", Some("longhorn-system"))
            .unwrap();
        assert_eq!(
            got,
            vec![
                net("kube-system", "storage-net", Some("lhnet1")),
                net("longhorn-system", "other", None),
                net("ns2", "n2", None),
            ]
        );
        assert_eq!(format_networks(&got), "kube-system/storage-net@lhnet1,longhorn-system/other,ns2/n2");
        assert_eq!(parse_networks(&format_networks(&got), None).unwrap(), got);
        assert_eq!(parse_networks("  ", None).unwrap(), vec![]);
    }

    #[test]
    fn bad_networks_are_errors() {
        for (v, want) in [
            ("[{\"name\": ", "not a JSON list"),
            // Multus reads any value with `[`, `{` or `"` as JSON, and only a list parses.
            ("{\"name\": \"x\"}", "not a JSON list"),
            ("storage-net\"", "not a JSON list"),
            ("[{\"namespace\": \"[x\", \"name\": \"y\"}]", "is not of the form"),
            ("[{\"name\": \"Storage_Net\"}]", "is not of the form"),
            ("[{\"namespace\": \"\", \"name\": \"y\"}]", "has no namespace"),
            ("kube-system/Storage-Net", "is not of the form"),
            ("-a/b", "is not of the form"),
            ("[{\"namespace\": \"a\"}]", "entry 0 has no name"),
            ("a/b@x@y", "is not of the form"),
            ("a/b@", "is not of the form"),
            ("x/a,,x/b", "is not of the form"),
            ("a/b@../../etc", "not a valid Linux interface name"),
            ("a/b@averyveryverylongname", "not a valid Linux interface name"),
        ] {
            let err = parse_networks(v, None).unwrap_err().to_string();
            assert!(err.contains(want), "{v:?}: {err}");
        }
        // With the pod's namespace known, an empty one is the pod's.
        let got =
            parse_networks(r#"[{"namespace": "", "name": "storage-net"}]"#, Some("longhorn-system")).unwrap();
        assert_eq!(got[0].namespace, "longhorn-system");
    }
}
