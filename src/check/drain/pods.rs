//! The pods on a node as `kubectl drain` sorts them (kubectl's `pkg/drain/filters.go`: the
//! DaemonSet, mirror-pod, local-storage and unreplicated filters, in that order, the first that
//! keeps a pod deciding), and the pods that will never go.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

/// Annotation the kubelet puts on the API copy of a static pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The API server's default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE: i64 = 30;

/// What the doctor reads of one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFacts {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The controlling owner: (kind, name).
    pub controller: Option<(String, String)>,
    pub phase: String,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    pub mirror: bool,
    /// Names of its emptyDir volumes.
    pub empty_dirs: Vec<String>,
    pub grace_seconds: i64,
    /// `metadata.deletionTimestamp`: when a pod being deleted is due to be gone.
    pub deleting_by: Option<SystemTime>,
    pub finalizers: Vec<String>,
}

impl PodFacts {
    /// Reads a `v1 Pod`; the error names what is wrong with it.
    pub fn from_value(v: &Value) -> Result<Self, String> {
        let pod: Pod = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
        let meta = pod.metadata;
        let spec = pod.spec.unwrap_or_default();
        let status = pod.status.unwrap_or_default();
        let controller = meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| (o.kind.clone(), o.name.clone()));
        let ready = status.conditions.iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True");
        Ok(Self {
            namespace: meta.namespace.unwrap_or_default(),
            name: meta.name.unwrap_or_default(),
            labels: meta.labels.unwrap_or_default(),
            controller,
            phase: status.phase.unwrap_or_default(),
            ready,
            mirror: meta.annotations.iter().flatten().any(|(k, _)| k == MIRROR_ANNOTATION),
            empty_dirs: spec
                .volumes
                .iter()
                .flatten()
                .filter(|v| v.empty_dir.is_some())
                .map(|v| v.name.clone())
                .collect(),
            grace_seconds: spec.termination_grace_period_seconds.unwrap_or(DEFAULT_GRACE),
            deleting_by: meta.deletion_timestamp.map(|t| SystemTime::from(t.0)),
            finalizers: meta.finalizers.unwrap_or_default(),
        })
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Succeeded or Failed: kubectl deletes it whatever it holds.
    pub fn finished(&self) -> bool {
        matches!(self.phase.as_str(), "Succeeded" | "Failed")
    }

    /// The eviction API lets it go without asking its disruption budget (`canIgnorePDB`:
    /// finished, Pending, or already being deleted).
    pub fn ignores_budgets(&self) -> bool {
        self.finished() || self.phase == "Pending" || self.deleting_by.is_some()
    }

    fn owned_by_daemonset(&self) -> Option<&str> {
        self.controller.as_ref().filter(|(k, _)| k == "DaemonSet").map(|(_, n)| n.as_str())
    }

    /// Whether `kubectl drain` evicts it (DaemonSet-managed and mirror pods stay).
    pub fn evicted_by_drain(&self) -> bool {
        self.owned_by_daemonset().is_none() && !self.mirror
    }
}

/// A `kubectl drain` flag some pod needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flag {
    IgnoreDaemonsets,
    DeleteEmptydirData,
    Force,
}

impl Flag {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::IgnoreDaemonsets => "--ignore-daemonsets",
            Self::DeleteEmptydirData => "--delete-emptydir-data",
            Self::Force => "--force",
        }
    }
}

/// Why `kubectl drain` refuses a pod without a flag: the flag, a stable id and the reason.
pub fn refusal(p: &PodFacts) -> Option<(Flag, &'static str, String)> {
    if let Some(ds) = p.owned_by_daemonset() {
        return Some((
            Flag::IgnoreDaemonsets,
            "daemonset-pod",
            format!("managed by DaemonSet {ds}: kubectl drain refuses DaemonSet-managed pods (it leaves them running with the flag)"),
        ));
    }
    if p.mirror || p.finished() {
        return None;
    }
    if !p.empty_dirs.is_empty() {
        return Some((
            Flag::DeleteEmptydirData,
            "emptydir-pod",
            format!(
                "has emptyDir volume {}: kubectl drain refuses pods with local storage (the flag deletes that data)",
                p.empty_dirs.join(", ")
            ),
        ));
    }
    if p.controller.is_none() {
        return Some((
            Flag::Force,
            "bare-pod",
            "declares no controller: kubectl drain refuses it (the flag deletes it for good: nothing recreates it)"
                .to_string(),
        ));
    }
    None
}

/// Why a pod will never go: a stable id, the reason and the remedy; `None` when it will.
pub fn never_goes(
    p: &PodFacts,
    drain_timeout: Option<Duration>,
    now: SystemTime,
) -> Option<(&'static str, String, String)> {
    if let Some(by) = p.deleting_by {
        now.duration_since(by).ok()?;
        let held = if p.finalizers.is_empty() {
            "its kubelet has not confirmed the deletion (is the node's kubelet running?)".to_string()
        } else {
            format!("finalizers {} hold it", p.finalizers.join(", "))
        };
        return Some((
            "terminating-pod",
            format!("Terminating, past its deadline {}: {held}", crate::policy::drain::format_time(by)),
            "kubectl drain waits for it until --timeout; once the kubelet or the finalizer's controller finishes it, it goes; \
             to drain regardless: --skip-wait-for-delete-timeout=1"
                .to_string(),
        ));
    }
    let timeout = drain_timeout?;
    if !p.evicted_by_drain() || p.finished() || p.grace_seconds <= timeout.as_secs() as i64 {
        return None;
    }
    Some((
        "grace-period-beyond-timeout",
        format!(
            "terminationGracePeriodSeconds {} is beyond --drain-timeout {}: kubectl drain gives up before it ends",
            p.grace_seconds,
            humantime::format_duration(timeout)
        ),
        format!(
            "give kubectl drain --timeout above {}s, or shorten it with --grace-period (cuts the pod's shutdown short)",
            p.grace_seconds
        ),
    ))
}
