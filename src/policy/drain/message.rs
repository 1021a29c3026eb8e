//! Turning a [`NodeAnalysis`] into what `kubectl` shows: one denial message with one line
//! per blocking volume, or warnings of at most 120 characters each.

use crate::decision::{clip, MAX_WARNINGS, MAX_WARNING_LEN};
use crate::policy::Policy;

use super::analysis::VolumeReport;

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

/// The denial message: a head line, then one line per volume (at most
/// `drain.maxListedVolumes`), then `- and N more`.
///
/// `action` is e.g. `draining node-1` or `deleting node node-1`.
pub fn deny_message(action: &str, node: &str, blocking: &[&VolumeReport], policy: &Policy) -> String {
    let max = policy.drain.max_listed_volumes.max(1);
    let mut out = format!("longhorn-guard: {action} would strand {}:", volumes(blocking.len()));
    for v in blocking.iter().take(max) {
        out.push_str("\n- ");
        out.push_str(&v.line());
    }
    if blocking.len() > max {
        out.push_str(&format!(
            "\n- and {} more (longhorn-guard check drain {node} lists all)",
            blocking.len() - max
        ));
    }
    out
}

/// The same content as warnings: a head line, one line per volume, each clipped to
/// [`MAX_WARNING_LEN`], bounded so that the whole list stays within [`MAX_WARNINGS`].
pub fn warning_lines(head: String, node: &str, blocking: &[&VolumeReport], policy: &Policy) -> Vec<String> {
    let room = MAX_WARNINGS.saturating_sub(2).max(1);
    let max = policy.drain.max_listed_volumes.clamp(1, room);
    let mut out = vec![clip(&head, MAX_WARNING_LEN)];
    for v in blocking.iter().take(max) {
        // Keep the remedy when it fits; else the reason alone; else clip.
        let line = v.line();
        let short = format!("{}: {}", v.volume, v.reason);
        let pick = if line.chars().count() <= MAX_WARNING_LEN { line } else { short };
        out.push(clip(&pick, MAX_WARNING_LEN));
    }
    if blocking.len() > max {
        out.push(clip(
            &format!("and {} more (longhorn-guard check drain {node} lists all)", blocking.len() - max),
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
    }
}
