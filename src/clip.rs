//! Bounded log fields: a request-supplied string is cut to a fixed length with a marker, so
//! no request can make a log line longer than a few kilobytes.

use std::borrow::Cow;

/// Longest identifier (uid, name, user, resource, node) kept whole in a log field, in bytes.
pub const MAX_FIELD: usize = 128;
/// Longest free-text field (a reason, a list) kept whole, in bytes.
pub const MAX_TEXT: usize = 384;

/// `s` cut to [`MAX_FIELD`] bytes (see [`clip_to`]).
pub fn clip(s: &str) -> Cow<'_, str> {
    clip_to(s, MAX_FIELD)
}

/// `s` unchanged when at most `max` bytes; otherwise its first `max` bytes (at a character
/// boundary) followed by `…[+N bytes]`, N the number of bytes cut.
pub fn clip_to(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…[+{} bytes]", &s[..end], s.len() - end))
}

/// The text of a panic payload (`panic!` with a literal or a formatted message), for a log field.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-text panic payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_strings_pass_long_ones_are_cut_with_a_marker() {
        assert_eq!(clip("node-1"), "node-1");
        let long = "x".repeat(1 << 20);
        let cut = clip(&long);
        assert_eq!(cut, format!("{}…[+{} bytes]", "x".repeat(MAX_FIELD), (1 << 20) - MAX_FIELD));
        // Never splits a character.
        let wide = "é".repeat(100); // 200 bytes
        let cut = clip_to(&wide, 5);
        assert_eq!(cut, "éé…[+196 bytes]");
    }
}
