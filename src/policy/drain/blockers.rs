//! What a drain of one node waits for, decided from the drain index without building text:
//! the volumes that block it and those an override lets through, by name, and the unmapped
//! entries. An answer renders ([`Blockers::report`]) only the volumes its message lists, so a
//! denial costs what it prints, not what the node holds; `check drain` renders every volume
//! with the full [`super::analyze_node`].

use std::collections::BTreeSet;
use std::time::SystemTime;

use crate::cluster::{ClusterView, Name};
use crate::policy::Policy;

use super::analysis::{explain_volume, override_text, volume_unsafe, volumes_on_node, Explained, Override};
use super::index::DrainIndex;
use super::instances::{node_instances, InstanceKind, NodeInstances, UnmappedInstance};

/// Where the kinds of entry a node's instance managers run for a volume come from.
enum Sites<'v> {
    Index(&'v DrainIndex),
    /// A view without the drain index: read once for the node.
    Read(NodeInstances),
}

/// The volumes (by name) and entries a drain of one node waits for or lets through.
pub struct Blockers<'v> {
    view: &'v ClusterView,
    node: &'v str,
    sites: Sites<'v>,
    /// The node's override, if set: it lets every blocking volume and entry through.
    pub node_override: Option<Override>,
    /// Volumes that block the drain, in name order.
    pub blocking: Vec<Name>,
    /// Volumes that would block but an override lets through, in name order, each with its
    /// volume's own override reason (`None`: the node's).
    pub overridden: Vec<(Name, Option<&'v str>)>,
    /// The node's engine and engine-frontend entries no known volume owns (each `overridden`
    /// when the node's override lets it through).
    pub unmapped: Vec<UnmappedInstance>,
}

impl<'v> Blockers<'v> {
    /// What a drain of `node` waits for under `policy`, with the node's override reason
    /// `node_override` (from the view or the request).
    pub fn of(view: &'v ClusterView, node: &'v str, policy: &Policy, node_override: Option<String>) -> Self {
        let protect_stopped = policy.drain.protect_stopped_replicas;
        let (sites, not_safe): (Sites, Vec<Name>) = match view.derived::<DrainIndex>() {
            Some(index) => {
                let set = index.unsafe_set(node, policy);
                let mut names = Vec::with_capacity(set.map_or(0, |s| s.len()));
                names.extend(set.into_iter().flatten().cloned());
                (Sites::Index(index), names)
            }
            None => {
                let instances = node_instances(view, node);
                let none = BTreeSet::new();
                let names = volumes_on_node(view, node)
                    .into_iter()
                    .filter(|v| {
                        let kinds = instances.by_volume.get(v).unwrap_or(&none);
                        let (strict, lenient) = volume_unsafe(view, node, v, kinds);
                        if protect_stopped {
                            strict
                        } else {
                            lenient
                        }
                    })
                    .map(|v| Name::new(&v))
                    .collect();
                (Sites::Read(instances), names)
            }
        };
        let node_override = node_override.map(|reason| Override::Node { node: node.to_string(), reason });
        let (mut blocking, mut overridden) = (Vec::with_capacity(not_safe.len()), Vec::new());
        let own_override = |v: &Name| match &sites {
            Sites::Index(index) => index.volume_override(v),
            Sites::Read(_) => view.volume(v).and_then(|vol| override_text(&vol.metadata)),
        };
        for v in not_safe {
            match own_override(&v) {
                Some(reason) => overridden.push((v, Some(reason))),
                None if node_override.is_some() => overridden.push((v, None)),
                None => blocking.push(v),
            }
        }
        let mut unmapped = match &sites {
            Sites::Index(index) => index.sites.unmapped_on(node),
            Sites::Read(instances) => instances.unmapped.clone(),
        };
        for u in &mut unmapped {
            u.overridden = node_override.is_some();
        }
        Self { view, node, sites, node_override, blocking, overridden, unmapped }
    }

    /// True when a drain has to wait.
    pub fn would_block(&self) -> bool {
        !self.blocking.is_empty() || self.unmapped.iter().any(|u| !u.overridden)
    }

    /// Unmapped entries that block the drain.
    pub fn blocking_unmapped(&self) -> impl Iterator<Item = &UnmappedInstance> {
        self.unmapped.iter().filter(|u| !u.overridden)
    }

    /// Unmapped entries the node's override lets through.
    pub fn overridden_unmapped(&self) -> impl Iterator<Item = &UnmappedInstance> {
        self.unmapped.iter().filter(|u| u.overridden)
    }

    /// What an answer prints of one of the volumes: the verdict, reason and remedy
    /// [`super::analyze_node`] gives it.
    pub fn report(&self, volume: &str, policy: &Policy, now: SystemTime) -> Explained {
        let kinds: BTreeSet<InstanceKind> = match &self.sites {
            Sites::Index(index) => index.sites.of_volume_on(self.view, volume, self.node),
            Sites::Read(instances) => instances.by_volume.get(volume).cloned().unwrap_or_default(),
        };
        explain_volume(self.view, self.node, volume, Some(&kinds), policy, now, self.node_override.as_ref())
    }

    /// The reports on the first `n` of `volumes`.
    pub fn reports<'n>(
        &self,
        volumes: impl IntoIterator<Item = &'n Name>,
        n: usize,
        policy: &Policy,
        now: SystemTime,
    ) -> Vec<Explained> {
        volumes.into_iter().take(n).map(|v| self.report(v, policy, now)).collect()
    }

    /// The override reasons that let the overridden volumes and entries through, each once,
    /// in order.
    pub fn override_reasons(&self) -> Vec<String> {
        let node = self.node_override.as_ref();
        let by_volume = self.overridden.iter().map(|(v, r)| match r {
            Some(reason) => Override::Volume { volume: v.to_string(), reason: reason.to_string() },
            None => {
                node.cloned().unwrap_or(Override::Node { node: self.node.to_string(), reason: String::new() })
            }
        });
        let by_node = node.filter(|_| self.overridden_unmapped().next().is_some()).cloned();
        let all: BTreeSet<String> = by_volume.chain(by_node).map(|o| o.to_string()).collect();
        all.into_iter().collect()
    }
}
