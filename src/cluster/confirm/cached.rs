//! Confirmation reads answered from the watch view, for the kinds it holds current.
//!
//! An allow rests on the watch view when every kind received data within `drain.maxViewAge`
//! (none failing, none unreadable). A confirmation is needed when some kinds did not; the
//! kinds that did are current by that same rule, so their reads are answered from the view
//! (the same selectors, evaluated on the labels the view keeps) and only the others go to the
//! API server. In a busy cluster the big kinds (engines, volumes) change all the time and the
//! quiet ones (settings, pods) are small: a confirmation then reads what is small.

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, SystemTime};

use super::super::meta::{Meta, KEPT_LABELS};
use super::super::{readset, ClusterView, Kind, Object, ObjectKind, SharedView, LONGHORN_VOLUME_LABEL};

/// The watch view and the kinds it holds current for one confirmation.
pub struct Cached {
    view: SharedView,
    kinds: BTreeSet<ObjectKind>,
}

impl Cached {
    /// The kinds of `view` current at `now` under `max_age`, fixed for this confirmation.
    pub fn current(view: &SharedView, now: SystemTime, max_age: Duration) -> Self {
        let kinds = view.read().current_kinds(now, max_age);
        Self { view: view.clone(), kinds }
    }

    /// The kinds answered from the view.
    pub fn kinds(&self) -> &BTreeSet<ObjectKind> {
        &self.kinds
    }

    /// The objects a LIST of `kind` with `selector` would return, from the view; `None` when
    /// the kind is not current or the selector is not one the view can answer (it names a
    /// label the view does not keep, or is not understood): then the API server is asked.
    pub fn list(&self, kind: ObjectKind, selector: Option<&str>) -> Option<Vec<Object>> {
        if !self.kinds.contains(&kind) {
            return None;
        }
        let selector = match selector {
            Some(s) => Selector::parse(s)?,
            None => Selector::default(),
        };
        let namespace = readset::resource(kind).namespace;
        let keep =
            |m: &Meta| namespace.is_none_or(|ns| m.namespace.as_deref() == Some(ns)) && selector.matches(m);
        let view = self.view.read();
        Some(match selector.volumes() {
            Some(volumes) => by_volume(&view, kind, volumes, &keep),
            None => select(&view, kind, keep),
        })
    }
}

/// The objects of `kind` of the named volumes that `keep` accepts, found through the view's
/// per-volume indexes: a confirmation's per-volume read costs what it returns, not the size of
/// the kind. The indexes key replicas and engines by `spec.volumeName`, the decision's own key;
/// an object whose `longhornvolume` label names another volume than its spec is one no decision
/// about these volumes reads, so leaving it out changes no answer.
fn by_volume(
    view: &ClusterView,
    kind: ObjectKind,
    volumes: &HashSet<String>,
    keep: &dyn Fn(&Meta) -> bool,
) -> Vec<Object> {
    let mut out = Vec::new();
    for v in volumes {
        match kind {
            ObjectKind::Volume => out.extend(
                view.volume(v).filter(|o| keep(&o.metadata)).map(|o| Object::Volume(Box::new(o.clone()))),
            ),
            ObjectKind::Replica => out.extend(
                view.replicas_of_volume(v)
                    .filter(|o| keep(&o.metadata))
                    .map(|o| Object::Replica(Box::new(o.clone()))),
            ),
            ObjectKind::Engine => out.extend(
                view.engines_of_volume(v)
                    .filter(|o| keep(&o.metadata))
                    .map(|o| Object::Engine(Box::new(o.clone()))),
            ),
            // Other kinds carry no volume label: scan them as for any selector.
            _ => return select(view, kind, keep),
        }
    }
    out
}

/// Clones of the objects of `kind` whose metadata `keep` accepts.
fn select(view: &ClusterView, kind: ObjectKind, keep: impl Fn(&Meta) -> bool) -> Vec<Object> {
    fn pick<T: Clone>(
        of: &Kind<T>,
        keep: &dyn Fn(&Meta) -> bool,
        meta: fn(&T) -> &Meta,
        wrap: fn(Box<T>) -> Object,
    ) -> Vec<Object> {
        of.values().filter(|o| keep(meta(o))).map(|o| wrap(o.clone())).collect()
    }
    let keep: &dyn Fn(&Meta) -> bool = &keep;
    match kind {
        ObjectKind::Node => pick(&view.nodes, keep, |o| &o.metadata, Object::Node),
        ObjectKind::Pod => {
            view.pods.values().flat_map(|pods| pick(pods, keep, |o| &o.metadata, Object::Pod)).collect()
        }
        ObjectKind::StorageClass => pick(&view.storage_classes, keep, |o| &o.metadata, Object::StorageClass),
        ObjectKind::Volume => pick(&view.volumes, keep, |o| &o.metadata, Object::Volume),
        ObjectKind::Replica => pick(&view.replicas, keep, |o| &o.metadata, Object::Replica),
        ObjectKind::Engine => pick(&view.engines, keep, |o| &o.metadata, Object::Engine),
        ObjectKind::LonghornNode => pick(&view.longhorn_nodes, keep, |o| &o.metadata, Object::LonghornNode),
        ObjectKind::Setting => pick(&view.settings, keep, |o| &o.metadata, Object::Setting),
        ObjectKind::InstanceManager => {
            pick(&view.instance_managers, keep, |o| &o.metadata, Object::InstanceManager)
        }
    }
}

