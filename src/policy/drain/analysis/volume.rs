//! One volume under a drain of one node: its facts and verdict ([`Assessment`], no text),
//! then, only for a volume an answer shows, its full [`VolumeReport`].

use std::collections::BTreeSet;
use std::time::SystemTime;

use crate::cluster::{lists_no_pod, ClusterView, Engine, Volume};
use crate::policy::Policy;

use super::super::instances::InstanceKind;
use super::facts::{data_engine_of, is_available_healthy, replica_facts, ReplicaFacts};
use super::finding::{Attachment, Holds, Override, Reason, Remedy};
use super::wording::{healthy_on_draining_node, is_strict_local, stranded_reason};
use super::{override_reason, Explained, Verdict, VolumeReport};

fn is_attached_state(state: &str) -> bool {
    matches!(state, "attached" | "attaching" | "detaching")
}

/// How an engine of `volume` runs on `node`, if it does; `in_ims` are the kinds of entry the
/// node's instance managers run for it.
fn attached_on(
    view: &ClusterView,
    node: &str,
    volume: &str,
    vol: Option<&Volume>,
    in_ims: Option<&BTreeSet<InstanceKind>>,
) -> Option<Attachment> {
    if let Some(e) = view
        .engines_of_volume(volume)
        .find(|e| e.node() == Some(node) && matches!(e.status.current_state.as_str(), "running" | "starting"))
    {
        return Some(match e.status.current_state.as_str() {
            "running" => Attachment::EngineRunning {
                frontend: in_ims.is_some_and(|k| k.contains(&InstanceKind::EngineFrontend)),
            },
            state => Attachment::Engine {
                name: e.metadata.name.as_deref().unwrap_or("").to_string(),
                state: state.to_string(),
            },
        });
    }
    if let Some(v) = vol {
        if v.status.current_node_id == node && is_attached_state(&v.status.state) {
            return Some(Attachment::Volume { state: v.status.state.to_string() });
        }
    }
    let kinds = in_ims.filter(|k| !k.is_empty())?;
    Some(Attachment::Instances(kinds.iter().copied().collect()))
}

/// What a verdict on one volume reads: the objects and the facts of each replica.
pub(super) struct Assessment<'a> {
    node: &'a str,
    volume: &'a str,
    vol: Option<&'a Volume>,
    engine: Option<&'a Engine>,
    attached_here: Option<Attachment>,
    detached: bool,
    /// Replicas on the node first, then by node and name.
    facts: Vec<ReplicaFacts<'a>>,
}

impl<'a> Assessment<'a> {
    pub(super) fn new(
        view: &'a ClusterView,
        node: &'a str,
        volume: &'a str,
        in_ims: Option<&BTreeSet<InstanceKind>>,
        policy: &Policy,
        now: SystemTime,
    ) -> Self {
        let vol = view.volume(volume);
        let engine = view.engine_of(volume);
        let attached = vol.map(|v| is_attached_state(&v.status.state)).unwrap_or(false)
            || engine.is_some_and(|e| e.status.current_state == "running");
        let mut facts: Vec<ReplicaFacts> = view
            .replicas_of_volume(volume)
            .map(|r| replica_facts(view, node, r, engine, attached, policy, now))
            .collect();
        facts.sort_by(|a, b| (!a.on_node, a.node, a.name).cmp(&(!b.on_node, b.node, b.name)));
        Self {
            node,
            volume,
            vol,
            engine,
            attached_here: attached_on(view, node, volume, vol, in_ims),
            detached: vol.is_some_and(|v| v.status.state == "detached"),
            facts,
        }
    }

