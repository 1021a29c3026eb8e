//! Where instance managers run engine and engine-frontend entries, kept current for the drain
//! index: by entry name, the nodes and instance managers that report it, and per node the
//! entries no known volume owns (they block a drain). A change marks the entries it may affect
//! ([`owner_of_entry`]); [`Sites::flush`] re-reads only those.

use std::collections::{BTreeMap, BTreeSet};

use super::instances::{entries, owner_of_entry, volume_of_engine_name, InstanceKind, UnmappedInstance};
use crate::cluster::name::{NameHashSet, NameMap};
use crate::cluster::nameset::{self, NameSet};
use crate::cluster::{ClusterView, InstanceManager, Name};

/// One place an entry runs: (node, instance manager, kind of entry).
type Site = (Name, Name, InstanceKind);

/// An entry no known volume owns: (instance manager, kind, entry name).
type Unmapped = (Name, InstanceKind, Name);

/// Entry sites and the unmapped entries per node.
#[derive(Clone, Debug, Default)]
pub(super) struct Sites {
    /// Entry name -> where it runs (sorted; nearly always one site, two while migrating).
    by_entry: NameMap<Name, Vec<Site>>,
    /// Volume implied by an entry's name -> those entry names.
    by_implied: NameMap<Name, NameSet>,
    /// Node -> (instance manager, kind, entry name) that no known volume owns.
    unmapped: NameMap<Name, BTreeSet<Unmapped>>,
    dirty: NameHashSet<Name>,
}

/// The engine and engine-frontend entries of a non-replica instance manager with a node,
/// each with its site.
fn placed(im: Option<&InstanceManager>) -> BTreeSet<(Site, &Name)> {
    let Some(im) = im.filter(|im| !im.spec.node_id.is_empty()) else {
        return BTreeSet::new();
    };
    let name = im.metadata.name.clone().unwrap_or_default();
    entries(im).map(|(kind, entry)| ((im.spec.node_id.clone(), name.clone(), kind), entry)).collect()
}

/// `key` on `node` is no longer unmapped.
fn mapped(unmapped: &mut NameMap<Name, BTreeSet<Unmapped>>, node: &Name, key: &Unmapped) {
    if let Some(set) = unmapped.get_mut(node) {
        set.remove(key);
        if set.is_empty() {
            unmapped.remove(node);
        }
    }
}

impl Sites {
    /// An instance manager changed from `old` to `new` (either may be absent). Returns the
    /// entry names whose sites changed (only those: a status update that adds one engine to a
    /// list of hundreds costs one entry).
    pub(super) fn instance_manager_changed(
        &mut self,
        old: Option<&InstanceManager>,
        new: Option<&InstanceManager>,
    ) -> BTreeSet<Name> {
        let before = placed(old);
        let after = placed(new);
        let mut changed = BTreeSet::new();
        for (site, entry) in before.difference(&after) {
            let (node, im, kind) = site;
            mapped(&mut self.unmapped, node, &(im.clone(), *kind, (*entry).clone()));
            if let Some(sites) = self.by_entry.get_mut(*entry) {
                if let Ok(i) = sites.binary_search(site) {
                    sites.remove(i);
                }
                if sites.is_empty() {
                    self.by_entry.remove(*entry);
                    self.forget_implied(entry);
                }
            }
            changed.insert((*entry).clone());
        }
        for (site, entry) in after.difference(&before) {
            let sites = self.by_entry.entry((*entry).clone()).or_default();
            if let Err(i) = sites.binary_search(site) {
                sites.insert(i, site.clone());
            }
            if let Some(v) = volume_of_engine_name(entry) {
                nameset::add(&mut self.by_implied, &Name::new(v), entry);
            }
            changed.insert((*entry).clone());
        }
        self.dirty.extend(changed.iter().cloned());
        changed
    }

    fn forget_implied(&mut self, entry: &str) {
        if let Some(v) = volume_of_engine_name(entry) {
            nameset::del(&mut self.by_implied, v, entry);
        }
    }

