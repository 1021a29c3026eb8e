//! Confirmation reads answered from the watch view, for the kinds it holds current.
//!
//! A confirmation is needed when some kinds did not receive data within `drain.maxViewAge`; the
//! kinds that did are current by that same rule, so their reads are answered from the view (the
//! same selectors, on the labels the view keeps) and only the others go to the API server.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use super::labels::{self, Labelled};
use super::selectors::Selector;
use crate::cluster::meta::{Meta, KEPT_LABELS};
use crate::cluster::{ClusterView, Object, ObjectKind, SharedView};

/// The watch view and the kinds it holds current for one confirmation.
pub struct Cached {
    view: SharedView,
    kinds: BTreeSet<ObjectKind>,
    max_age: Duration,
}

impl Cached {
    /// The kinds of `view` current at `now` under `max_age` when this confirmation begins; a
    /// read is answered from the view only if its kind is among them and still current when
    /// the read is.
    pub fn current(view: &SharedView, now: SystemTime, max_age: Duration) -> Self {
        let kinds = view.read().current_kinds(now, max_age);
        Self { view: view.clone(), kinds, max_age }
    }

    /// The kinds answered from the view.
    pub fn kinds(&self) -> &BTreeSet<ObjectKind> {
        &self.kinds
    }

    /// The objects a LIST of `kind` with `selector` would return, from the view; `None` when
    /// the kind is not current (then or now), the selector names a label the view does not keep, or an object
    /// the read concerns has labels that disagree with its spec ([`super::labels`]): then the
    /// API server is asked (and the last refuses the confirmation).
    pub fn list(&self, kind: ObjectKind, selector: Option<&Selector>) -> Option<Vec<Object>> {
        let all = Selector::default();
        let selector = selector.unwrap_or(&all);
        let kept = selector.requirements().iter().all(|r| KEPT_LABELS.contains(&r.key()));
        if !self.kinds.contains(&kind) || !kept {
            return None;
        }
        let namespace = kind.resource().namespace;
        let keep =
            |m: &Meta| namespace.is_none_or(|ns| m.namespace.as_deref() == Some(ns)) && selector.matches(m);
        let view = self.view.read();
        // A watch that failed (or went quiet) since the confirmation began no longer vouches for
        // its kind: the API server is asked instead.
        if !view.current_kinds(SystemTime::now(), self.max_age).contains(&kind) {
            return None;
        }
        match selector.volumes() {
            Some(volumes) => by_volume(&view, kind, volumes, &keep),
            None => Some(view.select(kind, &keep))
                .filter(|objects| objects.iter().all(|o| labels::disagreement(o).is_none())),
        }
    }
}

/// The objects of `kind` of the named volumes that `keep` accepts, found through the view's
/// per-volume indexes: a confirmation's per-volume read costs what it returns, not the size of
/// the kind. The indexes key replicas and engines by `spec.volumeName`, the decision's own key,
/// and the selector reads labels: `None` when an object of these volumes has labels that
/// disagree with its spec, which the label filter would otherwise drop unseen.
fn by_volume(
    view: &ClusterView,
    kind: ObjectKind,
    volumes: &BTreeSet<String>,
    keep: &dyn Fn(&Meta) -> bool,
) -> Option<Vec<Object>> {
    fn take<'a, T: Labelled + 'a>(
        out: &mut Vec<Object>,
        found: impl Iterator<Item = &'a T>,
        keep: &dyn Fn(&Meta) -> bool,
    ) -> Option<()> {
        for o in found {
            if o.disagreement().is_some() {
                return None;
            }
            if keep(o.meta()) {
                out.push(T::wrap(Box::new(o.clone())));
            }
        }
        Some(())
    }
    let mut out = Vec::new();
    for v in volumes {
        match kind {
            ObjectKind::Volume => take(&mut out, view.volume(v).into_iter(), keep)?,
            ObjectKind::Replica => take(&mut out, view.replicas_of_volume(v), keep)?,
            ObjectKind::Engine => take(&mut out, view.engines_of_volume(v), keep)?,
            // Other kinds carry no volume label: scan them as for any selector.
            _ => return Some(view.select(kind, keep)),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::Cached;
    use crate::cluster::meta::KEPT_LABELS;
    use crate::cluster::{
        ClusterView, ObjectKind, SharedView, Source, COMPONENT_LABEL, INSTANCE_MANAGER_NODE_LABEL,
        LONGHORN_NODE_LABEL, LONGHORN_VOLUME_LABEL,
    };
    use std::time::{Duration, SystemTime};

    #[test]
    fn a_kind_whose_watch_fails_during_the_confirmation_is_no_longer_answered_from_the_view() {
        let now = SystemTime::now();
        let mut v = ClusterView::new(Source::Watch);
        for kind in ObjectKind::ALL {
            v.replace_kind(kind, Vec::new(), now);
        }
        v.mark_synced();
        let view = SharedView::new(v);
        let cached = Cached::current(&view, now, Duration::from_secs(5));
        assert!(cached.kinds().contains(&ObjectKind::Replica));
        assert_eq!(cached.list(ObjectKind::Replica, None).map(|o| o.len()), Some(0));
        view.update(|v| v.note_watch_failed(ObjectKind::Replica));
        assert!(cached.list(ObjectKind::Replica, None).is_none(), "asked of the API server");
        assert!(cached.list(ObjectKind::Volume, None).is_some(), "the other kinds are still current");
    }

    #[test]
    fn the_view_keeps_every_label_a_confirmation_selects_on() {
        for key in [LONGHORN_NODE_LABEL, LONGHORN_VOLUME_LABEL, INSTANCE_MANAGER_NODE_LABEL, COMPONENT_LABEL]
        {
            assert!(KEPT_LABELS.contains(&key), "{key}");
        }
    }
}
