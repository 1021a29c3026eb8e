//! Turning a [`NodeAnalysis`] into what `kubectl` shows: one denial message with one line
//! per blocking volume, or warnings of at most 120 characters each.

use crate::decision::{clip, MAX_WARNINGS, MAX_WARNING_LEN};
use crate::policy::Policy;

use super::analysis::VolumeReport;
use super::instances::UnmappedInstance;

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

/// `1 volume` / `2 volumes`.
pub fn volumes(n: usize) -> String {
    if n == 1 {
        "1 volume".to_string()
    } else {
        format!("{n} volumes")
    }
}

/// `1 engine instance` / `2 engine instances` that no known volume owns.
pub fn unmapped(n: usize) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{n} engine instance{s} no known volume owns")
}

/// What a drain would do: `strand 2 volumes`, `strand 1 volume and stop 1 engine instance no
/// known volume owns`, or `stop 1 engine instance no known volume owns`.
pub fn impact(volume_count: usize, unmapped_count: usize) -> String {
    match (volume_count, unmapped_count) {
        (v, 0) => format!("strand {}", volumes(v)),
        (0, u) => format!("stop {}", unmapped(u)),
        (v, u) => format!("strand {} and stop {}", volumes(v), unmapped(u)),
    }
}

/// What a drain would wait for: `2 volumes`, `1 volume and 1 engine instance no known volume
/// owns`.
pub fn waits_for(volume_count: usize, unmapped_count: usize) -> String {
    match (volume_count, unmapped_count) {
        (v, 0) => volumes(v),
        (0, u) => unmapped(u),
        (v, u) => format!("{} and {}", volumes(v), unmapped(u)),
    }
}

/// One listed item: its full line and, for warnings, the line without the remedy.
struct Item {
    full: String,
    short: String,
}

fn items(blocking: &[&VolumeReport], unmapped: &[&UnmappedInstance]) -> Vec<Item> {
    let vols = blocking.iter().map(|v| Item { full: v.line(), short: format!("{}: {}", v.volume, v.reason) });
    let ims = unmapped.iter().map(|u| Item { full: u.line(), short: u.reason() });
    vols.chain(ims).collect()
}

/// The denial message: a head line, then one line per volume and per unmapped
/// instance-manager entry (at most `drain.maxListedVolumes`), then `- and N more`.
///
/// `action` is e.g. `draining node-1` or `deleting node node-1`.
pub fn deny_message(
    action: &str,
    node: &str,
    blocking: &[&VolumeReport],
    unmapped: &[&UnmappedInstance],
    policy: &Policy,
) -> String {
    let max = policy.drain.max_listed_volumes.max(1);
    let all = items(blocking, unmapped);
    let mut out = format!("longhorn-guard: {action} would {}:", impact(blocking.len(), unmapped.len()));
    for item in all.iter().take(max) {
        out.push_str("\n- ");
        out.push_str(&item.full);
    }
    if all.len() > max {
        out.push_str(&format!(
            "\n- and {} more (longhorn-guard check drain {node} lists all)",
            all.len() - max
        ));
    }
    out
}

/// The same content as warnings: a head line, one line per item, each clipped to
/// [`MAX_WARNING_LEN`], bounded so that the whole list stays within [`MAX_WARNINGS`].
pub fn warning_lines(
    head: String,
    node: &str,
    blocking: &[&VolumeReport],
    unmapped: &[&UnmappedInstance],
    policy: &Policy,
) -> Vec<String> {
    let room = MAX_WARNINGS.saturating_sub(2).max(1);
    let max = policy.drain.max_listed_volumes.clamp(1, room);
    let all = items(blocking, unmapped);
    let mut out = vec![clip(&head, MAX_WARNING_LEN)];
    for item in all.iter().take(max) {
        // Keep the remedy when it fits; else the reason alone; else clip.
        let pick = if item.full.chars().count() <= MAX_WARNING_LEN { &item.full } else { &item.short };
        out.push(clip(pick, MAX_WARNING_LEN));
    }
    if all.len() > max {
        out.push(clip(
            &format!("and {} more (longhorn-guard check drain {node} lists all)", all.len() - max),
            MAX_WARNING_LEN,
        ));
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
        assert_eq!(volumes(1), "1 volume");
        assert_eq!(volumes(0), "0 volumes");
        assert_eq!(volumes(7), "7 volumes");
        assert_eq!(impact(2, 0), "strand 2 volumes");
        assert_eq!(impact(0, 1), "stop 1 engine instance no known volume owns");
        assert_eq!(impact(1, 2), "strand 1 volume and stop 2 engine instances no known volume owns");
        assert_eq!(waits_for(1, 1), "1 volume and 1 engine instance no known volume owns");
    }
}
