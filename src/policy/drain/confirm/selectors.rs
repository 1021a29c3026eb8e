//! Label selectors of confirmation reads: built typed, rendered for the API server
//! ([`fmt::Display`], [`encode_query_value`]) and evaluated on the labels the view keeps
//! ([`Selector::matches`]), so nothing is parsed back.

use std::collections::BTreeSet;
use std::fmt;

use crate::cluster::meta::Meta;
use crate::cluster::LONGHORN_VOLUME_LABEL;

/// One requirement of a [`Selector`], on a label key the code names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value`: the label is there with this value.
    Is(&'static str, String),
    /// `key!=value`: the label is absent or has another value (as the API server evaluates it).
    IsNot(&'static str, String),
    /// `key in (a,b,...)`: the label is there with one of these values.
    In(&'static str, BTreeSet<String>),
}

impl Requirement {
    /// The label key this requirement reads.
    pub fn key(&self) -> &'static str {
        match self {
            Self::Is(k, _) | Self::IsNot(k, _) | Self::In(k, _) => k,
        }
    }

    fn matches(&self, m: &Meta) -> bool {
        let value = m.labels.get(self.key()).map(|v| v.as_str());
        match self {
            Self::Is(_, want) => value == Some(want.as_str()),
            Self::IsNot(_, other) => value != Some(other.as_str()),
            Self::In(_, set) => value.is_some_and(|v| set.contains(v)),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Is(k, v) => write!(f, "{k}={v}"),
            Self::IsNot(k, v) => write!(f, "{k}!={v}"),
            Self::In(k, set) => {
                write!(f, "{k} in ({})", set.iter().map(String::as_str).collect::<Vec<_>>().join(","))
            }
        }
    }
}

/// Requirements that must all hold (the API server's `,`); none selects everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    /// `key=value`.
    pub fn is(key: &'static str, value: impl Into<String>) -> Self {
        Self(vec![Requirement::Is(key, value.into())])
    }

    /// `key!=value`.
    pub fn is_not(key: &'static str, value: impl Into<String>) -> Self {
        Self(vec![Requirement::IsNot(key, value.into())])
    }

    /// This selector and every requirement of `other`.
    pub fn and(mut self, other: &Selector) -> Self {
        self.0.extend(other.0.iter().cloned());
        self
    }

    /// The requirements, in the order they are rendered.
    pub fn requirements(&self) -> &[Requirement] {
        &self.0
    }

    /// True when an object with this metadata is one the API server would return.
    pub fn matches(&self, m: &Meta) -> bool {
        self.0.iter().all(|r| r.matches(m))
    }

    /// The volumes a `longhornvolume in (...)` requirement names, when there is one.
    pub fn volumes(&self) -> Option<&BTreeSet<String>> {
        self.0.iter().find_map(|r| match r {
            Requirement::In(k, set) if *k == LONGHORN_VOLUME_LABEL => Some(set),
            _ => None,
        })
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.iter().map(ToString::to_string).collect::<Vec<_>>().join(","))
    }
}

