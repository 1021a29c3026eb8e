//! Turning the drain analysis into what `kubectl` shows: one denial message with one line
//! per listed volume, or warnings of at most [`MAX_WARNING_LEN`] characters each. Its
//! [`reasons`] module is the one place the typed findings become words.

use std::fmt::{self, Display, Formatter, Write as _};

use crate::decision::{clip, count, MAX_WARNINGS, MAX_WARNING_LEN};
use crate::policy::Policy;

use super::analysis::Explained;
use super::instances::UnmappedInstance;

pub mod budget;
pub mod reasons;

/// The machine reason for a denial code, as the Kubernetes API names it.
pub fn reason_for(code: u16) -> &'static str {
    match code {
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Gone",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        400..=499 => "BadRequest",
        _ => "InternalError",
    }
}

/// `1 engine instance` / `2 engine instances` that no known volume owns.
fn unmapped(n: usize) -> String {
    format!("{} no known volume owns", count(n, "engine instance"))
}

/// What a drain would do: `strand 2 volumes`, `strand 1 volume and stop 1 engine instance no
/// known volume owns`, or `stop 1 engine instance no known volume owns`.
pub fn impact(volume_count: usize, unmapped_count: usize) -> String {
    match (volume_count, unmapped_count) {
        (v, 0) => format!("strand {}", count(v, "volume")),
        (0, u) => format!("stop {}", unmapped(u)),
        (v, u) => format!("strand {} and stop {}", count(v, "volume"), unmapped(u)),
    }
}

/// What a drain would wait for: `2 volumes`, `1 volume and 1 engine instance no known volume
/// owns`.
pub fn waits_for(volume_count: usize, unmapped_count: usize) -> String {
    match (volume_count, unmapped_count) {
        (v, 0) => count(v, "volume"),
        (0, u) => unmapped(u),
        (v, u) => format!("{} and {}", count(v, "volume"), unmapped(u)),
    }
}

/// What a message lists: the reports on the first volumes (as many as it shows, see
/// [`listed_in_denial`] and [`listed_in_warnings`]), how many volumes there are in all, then
/// the unmapped entries.
#[derive(Clone, Copy, Debug)]
pub struct Listing<'a> {
    pub shown: &'a [Explained],
    pub volumes: usize,
    pub unmapped: &'a [&'a UnmappedInstance],
}

impl Listing<'_> {
    fn total(&self) -> usize {
        self.volumes + self.unmapped.len()
    }

    /// The first `max` items, volumes first.
    fn items(&self, max: usize) -> impl Iterator<Item = Item<'_>> + '_ {
        let vols = self.shown.iter().map(Item::Volume);
        let ims = self.unmapped.iter().map(|u| Item::Unmapped(u));
        vols.chain(ims).take(max)
    }
}

/// One listed volume or unmapped entry.
#[derive(Clone, Copy)]
enum Item<'a> {
    Volume(&'a Explained),
    Unmapped(&'a UnmappedInstance),
}

/// Its full line, with the remedy.
impl Display for Item<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::Volume(v) => v.line().fmt(f),
            Self::Unmapped(u) => f.write_str(&u.line()),
        }
    }
}

impl Item<'_> {
    /// The line without the remedy (for a warning the full line does not fit).
    fn short(self) -> String {
        match self {
            Self::Volume(v) => format!("{}: {}", v.volume, v.reason),
            Self::Unmapped(u) => u.reason(),
        }
    }
}

/// How many volumes and entries a denial lists (`drain.maxListedVolumes`, at least 1).
pub fn listed_in_denial(policy: &Policy) -> usize {
    policy.drain.max_listed_volumes.max(1)
}

/// How many volumes and entries a warning list shows: `drain.maxListedVolumes`, bounded so
/// that the whole list stays within [`MAX_WARNINGS`].
pub fn listed_in_warnings(policy: &Policy) -> usize {
    let room = MAX_WARNINGS.saturating_sub(2).max(1);
    policy.drain.max_listed_volumes.clamp(1, room)
}

/// `and N more (longhorn-guard check drain NODE lists all)`.
fn more(n: usize, node: &str) -> String {
    format!("and {n} more (longhorn-guard check drain {node} lists all)")
}

/// The denial message: a head line, then one line per volume and per unmapped
/// instance-manager entry (at most [`listed_in_denial`]), then `- and N more`.
///
/// `action` is e.g. `draining node-1` or `deleting node node-1`.
pub fn deny_message(action: &str, node: &str, listing: Listing, policy: &Policy) -> String {
    let head =
        format_args!("longhorn-guard: {action} would {}:", impact(listing.volumes, listing.unmapped.len()));
    denial(head, node, listing, policy)
}

/// A denial message: `head`, then the lines of [`deny_message`].
pub fn denial(head: impl Display, node: &str, listing: Listing, policy: &Policy) -> String {
    let max = listed_in_denial(policy);
    // One buffer for the whole message (writing into a String cannot fail).
    let mut out = String::with_capacity(256 * (2 + max.min(listing.total())));
    let _ = write!(out, "{head}");
    for item in listing.items(max) {
        let _ = write!(out, "\n- {item}");
    }
    if listing.total() > max {
        out.push_str("\n- ");
        out.push_str(&more(listing.total() - max, node));
    }
    out
}

/// The same content as warnings: a head line, one line per item, each clipped to
/// [`MAX_WARNING_LEN`], at most [`listed_in_warnings`] items.
pub fn warning_lines(head: String, node: &str, listing: Listing, policy: &Policy) -> Vec<String> {
    let max = listed_in_warnings(policy);
    let mut out = vec![clip(&head, MAX_WARNING_LEN)];
    for item in listing.items(max) {
        // Keep the remedy when it fits; else the reason alone; else clip.
        let full = item.to_string();
        let pick = if full.chars().count() <= MAX_WARNING_LEN { full } else { item.short() };
        out.push(clip(&pick, MAX_WARNING_LEN));
    }
    if listing.total() > max {
        out.push(clip(&more(listing.total() - max, node), MAX_WARNING_LEN));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_api_reasons() {
        for (code, reason) in [
            (429, "TooManyRequests"),
            (403, "Forbidden"),
            (422, "Invalid"),
            (409, "Conflict"),
            (418, "BadRequest"),
            (503, "ServiceUnavailable"),
            (599, "InternalError"),
        ] {
            assert_eq!(reason_for(code), reason, "{code}");
        }
    }

    #[test]
    fn volume_counts_read_naturally() {
        assert_eq!(impact(2, 0), "strand 2 volumes");
        assert_eq!(impact(0, 1), "stop 1 engine instance no known volume owns");
        assert_eq!(impact(1, 2), "strand 1 volume and stop 2 engine instances no known volume owns");
        assert_eq!(waits_for(1, 1), "1 volume and 1 engine instance no known volume owns");
    }
}
