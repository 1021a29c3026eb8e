//! Bounded log fields: a request-supplied string is cut to a fixed length with a marker, so
//! no request can make a log line longer than a few kilobytes, and its control characters are
//! escaped (`\n`, `\u{1b}`), so no request can start a log line of its own. A backslash is
//! written `\\`, so a typed `\n` cannot pass for an escaped newline.

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
/// boundary) followed by `…[+N bytes]`, N the number of bytes cut. Either way, control
/// characters and Unicode line and paragraph separators in what is kept are escaped (`\n`,
/// `\r`, `\t`, else `\u{hex}`), and a backslash is written `\\`, so that every backslash
/// written starts an escape.
pub fn clip_to(s: &str, max: usize) -> Cow<'_, str> {
    // The largest character boundary at or before `max`.
    let end = (0..=max.min(s.len())).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
    let kept = &s[..end];
    if end == s.len() && !kept.chars().any(|c| breaks_lines(c) || c == '\\') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(kept.len() + 16);
    for c in kept.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if breaks_lines(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    if end < s.len() {
        out.push_str(&format!("…[+{} bytes]", s.len() - end));
    }
    Cow::Owned(out)
}

/// True for a character that could break a log line or a terminal: C0/C1 controls (newline,
/// carriage return, escape, ...) and U+2028 / U+2029.
fn breaks_lines(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// True when `v` prints exactly `text`, compared as it is written (no copy of its text is made).
pub fn prints_as(v: &impl std::fmt::Display, text: &str) -> bool {
    struct Rest<'a>(&'a str);
    impl std::fmt::Write for Rest<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 = self.0.strip_prefix(s).ok_or(std::fmt::Error)?;
            Ok(())
        }
    }
    let mut rest = Rest(text);
    std::fmt::write(&mut rest, format_args!("{v}")).is_ok() && rest.0.is_empty()
}

/// `s` on one line: each run of white space (line breaks included) as one space.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text of a panic payload (`panic!` with a literal or a formatted message), for a log field.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload.downcast_ref::<&str>().copied();
    let text = text.or_else(|| payload.downcast_ref::<String>().map(String::as_str));
    text.unwrap_or("non-text panic payload").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_compares_the_whole_text_as_written() {
        let v = format_args!("{} ago", 37);
        assert!(prints_as(&v, "37 ago"));
        for other in ["37 ag", "37 ago!", "", "36 ago"] {
            assert!(!prints_as(&v, other), "{other:?}");
        }
    }

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

    #[test]
    fn control_characters_are_escaped_so_a_field_stays_on_its_line() {
        let forged =
            "PATCH\n2026-12-01T00:00:00Z  WARN admission allowed by operator override\r\t\u{1b}[31m\u{2028}";
        let got = clip(forged);
        assert_eq!(
            got,
            "PATCH\\n2026-12-01T00:00:00Z  WARN admission allowed by operator override\\r\\t\\u{1b}[31m\\u{2028}"
        );
        assert!(!got.chars().any(breaks_lines));
        // Plain text is borrowed as it is; a cut string is escaped and counts the original bytes.
        assert!(matches!(clip("node-1"), Cow::Borrowed(_)));
        let long = format!("a\nb{}", "x".repeat(200));
        assert_eq!(clip_to(&long, 4), "a\\nbx…[+199 bytes]");
        // A typed backslash-n is not an escaped newline.
        assert_eq!(clip("a\\nb"), "a\\\\nb");
        assert_ne!(clip("a\\nb"), clip("a\nb"));
    }
}
