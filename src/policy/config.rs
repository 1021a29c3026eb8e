//! The policy file: YAML, every field optional with a documented default, unknown fields
//! rejected. The keys are a contract (README "Policy file").

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a policy file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// The whole policy. `Policy::default()` is what runs without `--policy`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Policy {
    #[serde(deserialize_with = "or_default")]
    pub drain: DrainPolicy,
    #[serde(deserialize_with = "or_default")]
    pub replicas: ReplicaPolicy,
    #[serde(deserialize_with = "or_default")]
    pub gate: GatePolicy,
}

/// A minimums map: empty when written with no entries (null), each count in Longhorn's range
/// (a negative or too large one is refused with the range rather than as "invalid u32").
fn minimums<'de, D: Deserializer<'de>>(d: D, key: &str) -> Result<BTreeMap<String, u32>, D::Error> {
    let raw: BTreeMap<String, i64> = or_default(d)?;
    raw.into_iter()
        .map(|(k, n)| match u32::try_from(n) {
            Ok(n) => Ok((k, n)),
            Err(_) => Err(serde::de::Error::custom(format!(
                "{key}.{k} must be 1..20 (Longhorn's replica range), got {n}"
            ))),
        })
        .collect()
}

fn namespace_minimums<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, u32>, D::Error> {
    minimums(d, "replicas.namespaceMinimums")
}

fn storage_class_minimums<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, u32>, D::Error> {
    minimums(d, "replicas.storageClassMinimums")
}

/// A section written with no keys (`drain:` alone, or all its keys commented out) reads as
/// null: it means the defaults, as an absent one does.
use crate::cluster::meta::null_as_empty as or_default;

/// What the drain guard does with an unsafe eviction or node deletion.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DrainAction {
    /// Deny with `drain.denyCode`.
    #[default]
    Enforce,
    /// Allow, with the denial message as warnings.
    Warn,
    /// Do not check drains at all.
    Off,
}

/// `drain.*` keys.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct DrainPolicy {
    /// `enforce` | `warn` | `off` [enforce].
    pub action: DrainAction,
    /// Code of a denial [429: `kubectl drain` waits and retries every 5 s, like a PDB].
    pub deny_code: u16,
    /// Protect stopped replicas of detached volumes [true]. `false` is the same trade-off as
    /// Longhorn's `allow-if-replica-is-stopped`.
    pub protect_stopped_replicas: bool,
    /// A rebuild whose progress has not moved for this long is reported as stalled [10m].
    #[serde(with = "duration")]
    pub stall_after: Duration,
    /// Watch data older than this must be confirmed by a consistent read before an
    /// instance-manager eviction is allowed [5s].
    #[serde(with = "duration")]
    pub max_view_age: Duration,
    /// Answer a confirmation's reads of the kinds the watch view holds current (data within
    /// `maxViewAge`) from the view, and read only the others [false]. Fewer API reads, but a
    /// kind whose watch keeps delivering events is then trusted as current even when those
    /// events run late; off, every confirmation reads everything.
    pub reuse_current_kinds: bool,
    /// Blocking volumes named in one message before "and N more" [5].
    pub max_listed_volumes: usize,
    /// Users whose DELETEs of instance-manager pods, Longhorn's instance-manager budgets and
    /// InstanceManagers are never refused, and whose UPDATEs leaving a replica count as it was get
    /// no replica finding: exact usernames, no groups [`DEFAULT_TRUSTED_USERS`].
    /// Written with no entries: nobody.
    #[serde(deserialize_with = "or_default")]
    pub trusted_users: Vec<String>,
}

/// The identities that delete Longhorn's instance-manager pods, budgets and InstanceManagers
/// as part of Longhorn's own work (docs/policy.md says why each): Longhorn's ServiceAccount, and
/// the controllers of kube-controller-manager that act for an owner or a Node already gone, or
/// a namespace being deleted (each runs as its own ServiceAccount under
/// `--use-service-account-credentials`). The webhooks' matchConditions list the same names.
pub const DEFAULT_TRUSTED_USERS: [&str; 5] = [
    "system:serviceaccount:longhorn-system:longhorn-service-account",
    "system:serviceaccount:kube-system:generic-garbage-collector",
    "system:serviceaccount:kube-system:pod-garbage-collector",
    "system:serviceaccount:kube-system:node-controller",
    "system:serviceaccount:kube-system:namespace-controller",
];