/// `longhornvolume in (...)` selectors over `volumes`, each at most `max_bytes` once encoded
/// (with the requirements of `extra` after it), with how many volumes each names. Names that
/// cannot be label values are left out: no object can carry them as a label, so a selector
/// naming them would only fail.
pub fn volume_selectors(
    volumes: &BTreeSet<String>,
    extra: Option<&Selector>,
    max_bytes: usize,
) -> Vec<(Selector, usize)> {
    let head = format!("{LONGHORN_VOLUME_LABEL} in (");
    let tail = extra.map(|e| format!("),{e}")).unwrap_or_else(|| ")".to_string());
    let fixed = encode_query_value(&head).len() + encode_query_value(&tail).len();
    let batch = |set: BTreeSet<String>| {
        let selector = Selector(vec![Requirement::In(LONGHORN_VOLUME_LABEL, set)]);
        match extra {
            Some(e) => selector.and(e),
            None => selector,
        }
    };
    let mut out = Vec::new();
    let mut current = BTreeSet::new();
    // Encoded bytes of the names in `current` and the commas between them.
    let mut len = 0;
    for v in volumes.iter().filter(|v| is_label_value(v)) {
        // Names are unreserved characters: the encoded length is the raw length.
        if !current.is_empty() && fixed + len + 1 + v.len() > max_bytes {
            let n = current.len();
            out.push((batch(std::mem::take(&mut current)), n));
            len = 0;
        }
        len += v.len() + usize::from(!current.is_empty());
        current.insert(v.clone());
    }
    if !current.is_empty() {
        let n = current.len();
        out.push((batch(current), n));
    }
    out
}
/// A valid Kubernetes label value: at most 63 of `[A-Za-z0-9-_.]`, alphanumeric at both ends.
pub fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Encodes a query value: unreserved characters and `(),` stay, a space is `+`, the rest `%XX`.
pub fn encode_query_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'(' | b')' | b',' => {
                out.push(char::from(b))
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::LONGHORN_NODE_LABEL;

    const MAX: usize = crate::policy::drain::confirm::MAX_SELECTOR_BYTES;

    fn names(n: usize) -> BTreeSet<String> {
        (0..n).map(|i| format!("pvc-{i:08}-0000-4000-8000-{i:012}")).collect()
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn meta(labels: &[(&str, &str)]) -> Meta {
        Meta { labels: labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(), ..Meta::default() }
    }

    #[test]
    fn selectors_render_and_match_as_the_api_server_reads_them() {
        let on = meta(&[("longhornnode", "n1"), ("longhornvolume", "v1")]);
        let bare = meta(&[]);
        let vols = |names: &[&str]| Selector(vec![Requirement::In(LONGHORN_VOLUME_LABEL, set(names))]);
        for (sel, text, want_on, want_bare) in [
            (Selector::is(LONGHORN_NODE_LABEL, "n1"), "longhornnode=n1", true, false),
            (Selector::is_not(LONGHORN_NODE_LABEL, "n1"), "longhornnode!=n1", false, true),
            (Selector::is_not(LONGHORN_NODE_LABEL, "n2"), "longhornnode!=n2", true, true),
            (
                vols(&["v1", "v0"]).and(&Selector::is_not(LONGHORN_NODE_LABEL, "n2")),
                "longhornvolume in (v0,v1),longhornnode!=n2",
                true,
                false,
            ),
            (vols(&["v0", "v2"]), "longhornvolume in (v0,v2)", false, false),
            (Selector::default(), "", true, true),
        ] {
            assert_eq!(sel.to_string(), text);
            assert_eq!((sel.matches(&on), sel.matches(&bare)), (want_on, want_bare), "{text}");
        }
        assert_eq!(vols(&["a"]).volumes(), Some(&set(&["a"])));
        assert_eq!(Selector::is(LONGHORN_NODE_LABEL, "a").volumes(), None);
    }

    #[test]
    fn selectors_stay_under_the_byte_bound_and_name_every_volume_once() {
        let volumes = names(3_000);
        for extra in [None, Some(Selector::is_not(LONGHORN_NODE_LABEL, "node-1"))] {
            let sels = volume_selectors(&volumes, extra.as_ref(), MAX);
            assert_eq!(sels.len(), 3);
            let mut seen = BTreeSet::new();
            for (sel, n) in &sels {
                let text = sel.to_string();
                assert!(encode_query_value(&text).len() <= MAX, "{}", text.len());
                let inner = text.strip_prefix("longhornvolume in (").unwrap();
                let inner = match &extra {
                    Some(e) => inner.strip_suffix(&format!("),{e}")).unwrap(),
                    None => inner.strip_suffix(')').unwrap(),
                };
                let listed: Vec<&str> = inner.split(',').collect();
                assert_eq!(listed.len(), *n);
                assert_eq!(sel.volumes().map(BTreeSet::len), Some(*n));
                seen.extend(listed.into_iter().map(str::to_string));
            }
            assert_eq!(seen, volumes);
        }
        assert_eq!(volume_selectors(&names(1_000), None, MAX).len(), 1);
        assert!(volume_selectors(&BTreeSet::new(), None, MAX).is_empty());
    }

    #[test]
    fn a_selector_at_the_bound_is_exact() {
        // `longhornvolume+in+(` (19) + two 10-character names and a comma (21) + `),x%21%3Dy` (10).
        let two = set(&["aaaaaaaaaa", "bbbbbbbbbb"]);
        let extra = Selector::is_not("x", "y");
        let one = volume_selectors(&two, Some(&extra), 50);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].0.to_string(), "longhornvolume in (aaaaaaaaaa,bbbbbbbbbb),x!=y");
        assert_eq!(one[0].1, 2);
        assert_eq!(encode_query_value(&one[0].0.to_string()).len(), 50);
        assert_eq!(volume_selectors(&two, Some(&extra), 49).len(), 2);
    }

    #[test]
    fn names_that_cannot_be_label_values_are_left_out() {
        let long = "x".repeat(64);
        let volumes = set(&["ok", "bad name", "-dash", &long, "a,b", "v.1_2"]);
        let sels = volume_selectors(&volumes, None, 1024);
        assert_eq!(sels.len(), 1);
        assert_eq!(sels[0].0.to_string(), "longhornvolume in (ok,v.1_2)");
        assert_eq!(sels[0].1, 2);
    }
}
