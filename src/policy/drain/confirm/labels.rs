//! A confirmation finds objects by their `longhornnode` and `longhornvolume` labels, the drain
//! analysis by `spec.nodeID` and `spec.volumeName`. Longhorn writes the labels from those fields,
//! so they agree; where one does not (a hand edit), label reads could miss an object the
//! analysis would count, and the confirmation refuses to decide.

use crate::cluster::meta::Meta;
use crate::cluster::{Engine, Listed, Object, Replica, Volume, LONGHORN_NODE_LABEL, LONGHORN_VOLUME_LABEL};

/// Why `o`'s labels cannot be trusted to find it as its spec places it, or `None` when they can.
pub fn disagreement(o: &Object) -> Option<String> {
    match o {
        Object::Replica(r) => r.disagreement(),
        Object::Engine(e) => e.disagreement(),
        Object::Volume(v) => v.disagreement(),
        _ => None,
    }
}

/// A kind a confirmation reads per volume: found by its labels, placed by its spec.
pub trait Labelled: Listed + Clone {
    /// [`disagreement`] of this object.
    fn disagreement(&self) -> Option<String>;
}

impl Labelled for Replica {
    fn disagreement(&self) -> Option<String> {
        instance("replica", &self.metadata, &self.spec.node_id, &self.spec.volume_name)
    }
}

impl Labelled for Engine {
    fn disagreement(&self) -> Option<String> {
        instance("engine", &self.metadata, &self.spec.node_id, &self.spec.volume_name)
    }
}

/// A volume's `longhornvolume` label is its name.
impl Labelled for Volume {
    fn disagreement(&self) -> Option<String> {
        let name = self.metadata.name.as_deref().unwrap_or_default();
        field("volume", &self.metadata, "name", LONGHORN_VOLUME_LABEL, name)
    }
}

fn instance(what: &str, meta: &Meta, node: &str, volume: &str) -> Option<String> {
    field(what, meta, "spec.nodeID", LONGHORN_NODE_LABEL, node)
        .or_else(|| field(what, meta, "spec.volumeName", LONGHORN_VOLUME_LABEL, volume))
}

/// A non-empty `value` of field `f` that the `label` does not carry.
fn field(what: &str, meta: &Meta, f: &str, label: &str, value: &str) -> Option<String> {
    let carried = meta.labels.get(label).map(|l| l.as_str());
    if value.is_empty() || carried == Some(value) {
        return None;
    }
    let name = meta.name.as_deref().unwrap_or("<no name>");
    Some(match carried {
        Some(l) => format!("{what} {name} is labelled {label}={l} but its {f} is {value}"),
        None => format!("{what} {name} has no {label} label but its {f} is {value}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(labels: &[(&str, &str)], name: &str) -> Meta {
        Meta {
            name: Some(name.into()),
            labels: labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
            ..Meta::default()
        }
    }

    fn replica(labels: &[(&str, &str)], node: &str, volume: &str) -> Object {
        let mut r = Replica { metadata: meta(labels, "r-1"), ..Replica::default() };
        r.spec.node_id = node.into();
        r.spec.volume_name = volume.into();
        Object::Replica(Box::new(r))
    }

    #[test]
    fn labels_must_carry_the_fields_the_analysis_places_objects_by() {
        let both = [("longhornnode", "n1"), ("longhornvolume", "v1")];
        assert_eq!(disagreement(&replica(&both, "n1", "v1")), None);
        // An empty field: the analysis takes the label itself, so they cannot disagree.
        assert_eq!(disagreement(&replica(&both, "", "")), None);
        assert_eq!(disagreement(&replica(&[("longhornnode", "")], "", "")), None);
        assert_eq!(
            disagreement(&replica(&both, "n2", "v1")).as_deref(),
            Some("replica r-1 is labelled longhornnode=n1 but its spec.nodeID is n2")
        );
        assert_eq!(
            disagreement(&replica(&[("longhornvolume", "v1")], "n1", "v1")).as_deref(),
            Some("replica r-1 has no longhornnode label but its spec.nodeID is n1")
        );
        assert_eq!(
            disagreement(&replica(&[("longhornnode", "n1")], "n1", "v1")).as_deref(),
            Some("replica r-1 has no longhornvolume label but its spec.volumeName is v1")
        );
        let volume = |labels: &[(&str, &str)]| {
            Object::Volume(Box::new(Volume { metadata: meta(labels, "v1"), ..Volume::default() }))
        };
        assert_eq!(disagreement(&volume(&[("longhornvolume", "v1")])), None);
        assert_eq!(
            disagreement(&volume(&[("longhornvolume", "v2")])).as_deref(),
            Some("volume v1 is labelled longhornvolume=v2 but its name is v1")
        );
    }
}