impl DrainPolicy {
    /// True when `user` is one of `drain.trustedUsers`.
    pub fn trusts(&self, user: &str) -> bool {
        self.trusted_users.iter().any(|t| t == user)
    }
}

impl Default for DrainPolicy {
    fn default() -> Self {
        Self {
            action: DrainAction::Enforce,
            deny_code: 429,
            protect_stopped_replicas: true,
            stall_after: Duration::from_secs(600),
            max_view_age: Duration::from_secs(5),
            reuse_current_kinds: false,
            max_listed_volumes: 5,
            trusted_users: DEFAULT_TRUSTED_USERS.map(String::from).to_vec(),
        }
    }
}

/// What the replica-count rules do below the minimum.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ReplicaAction {
    /// Allow with a warning.
    #[default]
    Warn,
    /// Deny with 422 `Invalid` and a field cause.
    Deny,
}

/// `replicas.*` keys.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ReplicaPolicy {
    /// Lowest acceptable replica count [3].
    pub minimum: u32,
    /// `warn` | `deny` [warn].
    pub action: ReplicaAction,
    /// Per-namespace minimum for Volumes, by their PVC namespace (`status.kubernetesStatus`)
    /// [none].
    #[serde(deserialize_with = "namespace_minimums")]
    pub namespace_minimums: BTreeMap<String, u32>,
    /// Per-StorageClass minimum, by StorageClass name [none].
    #[serde(deserialize_with = "storage_class_minimums")]
    pub storage_class_minimums: BTreeMap<String, u32>,
}

impl Default for ReplicaPolicy {
    fn default() -> Self {
        Self {
            minimum: 3,
            action: ReplicaAction::Warn,
            namespace_minimums: BTreeMap::new(),
            storage_class_minimums: BTreeMap::new(),
        }
    }
}

/// Upper bound of `drain.maxViewAge`: older data is not "fresh" in any useful sense.
pub const MAX_VIEW_AGE: Duration = Duration::from_secs(60);
/// Upper bound of `drain.stallAfter`.
pub const MAX_STALL_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);
/// Upper bound of `gate.timeout` and of the gate's `--timeout`/`--poll-interval`.
pub const MAX_GATE_TIMEOUT: Duration = Duration::from_secs(3600);

/// The image of the gate init container when the policy names none.
pub const DEFAULT_GATE_IMAGE: &str = "ghcr.io/longhorn-guard/longhorn-guard:0.1.0";

/// `gate.*` keys.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct GatePolicy {
    /// Inject the init gate into instance-manager pods that request the storage network [true].
    pub enabled: bool,
    /// Image of the gate init container (this same binary) [`DEFAULT_GATE_IMAGE`].
    pub image: String,
    /// The gate's deadline before it fails the pod [60s].
    #[serde(with = "duration")]
    pub timeout: Duration,
}

impl Default for GatePolicy {
    fn default() -> Self {
        Self { enabled: true, image: DEFAULT_GATE_IMAGE.to_string(), timeout: Duration::from_secs(60) }
    }
}

