//! Label selectors and query encoding for confirmation reads.

use std::collections::BTreeSet;

use crate::cluster::LONGHORN_VOLUME_LABEL;

/// `longhornvolume in (...)` selectors over `volumes`, each at most `max_bytes` once encoded
/// (with `extra` appended as one more requirement), with how many volumes each names. Names
/// that cannot be label values are left out: no object can carry them as a label, so a
/// selector naming them would only fail.
pub fn volume_selectors(
    volumes: &BTreeSet<String>,
    extra: Option<&str>,
    max_bytes: usize,
) -> Vec<(String, usize)> {
    let head = format!("{LONGHORN_VOLUME_LABEL} in (");
    let tail = extra.map(|e| format!("),{e}")).unwrap_or_else(|| ")".to_string());
    let fixed = head.len() + encode_query_value(&tail).len();
    let mut out = Vec::new();
    let mut current = String::new();
    let mut n = 0;
    for v in volumes.iter().filter(|v| is_label_value(v)) {
        // Names are unreserved characters: the encoded length is the raw length.
        if n > 0 && fixed + current.len() + 1 + v.len() > max_bytes {
            out.push((format!("{head}{current}{tail}"), n));
            current.clear();
            n = 0;
        }
        if n > 0 {
            current.push(',');
        }
        current.push_str(v);
        n += 1;
    }
    if n > 0 {
        out.push((format!("{head}{current}{tail}"), n));
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

    const MAX: usize = crate::cluster::confirm::MAX_SELECTOR_BYTES;

    fn names(n: usize) -> BTreeSet<String> {
        (0..n).map(|i| format!("pvc-{i:08}-0000-4000-8000-{i:012}")).collect()
    }

    #[test]
    fn selectors_stay_under_the_byte_bound_and_name_every_volume_once() {
        let volumes = names(3_000);
        for extra in [None, Some("longhornnode!=node-1")] {
            let sels = volume_selectors(&volumes, extra, MAX);
            assert_eq!(sels.len(), 3);
            let mut seen = BTreeSet::new();
            for (sel, n) in &sels {
                assert!(encode_query_value(sel).len() <= MAX, "{}", sel.len());
                let inner = sel.strip_prefix("longhornvolume in (").unwrap();
                let inner = match extra {
                    Some(e) => inner.strip_suffix(&format!("),{e}")).unwrap(),
                    None => inner.strip_suffix(')').unwrap(),
                };
                let listed: Vec<&str> = inner.split(',').collect();
                assert_eq!(listed.len(), *n);
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
        let two: BTreeSet<String> = ["aaaaaaaaaa", "bbbbbbbbbb"].iter().map(|s| s.to_string()).collect();
        let one = volume_selectors(&two, Some("x!=y"), 50);
        assert_eq!(one, [("longhornvolume in (aaaaaaaaaa,bbbbbbbbbb),x!=y".to_string(), 2)]);
        assert_eq!(encode_query_value(&one[0].0).len(), 50);
        assert_eq!(volume_selectors(&two, Some("x!=y"), 49).len(), 2);
    }

    #[test]
    fn names_that_cannot_be_label_values_are_left_out() {
        let volumes: BTreeSet<String> = ["ok", "bad name", "-dash", &"x".repeat(64), "a,b", "v.1_2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(volume_selectors(&volumes, None, 1024), [("longhornvolume in (ok,v.1_2)".to_string(), 2)]);
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(encode_query_value("longhornnode=node-1"), "longhornnode%3Dnode-1");
        assert_eq!(encode_query_value("longhornvolume in (a,b)"), "longhornvolume+in+(a,b)");
        assert_eq!(encode_query_value("longhorn.io/component=x"), "longhorn.io%2Fcomponent%3Dx");
        assert_eq!(encode_query_value("longhornnode!=n"), "longhornnode%21%3Dn");
    }
}