    fn here(&self) -> impl Iterator<Item = &ReplicaFacts<'a>> {
        self.facts.iter().filter(|f| f.on_node)
    }

    fn others(&self) -> impl Iterator<Item = &ReplicaFacts<'a>> {
        self.facts.iter().filter(|f| !f.on_node)
    }

    /// The replicas on the node whose data a drain takes away (stopped ones of a detached
    /// volume do not count unless `protect_stopped`).
    fn at_risk(&self, protect_stopped: bool) -> impl Iterator<Item = &ReplicaFacts<'a>> {
        let ignored = move |f: &ReplicaFacts| {
            !protect_stopped
                && self.detached
                && f.replica.spec.desire_state == "stopped"
                && f.replica.status.current_state == "stopped"
        };
        self.here().filter(move |f| f.carries_data && !ignored(f))
    }

    fn protected(&self) -> bool {
        self.facts.iter().any(|f| f.protecting)
    }

    /// The verdict before any override: block when an engine runs on the node or its data
    /// there has no protecting copy.
    pub(super) fn verdict(&self, protect_stopped: bool) -> Verdict {
        let stranded = || !self.protected() && self.at_risk(protect_stopped).next().is_some();
        if self.attached_here.is_some() || stranded() {
            Verdict::Block
        } else {
            Verdict::Safe
        }
    }

    /// What the node holds of an attached volume that no other replica protects.
    fn holds(&self, at_risk: &[&ReplicaFacts]) -> Holds {
        match at_risk.iter().filter(|f| is_available_healthy(f.replica)).count() {
            _ if healthy_on_draining_node(self.others()) => Holds::NoOtherCanProtect,
            0 => Holds::OnlyCopy,
            1 => Holds::LastHealthy,
            n => Holds::AllHealthy(n),
        }
    }

    /// The reason and remedy of a volume attached on the node.
    fn attached_reason(
        &self,
        how: &Attachment,
        stranded: bool,
        at_risk: &[&ReplicaFacts],
    ) -> (Reason, Remedy) {
        let node = self.node;
        let vol = self.vol;
        // A v2 engine placed here by `spec.engineNodeID` serves a workload on another node:
        // moving the workload does not move the engine.
        let serves = vol
            .filter(|v| v.spec.data_engine == "v2" && v.spec.engine_node_id == node)
            .map(|v| {
                if v.status.current_node_id.is_empty() {
                    &v.spec.node_id
                } else {
                    &v.status.current_node_id
                }
            })
            .filter(|front| !front.is_empty() && front.as_str() != node);
        let holds = stranded.then(|| self.holds(at_risk));
        let reason = match serves {
            Some(front) => Reason::EngineFor { node: node.to_string(), front: front.to_string(), holds },
            None => Reason::Attached { node: node.to_string(), how: how.clone(), holds },
        };
        let remedy = if serves.is_some() {
            Remedy::MoveEngine
        } else if is_strict_local(vol) {
            Remedy::StrictLocal { node: node.to_string() }
        } else if vol.is_some_and(|v| {
            let k = &v.status.kubernetes_status;
            lists_no_pod(k.workloads, k.pods_gone)
        }) {
            Remedy::NoPod { node: node.to_string() }
        } else {
            let pvc = vol
                .map(|v| &v.status.kubernetes_status)
                .filter(|k| !k.pvc_name.is_empty())
                .map(|k| (k.namespace.clone(), k.pvc_name.clone()));
            Remedy::MoveWorkload { pvc, node: node.to_string() }
        };
        (reason, remedy)
    }

    /// Why a volume is safe.
    fn safe_reason(&self) -> Reason {
        let node = self.node.to_string();
        let here: Vec<&ReplicaFacts> = self.here().collect();
        if self.protected() {
            let nodes: BTreeSet<&str> = self.facts.iter().filter(|f| f.protecting).map(|f| f.node).collect();
            Reason::Protected { nodes: nodes.into_iter().map(str::to_string).collect() }
        } else if here.is_empty() {
            Reason::NoReplica { node }
        } else if here.iter().all(|f| !f.carries_data) {
            Reason::NeverUsed { node, count: here.len() }
        } else {
            Reason::StoppedDetached { node, count: here.len() }
        }
    }

    /// The full report under `policy`, with the override of the volume, else `node_override`,
    /// applied to a blocking verdict.
    pub(super) fn report(self, policy: &Policy, node_override: Option<&Override>) -> VolumeReport {
        let Explained { volume, verdict, reason, remedy, overridden } = self.explain(policy, node_override);
        VolumeReport {
            volume,
            number_of_replicas: self.vol.map(|v| v.spec.number_of_replicas),
            data_engine: data_engine_of(self.vol, &self.facts, self.engine),
            state: self.vol.map(|v| v.status.state.to_string()).unwrap_or_default(),
            attached_here: self.attached_here.is_some(),
            replicas: self.facts.iter().map(ReplicaFacts::report).collect(),
            protecting: self.facts.iter().filter(|f| f.protecting).map(|f| f.name.to_string()).collect(),
            verdict,
            reason,
            remedy,
            overridden,
        }
    }

    /// The verdict, reason and remedy of [`Self::report`], without the per-replica detail.
    pub(super) fn explain(&self, policy: &Policy, node_override: Option<&Override>) -> Explained {
        let protect_stopped = policy.drain.protect_stopped_replicas;
        let at_risk: Vec<&ReplicaFacts> = self.at_risk(protect_stopped).collect();
        let stranded = !at_risk.is_empty() && !self.protected();
        let (mut verdict, (reason, remedy)) = match &self.attached_here {
            Some(how) => (Verdict::Block, self.attached_reason(how, stranded, &at_risk)),
            None if stranded => (Verdict::Block, stranded_reason(self.node, self.vol, &self.facts, &at_risk)),
            None => (Verdict::Safe, (self.safe_reason(), Remedy::None)),
        };
        let overridden = (verdict == Verdict::Block)
            .then(|| volume_override(self.vol, self.volume).or_else(|| node_override.cloned()))
            .flatten();
        if overridden.is_some() {
            verdict = Verdict::Overridden;
        }
        Explained { volume: self.volume.to_string(), verdict, reason, remedy, overridden }
    }
}

/// The override annotation on the Volume `volume`, if set.
fn volume_override(vol: Option<&Volume>, volume: &str) -> Option<Override> {
    let reason = override_reason(&vol?.metadata)?;
    Some(Override::Volume { volume: volume.to_string(), reason })
}
