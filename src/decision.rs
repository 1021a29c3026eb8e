//! The outcome of one admission decision: allow, deny or patch, with warnings.

use serde::Serialize;

/// Longest warning the API server is guaranteed to pass through unmodified.
pub const MAX_WARNING_LEN: usize = 120;
/// Most warnings a response carries; beyond it the rest are summarised in one line.
pub const MAX_WARNINGS: usize = 8;

/// A field cause in a denial's `status.details.causes`, as Longhorn's own webhook writes it
/// (fields in name order, as they are written).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Cause {
    pub field: String,
    pub message: String,
    #[serde(rename = "type")]
    pub type_: String,
}

/// The `status` of a denial.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DenyStatus {
    /// HTTP-style code: 429 makes `kubectl drain` retry, 4xx others fail at once.
    pub code: u16,
    /// Machine reason, e.g. `TooManyRequests`, `Invalid`, `BadRequest`.
    pub reason: String,
    pub message: String,
    pub causes: Vec<Cause>,
    /// The object a 422 is about, as `status.details` names it: kubectl then prints
    /// `The <Kind> "<name>" is invalid: <field>: <message>`.
    pub subject: Option<Subject>,
}

/// The object a denial is about (`status.details.group`, `kind`, `name`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subject {
    pub group: String,
    pub kind: String,
    pub name: String,
}

/// What a decision was about, for the structured log line and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Details {
    /// The node a drain decision concerned.
    pub node: Option<String>,
    /// Volumes that blocked (or would have blocked) the operation (the view's shared names:
    /// listing every one costs no copy of its text).
    pub volumes: Vec<crate::cluster::Name>,
    /// Set when an operator override changed the outcome; says who and why.
    pub overridden: Option<String>,
    /// Set when the request was allowed without its object, which could not be read (the init
    /// gate never blocks a pod): what is wrong with it. Logged at WARN.
    pub unreadable: Option<String>,
}

/// One admission decision.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub allowed: bool,
    pub status: Option<DenyStatus>,
    pub warnings: Vec<String>,
    pub patch: Option<json_patch::Patch>,
    /// Which rule decided: `drain` (also an instance-manager pod's deletion), `cordon`,
    /// `node-delete`, `instance-manager-delete`, `budget-delete`, `trusted` (a deletion by one
    /// of `drain.trustedUsers`), `replicas`, `settings`, `init-gate`, `bad-request` or `none`.
    pub rule: &'static str,
    pub details: Details,
    /// Set by the drain rule when an allow rests on view data older than the freshness
    /// bound: the edge must confirm the named node's state with a consistent read and decide
    /// again, or deny as "could not confirm". Never set on snapshot views.
    pub confirm_node: Option<String>,
}

impl Decision {
    /// Allowed, no warnings, no patch.
    pub fn allow() -> Self {
        Self {
            allowed: true,
            status: None,
            warnings: Vec::new(),
            patch: None,
            rule: "none",
            details: Details::default(),
            confirm_node: None,
        }
    }

    /// Allowed with warnings.
    pub fn warn(warnings: Vec<String>) -> Self {
        Self { warnings, ..Self::allow() }
    }

    /// Denied with a code, reason and message.
    pub fn deny(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            allowed: false,
            status: Some(DenyStatus {
                code,
                reason: reason.to_string(),
                message: message.into(),
                causes: Vec::new(),
                subject: None,
            }),
            ..Self::allow()
        }
    }

    /// Allowed with a JSON patch.
    pub fn patched(patch: json_patch::Patch) -> Self {
        Self { patch: Some(patch), ..Self::allow() }
    }

    /// Sets the deciding rule's name.
    pub fn rule(mut self, rule: &'static str) -> Self {
        self.rule = rule;
        self
    }

    /// Adds one warning.
    pub fn with_warning(mut self, w: impl Into<String>) -> Self {
        self.warnings.push(w.into());
        self
    }

    /// A label for metrics: `allow`, `warn`, `patch` or `deny`.
    pub fn outcome(&self) -> &'static str {
        if !self.allowed {
            "deny"
        } else if self.patch.as_ref().is_some_and(|p| !p.0.is_empty()) {
            "patch"
        } else if !self.warnings.is_empty() {
            "warn"
        } else {
            "allow"
        }
    }

    /// Enforces the Kubernetes warning limits: each warning at most [`MAX_WARNING_LEN`]
    /// characters (cut with `...`), at most [`MAX_WARNINGS`] of them, the last of which then
    /// says how many more there were.
    pub fn finalize_warnings(&mut self) {
        for w in &mut self.warnings {
            *w = clip(w, MAX_WARNING_LEN);
        }
        if self.warnings.len() > MAX_WARNINGS {
            let more = self.warnings.len() - (MAX_WARNINGS - 1);
            self.warnings.truncate(MAX_WARNINGS - 1);
            self.warnings.push(format!("... and {more} more warnings (see the longhorn-guard log)"));
        }
    }
}

/// `1 volume`, `3 volumes`.
pub fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Cuts `s` to at most `max` characters, ending in `...` when cut. Newlines become spaces.
pub fn clip(s: &str, max: usize) -> String {
    let s = s.replace(['\n', '\r'], " ");
    if s.chars().count() <= max {
        return s;
    }
    let mut out: String = s.chars().take(max.saturating_sub(3)).collect();
    out.push_str("...");
    out
}

/// `s` in lines of at most `max` characters, cut at spaces (a word longer than `max` is
/// clipped). Newlines become spaces.
pub fn wrap(s: &str, max: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in s.split([' ', '\n', '\r']).filter(|w| !w.is_empty()) {
        let (have, more) = (line.chars().count(), word.chars().count());
        if have > 0 && have + 1 + more > max {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines.into_iter().map(|l| clip(&l, max)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_clipped_and_bounded() {
        let mut d = Decision::warn((0..20).map(|i| format!("{i} {}", "x".repeat(200))).collect());
        d.finalize_warnings();
        assert_eq!(d.warnings.len(), MAX_WARNINGS);
        assert!(d.warnings.iter().all(|w| w.chars().count() <= MAX_WARNING_LEN));
        assert_eq!(d.warnings.last().unwrap(), "... and 13 more warnings (see the longhorn-guard log)");
    }

    #[test]
    fn wrapped_lines_keep_every_word_in_order() {
        let text = "Longhorn's budget for instance manager im-1, stale: that instance manager is gone;\nLonghorn deletes it";
        for max in [10, 20, 37, 120] {
            let lines = wrap(text, max);
            assert!(lines.iter().all(|l| l.chars().count() <= max), "{max}: {lines:?}");
            assert_eq!(lines.join(" "), text.replace('\n', " "), "{max}");
            // Each break is needed: the next word would not have fit.
            for pair in lines.windows(2) {
                let next = pair[1].split(' ').next().unwrap();
                assert!(pair[0].chars().count() + 1 + next.chars().count() > max, "{max}: {pair:?}");
            }
        }
        assert_eq!(wrap("a-very-long-word b", 6), ["a-v...", "b"]);
        assert!(wrap(" \n ", 10).is_empty());
    }
}