    /// The owner of entry `name` may have changed (its Engine object changed).
    pub(super) fn mark_entry(&mut self, name: &str) {
        if let Some((entry, _)) = self.by_entry.get_key_value(name) {
            if !self.dirty.contains(name) {
                self.dirty.insert(entry.clone());
            }
        }
    }

    /// Volume `volume` may have become known or unknown: its name-implied entries are re-read.
    pub(super) fn mark_volume(&mut self, volume: &str) {
        if let Some(names) = self.by_implied.get(volume) {
            self.dirty.extend(names.iter().cloned());
        }
    }

    /// Every entry is re-read at the next flush.
    pub(super) fn mark_all(&mut self) {
        self.dirty.extend(self.by_entry.keys().cloned());
    }

    /// Re-reads the owner of every marked entry and files its sites as mapped or unmapped.
    pub(super) fn flush(&mut self, view: &ClusterView) {
        for entry in std::mem::take(&mut self.dirty) {
            let Some(sites) = self.by_entry.get(&entry) else { continue };
            let unmapped = owner_of_entry(view, &entry).is_none();
            for (node, im, kind) in sites {
                let key = (im.clone(), *kind, entry.clone());
                if unmapped {
                    self.unmapped.entry(node.clone()).or_default().insert(key);
                } else {
                    mapped(&mut self.unmapped, node, &key);
                }
            }
        }
    }

    /// The volumes whose name some entry implies (they may be known through no other object).
    pub(super) fn implied_volumes(&self) -> impl Iterator<Item = &Name> {
        self.by_implied.keys()
    }

    /// The entry names that may belong to `volume`: its Engine objects' names and the entries
    /// whose name implies it.
    fn candidates<'a>(&'a self, view: &'a ClusterView, volume: &'a str) -> impl Iterator<Item = &'a str> {
        let objects = view.engines_of_volume(volume).filter_map(|e| e.metadata.name.as_deref());
        let implied = self.by_implied.get(volume).into_iter().flatten().map(Name::as_str);
        objects.chain(implied)
    }

    /// Per node, the kinds of entry that instance managers there run for `volume`.
    pub(super) fn of_volume(
        &self,
        view: &ClusterView,
        volume: &str,
    ) -> BTreeMap<Name, BTreeSet<InstanceKind>> {
        let mut out: BTreeMap<Name, BTreeSet<InstanceKind>> = BTreeMap::new();
        for entry in self.candidates(view, volume) {
            let Some(sites) = self.by_entry.get(entry) else { continue };
            if owner_of_entry(view, entry) != Some(volume) {
                continue;
            }
            for (node, _, kind) in sites {
                out.entry(node.clone()).or_default().insert(*kind);
            }
        }
        out
    }

    /// [`Self::of_volume`] for one node: the kinds of entry its instance managers run for
    /// `volume` (what an answer that lists the volume reads).
    pub(super) fn of_volume_on(
        &self,
        view: &ClusterView,
        volume: &str,
        node: &str,
    ) -> BTreeSet<InstanceKind> {
        let mut out = BTreeSet::new();
        for entry in self.candidates(view, volume) {
            let Some(sites) = self.by_entry.get(entry) else { continue };
            if !sites.iter().any(|(n, _, _)| n == node) || owner_of_entry(view, entry) != Some(volume) {
                continue;
            }
            out.extend(sites.iter().filter(|(n, _, _)| n == node).map(|(_, _, kind)| *kind));
        }
        out
    }

    /// The entries on `node` that no known volume owns, in (instance manager, kind, name) order.
    pub(super) fn unmapped_on(&self, node: &str) -> Vec<UnmappedInstance> {
        self.unmapped
            .get(node)
            .into_iter()
            .flatten()
            .map(|(im, kind, name)| UnmappedInstance {
                instance_manager: im.to_string(),
                kind: *kind,
                name: name.to_string(),
                overridden: false,
            })
            .collect()
    }
}
