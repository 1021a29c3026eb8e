//! How the replica rules word a count, and how they keep a message within the warning limit.

use serde_json::Value;

use super::PREFIX;
use crate::decision::MAX_WARNING_LEN;

/// What `n` replicas mean, in words.
pub fn trade_off(n: i64) -> String {
    match n {
        ..=1 => "no redundancy, one node failure loses data".to_string(),
        2 => "2 replicas tolerate 1 node failure".to_string(),
        n => format!("{n} replicas tolerate {} node failures", n - 1),
    }
}

/// What a per-object count means, after `numberOfReplicas=N `.
pub(super) fn tolerates(n: i64) -> String {
    match n {
        ..=1 => "has no redundancy".to_string(),
        2 => "tolerates 1 node failure".to_string(),
        n => format!("tolerates {} node failures", n - 1),
    }
}

/// Shortens `s` to at most `max` characters by cutting its middle (`pvc-3f1c...3c4d4e5f`).
pub fn clip_middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    if max <= 3 {
        return ".".repeat(max);
    }
    let keep = max - 3;
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let h: String = s.chars().take(head).collect();
    let t: String = s.chars().skip(n - tail).collect();
    format!("{h}...{t}")
}

/// `longhorn-guard: {subject} {name}: {text}` within the warning limit. A name is kept whole
/// so it can be copied: when the line is too long the `short` text replaces `text`, and only
/// a name that does not fit even then is clipped in the middle.
pub fn about(subject: &str, name: &str, text: &str, short: &str) -> String {
    let line = |t: &str| format!("{PREFIX}{subject} {name}: {t}");
    for t in [text, short] {
        let l = line(t);
        if l.chars().count() <= MAX_WARNING_LEN {
            return l;
        }
    }
    let fixed = PREFIX.len() + subject.len() + 1 + 2 + short.chars().count();
    let budget = MAX_WARNING_LEN.saturating_sub(fixed).max(8);
    format!("{PREFIX}{subject} {}: {short}", clip_middle(name, budget))
}

pub(super) fn quoted(s: &str) -> String {
    format!("\"{}\"", clip_middle(s, 20))
}

pub(super) fn quoted_json(v: &Value) -> String {
    match v {
        Value::String(s) => quoted(s),
        other => clip_middle(&other.to_string(), 20),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn about_keeps_the_name_and_shortens_the_text() {
        let text = "numberOfReplicas=1 has no redundancy; policy minimum is 3";
        let line = about("volume", "data-0", text, "short");
        assert_eq!(line, format!("longhorn-guard: volume data-0: {text}"));
        // A 40-character PVC name: the whole name, the short text.
        let name = "pvc-6a2e4c1d-8b3f-4e5a-9c7d-1f0e2d3c4b5a";
        assert_eq!(about("volume", name, text, "short"), format!("longhorn-guard: volume {name}: short"));
        let long = "x".repeat(90);
        let line = about("volume", name, &long, "numberOfReplicas=1, below 3");
        assert_eq!(line, format!("longhorn-guard: volume {name}: numberOfReplicas=1, below 3"));
        let huge = "v".repeat(253);
        let line = about("volume", &huge, &long, "numberOfReplicas=1, below 3");
        assert_eq!(line.chars().count(), MAX_WARNING_LEN, "{line}");
        assert!(line.starts_with("longhorn-guard: volume vvv"), "{line}");
        assert!(line.ends_with("vvv: numberOfReplicas=1, below 3") && line.contains("v...v"), "{line}");
    }
}
