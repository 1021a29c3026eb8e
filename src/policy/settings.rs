//! Settings that remove protection (`rule: settings`): `node-drain-policy` and
//! `storage-network`. These are always warnings, whatever `replicas.action` says.

use crate::admission::AdmissionRequest;
use crate::cluster::Setting;
use crate::decision::{Decision, MAX_WARNING_LEN};
use crate::policy::replicas::{self, clip_middle, object_name, PREFIX};
use crate::policy::{DrainAction, Policy};

/// `settings.longhorn.io` CREATE/UPDATE of `new` (`old`: an UPDATE's old object):
/// `default-replica-count` in [`replicas::setting`], `node-drain-policy` and
/// `storage-network` here.
pub fn setting(req: &AdmissionRequest, new: &Setting, old: Option<&Setting>, policy: &Policy) -> Decision {
    let name = object_name(req, &new.metadata);
    if replicas::trusted_rewrite(req, policy, old.is_some_and(|o| o.value == new.value)) {
        return Decision::allow().rule(if name == replicas::DEFAULT_REPLICA_COUNT {
            "replicas"
        } else {
            "settings"
        });
    }
    if name == replicas::DEFAULT_REPLICA_COUNT {
        return replicas::setting(req, new, old, policy);
    }
    let value = new.value.as_str();
    let old_value = old.map(|o| o.value.as_str());
    let warning = match name {
        "node-drain-policy" => node_drain_policy(value, policy),
        "storage-network" if old_value != Some(value) => storage_network(value, policy),
        _ => None,
    };
    Decision::warn(warning.into_iter().collect()).rule("settings")
}

fn node_drain_policy(value: &str, policy: &Policy) -> Option<String> {
    if value != "always-allow" {
        return None;
    }
    let ours = match policy.drain.action {
        DrainAction::Enforce => "longhorn-guard still blocks unsafe ones",
        DrainAction::Warn => "drain.action=warn: nothing blocks them",
        DrainAction::Off => "drain.action=off: nothing blocks them",
    };
    Some(format!("{PREFIX}node-drain-policy=always-allow: Longhorn stops blocking drains; {ours}"))
}

/// True for `<namespace>/<name>` with two non-empty parts and no spaces.
fn is_namespaced_name(v: &str) -> bool {
    match v.split_once('/') {
        Some((ns, name)) => {
            !ns.is_empty() && !name.is_empty() && !name.contains('/') && !v.contains(char::is_whitespace)
        }
        None => false,
    }
}

fn storage_network(value: &str, policy: &Policy) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    if !is_namespaced_name(value) {
        // Longhorn rejects a value that does not split into two parts at '/'. It accepts
        // `/<name>`, but its pods then ask Multus for `<name>` in their own namespace, which
        // Multus reports as `longhorn-system/<name>`: Longhorn looks for `/<name>` and never
        // finds it, so it silently uses the pod IP, and no gate can tell.
        let text = match value.split('/').collect::<Vec<_>>()[..] {
            ["", name] if !name.is_empty() && !name.contains(char::is_whitespace) => {
                "has no namespace: Longhorn never matches it and uses the pod IP"
            }
            [_, _] => "is not <namespace>/<name>; instance managers cannot use it",
            _ => "is not <namespace>/<name>; Longhorn rejects it",
        };
        let budget =
            MAX_WARNING_LEN.saturating_sub(PREFIX.len() + "storage-network=\"\" ".len() + text.len());
        return Some(format!("{PREFIX}storage-network=\"{}\" {text}", clip_middle(value, budget)));
    }
    let gate = if policy.gate.enabled { "the init gate guards start-up" } else { "the init gate is off" };
    let text = format!("recreates all instance managers; {gate}");
    let budget = MAX_WARNING_LEN.saturating_sub(PREFIX.len() + "storage-network=: ".len() + text.len());
    Some(format!("{PREFIX}storage-network={}: {text}", clip_middle(value, budget)))
}