/// A label selector as the confirmation writes them: requirements joined by `,`, each
/// `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` or `!k`, on labels the view keeps.
#[derive(Debug, Default)]
struct Selector(Vec<Requirement>);

#[derive(Debug)]
enum Requirement {
    In(String, HashSet<String>),
    NotIn(String, HashSet<String>),
    Exists(String),
    Absent(String),
}

impl Selector {
    fn parse(s: &str) -> Option<Self> {
        let mut out = Vec::new();
        let mut depth = 0usize;
        let mut start = 0;
        for (i, c) in s.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.checked_sub(1)?,
                ',' if depth == 0 => {
                    out.push(Requirement::parse(&s[start..i])?);
                    start = i + 1;
                }
                _ => {}
            }
        }
        if depth != 0 {
            return None;
        }
        if !s[start..].trim().is_empty() || !out.is_empty() {
            out.push(Requirement::parse(&s[start..])?);
        }
        Some(Self(out))
    }

    fn matches(&self, m: &Meta) -> bool {
        self.0.iter().all(|r| r.matches(m))
    }

    /// The volumes a `longhornvolume in (...)` requirement names, when there is one.
    fn volumes(&self) -> Option<&HashSet<String>> {
        self.0.iter().find_map(|r| match r {
            Requirement::In(k, set) if k == LONGHORN_VOLUME_LABEL => Some(set),
            _ => None,
        })
    }
}

impl Requirement {
    fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let key = |k: &str| {
            let k = k.trim();
            KEPT_LABELS.contains(&k).then(|| k.to_string())
        };
        let set = |v: &str| -> Option<HashSet<String>> {
            let inner = v.trim().strip_prefix('(')?.strip_suffix(')')?;
            Some(inner.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect())
        };
        if let Some(k) = s.strip_prefix('!') {
            return Some(Self::Absent(key(k)?));
        }
        if let Some((k, v)) = s.split_once("!=") {
            return Some(Self::NotIn(key(k)?, HashSet::from([v.trim().to_string()])));
        }
        if let Some((k, v)) = s.split_once("==").or_else(|| s.split_once('=')) {
            return Some(Self::In(key(k)?, HashSet::from([v.trim().to_string()])));
        }
        if let Some((k, v)) = s.split_once(" notin ") {
            return Some(Self::NotIn(key(k)?, set(v)?));
        }
        if let Some((k, v)) = s.split_once(" in ") {
            return Some(Self::In(key(k)?, set(v)?));
        }
        Some(Self::Exists(key(s)?))
    }

    /// As the API server evaluates it: `in` needs the label, `notin` and `!=` match without it.
    fn matches(&self, m: &Meta) -> bool {
        let value = |k: &str| m.labels.get(k).map(|v| v.as_str());
        match self {
            Self::In(k, set) => value(k).is_some_and(|v| set.contains(v)),
            Self::NotIn(k, set) => value(k).is_none_or(|v| !set.contains(v)),
            Self::Exists(k) => value(k).is_some(),
            Self::Absent(k) => value(k).is_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(labels: &[(&str, &str)]) -> Meta {
        Meta { labels: labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(), ..Meta::default() }
    }

    #[test]
    fn selectors_match_as_the_api_server_evaluates_them() {
        let on = meta(&[("longhornnode", "n1"), ("longhornvolume", "v1")]);
        let bare = meta(&[]);
        for (sel, want_on, want_bare) in [
            ("longhornnode=n1", true, false),
            ("longhornnode==n1", true, false),
            ("longhornnode!=n1", false, true),
            ("longhornnode!=n2", true, true),
            ("longhornvolume in (v0,v1),longhornnode!=n2", true, false),
            ("longhornvolume in (v0, v2)", false, false),
            ("longhornvolume notin (v1)", false, true),
            ("longhornnode", true, false),
            ("!longhornnode", false, true),
            ("", true, true),
        ] {
            let s = Selector::parse(sel).unwrap_or_else(|| panic!("{sel}"));
            assert_eq!((s.matches(&on), s.matches(&bare)), (want_on, want_bare), "{sel}");
        }
        // Labels the view drops, and what is not understood, go to the API server.
        for sel in ["app=x", "longhornvolume in (v1", "longhornvolume in v1", "longhornnode=n1,", "a)b("] {
            assert!(Selector::parse(sel).is_none(), "{sel}");
        }
    }
}