impl Policy {
    /// Loads and validates a policy file; `None` gives the defaults.
    pub fn load(path: Option<&Path>) -> Result<Self, PolicyError> {
        let Some(path) = path else { return Ok(Self::default()) };
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|source| PolicyError::Read { path: shown.clone(), source })?;
        Self::parse(&text).map_err(|message| PolicyError::Invalid { path: shown, message })
    }

    /// Parses and validates policy YAML (or JSON). An empty document gives the defaults.
    pub fn parse(text: &str) -> Result<Self, String> {
        // Documents, empty ones skipped: a stray `---` (as generated ConfigMaps end) is fine.
        let mut docs = crate::yaml::from_multiple::<Policy>(text).map_err(|e| crate::yaml::message(&e))?;
        if docs.len() > 1 {
            return Err(format!(
                "holds {} YAML documents; a policy file is one document (drain, replicas, gate)",
                docs.len()
            ));
        }
        let policy = docs.pop().unwrap_or_default();
        policy.check()?;
        Ok(policy)
    }

    /// Checks ranges the types cannot express.
    pub fn check(&self) -> Result<(), String> {
        if !(400..=599).contains(&self.drain.deny_code) {
            return Err(format!("drain.denyCode must be 400..599, got {}", self.drain.deny_code));
        }
        if self.drain.max_listed_volumes == 0 {
            return Err("drain.maxListedVolumes must be at least 1".into());
        }
        if self.drain.stall_after.is_zero() {
            return Err("drain.stallAfter must be longer than 0s".into());
        }
        if self.drain.stall_after > MAX_STALL_AFTER {
            return Err(format!("drain.stallAfter must be at most 7d, got {}", show(self.drain.stall_after)));
        }
        if let Some(bad) = self
            .drain
            .trusted_users
            .iter()
            .find(|u| u.trim() != u.as_str() || u.is_empty() || u.contains('*'))
        {
            return Err(format!(
                "drain.trustedUsers holds {bad:?}: each entry is one exact username (no blanks, no wildcards)"
            ));
        }
        if self.drain.max_view_age > MAX_VIEW_AGE {
            return Err(format!(
                "drain.maxViewAge must be at most 60s, got {}",
                show(self.drain.max_view_age)
            ));
        }
        let check_min = |what: &str, n: u32| {
            if (1..=20).contains(&n) {
                Ok(())
            } else {
                Err(format!("{what} must be 1..20 (Longhorn's replica range), got {n}"))
            }
        };
        check_min("replicas.minimum", self.replicas.minimum)?;
        for (ns, n) in &self.replicas.namespace_minimums {
            check_min(&format!("replicas.namespaceMinimums.{ns}"), *n)?;
        }
        for (sc, n) in &self.replicas.storage_class_minimums {
            check_min(&format!("replicas.storageClassMinimums.{sc}"), *n)?;
        }
        if self.gate.image.trim().is_empty() {
            return Err("gate.image must not be empty".into());
        }
        if self.gate.timeout.is_zero() {
            return Err("gate.timeout must be longer than 0s".into());
        }
        if self.gate.timeout > MAX_GATE_TIMEOUT {
            return Err(format!("gate.timeout must be at most 1h, got {}", show(self.gate.timeout)));
        }
        Ok(())
    }
}

/// A duration in the one style the policy file documents: `8d`, `1h30m`, `1m1s`, `500ms`
/// (`0s` for zero): humantime's, without spaces and with whole days. It parses back to itself.
pub fn show(d: Duration) -> String {
    let days = d.as_secs() / 86_400;
    let rest =
        humantime::format_duration(d - Duration::from_secs(days * 86_400)).to_string().replace(' ', "");
    match (days, rest.as_str()) {
        (0, _) => rest,
        (_, "0s") => format!("{days}d"),
        _ => format!("{days}d{rest}"),
    }
}

/// Durations as Go-style strings (`"90s"`, `"10m"`, `"1h30m"`, `"500ms"`) or whole seconds.
pub mod duration {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::show(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(DurationVisitor)
    }

    struct DurationVisitor;

    impl serde::de::Visitor<'_> for DurationVisitor {
        type Value = Duration;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a duration such as \"90s\", \"10m\", \"1h30m\", \"500ms\" or whole seconds")
        }

        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Duration, E> {
            Ok(Duration::from_secs(n))
        }

        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Duration, E> {
            u64::try_from(n)
                .map(Duration::from_secs)
                .map_err(|_| E::custom(format!("invalid duration {n}: a duration cannot be negative")))
        }

        fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Duration, E> {
            // A YAML integer too large for u64 arrives as a float too.
            if n.fract() == 0.0 && n.abs() >= u64::MAX as f64 {
                return Err(E::custom(format!("invalid duration {n}: too large (use e.g. 90s, 10m, 1h)")));
            }
            Err(E::custom(format!(
                "invalid duration {n}: whole seconds only (write a unit for less, e.g. \"500ms\")"
            )))
        }

        fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<Duration, E> {
            parse(t).map_err(E::custom)
        }
    }

    /// Parses `"10m"`, `"1h30m"`, `"250ms"`, `"45s"` or a bare number of seconds.
    pub fn parse(text: &str) -> Result<Duration, String> {
        let t = text.trim();
        if let Ok(n) = t.parse::<u64>() {
            return Ok(Duration::from_secs(n));
        }
        humantime::parse_duration(t)
            .map_err(|e| format!("invalid duration {t:?}: {e} (use e.g. 90s, 10m, 1h)"))
    }
}

#[cfg(test)]
mod tests;
