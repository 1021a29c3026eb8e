//! What an instance manager runs besides replicas: engines and v2 engine frontends, tied to
//! their volumes by Longhorn's naming, and the entries no known volume owns.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::cluster::{ClusterView, Engine, InstanceManager, Name};

/// Engine names that these instance managers report running.
pub fn engines_reported_by<'a>(ims: impl IntoIterator<Item = &'a InstanceManager>) -> BTreeSet<String> {
    ims.into_iter().flat_map(entries).map(|(_, name)| name.to_string()).collect()
}

/// The engine and engine-frontend entries an instance manager runs; a replica-only one runs
/// none.
pub(super) fn entries(im: &InstanceManager) -> impl Iterator<Item = (InstanceKind, &Name)> {
    let runs = im.spec.type_ != "replica";
    let engines = im.status.engines().map(|k| (InstanceKind::Engine, k));
    let frontends = im.status.instance_engine_frontends.keys().map(|k| (InstanceKind::EngineFrontend, k));
    engines.chain(frontends).filter(move |_| runs)
}

/// What an instance manager runs for a volume besides replicas.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub enum InstanceKind {
    /// An engine (`status.instanceEngines`, or an engine of `status.instances`), v1 or v2.
    Engine,
    /// A v2 engine frontend (`status.instanceEngineFrontends`).
    EngineFrontend,
}

impl InstanceKind {
    /// `engine` / `engine frontend`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Engine => "engine",
            Self::EngineFrontend => "engine frontend",
        }
    }
}

/// The volume of a name Longhorn generates for a volume's engine, `<volume>-e-<n>`
/// (`types.GenerateEngineNameForVolume`, v1 and v2), or engine frontend, `<volume>-ef-<n>`
/// (`types.GenerateEngineFrontendNameForVolume`, v2), `n` decimal. Engines named by Longhorn
/// 1.5 and earlier, `<volume>-e-<8 hex digits>` (`util.RandomID`), keep their name across
/// upgrades until replaced, and map too.
pub fn volume_of_engine_name(name: &str) -> Option<&str> {
    [("-e-", true), ("-ef-", false)].into_iter().find_map(|(sep, engine)| {
        let (volume, n) = name.rsplit_once(sep)?;
        let numbered = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
        let random_id =
            engine && n.len() == 8 && n.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        (!volume.is_empty() && (numbered || random_id)).then_some(volume)
    })
}

/// An engine or engine-frontend entry of an instance manager on the node that cannot be tied
/// to a volume in the view. Longhorn keeps the instance manager's disruption budget while
/// any entry runs, so it blocks the drain too.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct UnmappedInstance {
    pub instance_manager: String,
    pub kind: InstanceKind,
    /// The entry's key in `instanceEngines` / `instanceEngineFrontends`.
    pub name: String,
    /// True when the node's override annotation lets it through.
    pub overridden: bool,
}

/// What the instance managers on one node run besides replicas: entries tied to a volume
/// (by their Engine object, else by Longhorn's naming of a volume in the view), and the rest.
#[derive(Debug, Default)]
pub(super) struct NodeInstances {
    pub(super) by_volume: BTreeMap<String, BTreeSet<InstanceKind>>,
    pub(super) unmapped: Vec<UnmappedInstance>,
}

/// The engine and engine-frontend entries of the non-replica instance managers on `node`,
/// as Longhorn's "all volumes detached from node" check reads them.
pub(super) fn node_instances(view: &ClusterView, node: &str) -> NodeInstances {
    let mut out = NodeInstances::default();
    for im in view.instance_managers_on_node(node) {
        let im_name = im.metadata.name.as_deref().unwrap_or("");
        for (kind, name) in entries(im) {
            match owner_of_entry(view, name) {
                Some(volume) => {
                    out.by_volume.entry(volume.to_string()).or_default().insert(kind);
                }
                None => out.unmapped.push(UnmappedInstance {
                    instance_manager: im_name.to_string(),
                    kind,
                    name: name.to_string(),
                    overridden: false,
                }),
            }
        }
    }
    out
}

/// The volume an instance-manager entry belongs to: its Engine object's volume, else the
/// volume its name implies when the view knows that volume (a Volume, or its replicas or
/// engines).
pub(super) fn owner_of_entry<'a>(view: &'a ClusterView, name: &'a str) -> Option<&'a str> {
    if let Some(v) = view.engine(name).and_then(Engine::volume) {
        return Some(v);
    }
    let volume = volume_of_engine_name(name)?;
    let known = view.volume(volume).is_some()
        || view.engines_of_volume(volume).next().is_some()
        || view.replicas_of_volume(volume).next().is_some();
    known.then_some(volume)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_as_longhorn_generates_them() {
        for (name, want) in [
            ("vol-a-e-0", Some("vol-a")),
            (
                "pvc-546894e9-d41a-4e34-bfa8-a4442f8dce20-e-12",
                Some("pvc-546894e9-d41a-4e34-bfa8-a4442f8dce20"),
            ),
            ("vol-a-ef-0", Some("vol-a")),
            ("vol-a-ef-3", Some("vol-a")),
            // A volume whose own name looks like a suffix.
            ("vol-e-1-e-0", Some("vol-e-1")),
            ("vol-ef-e-2", Some("vol-ef")),
            ("v-e-ef-0", Some("v-e")),
            ("a-e-b-ef-1", Some("a-e-b")),
            // Longhorn 1.5 and earlier: 8 hex digits, for engines only.
            ("vol-a-e-1a2b3c4d", Some("vol-a")),
            ("vol-a-ef-1a2b3c4d", None),
            ("vol-a-e-1a2b3c4", None),
            ("vol-a-e-1A2B3C4D", None),
            // Not Longhorn names: no number, empty volume, other suffixes.
            ("vol-a-e-x", None),
            ("vol-a-e-", None),
            ("-e-0", None),
            ("-ef-0", None),
            ("vol-a-r-1a2b3c4d", None),
            ("vol-a", None),
        ] {
            assert_eq!(volume_of_engine_name(name), want, "{name}");
        }
    }
}
