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
/// characters and Unicode line and paragraph separators in what is kept are escaped.
pub fn clip_to(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max && !needs_escape(s) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(Clip { s, max, one_line: false }.to_string())
}

/// [`clip_to`] of `s` with its line breaks (`\r`, `\n`) written as spaces: one event, one
/// line. Written as it is displayed: nothing is copied first.
pub fn clip_line_to(s: &str, max: usize) -> Clip<'_> {
    Clip { s, max, one_line: true }
}

/// The [`Display`](std::fmt::Display) of [`clip_to`] and [`clip_line_to`].
pub struct Clip<'a> {
    s: &'a str,
    max: usize,
    /// Line breaks written as spaces.
    one_line: bool,
}

impl std::fmt::Display for Clip<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let end = floor_char_boundary(self.s, self.max);
        write_escaped(f, &self.s[..end], self.one_line)?;
        write_cut(f, self.s.len() - end)
    }
}

/// [`clip_to`] of `parts` joined with `sep`, written as it is displayed and no further than
/// is kept: a decision blocked by thousands of volumes logs their first names, not all of
/// them, and builds no joined string.
pub fn clip_joined<'a, S: AsRef<str>>(parts: &'a [S], sep: &'a str, max: usize) -> Joined<'a, S> {
    Joined { parts, sep, max }
}

/// The [`Display`](std::fmt::Display) of [`clip_joined`].
pub struct Joined<'a, S> {
    parts: &'a [S],
    sep: &'a str,
    max: usize,
}

impl<S: AsRef<str>> std::fmt::Display for Joined<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total = self.parts.iter().map(|p| p.as_ref().len()).sum::<usize>()
            + self.sep.len() * self.parts.len().saturating_sub(1);
        let mut room = self.max;
        let pieces =
            self.parts.iter().enumerate().flat_map(|(i, p)| [if i > 0 { self.sep } else { "" }, p.as_ref()]);
        for piece in pieces {
            let end = floor_char_boundary(piece, room);
            write_escaped(f, &piece[..end], false)?;
            room -= end;
            if end < piece.len() {
                break;
            }
        }
        write_cut(f, total - (self.max - room))
    }
}

/// The largest character boundary of `s` at or before `max`.
fn floor_char_boundary(s: &str, max: usize) -> usize {
    if max >= s.len() {
        return s.len();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// The marker of `cut` bytes left out (nothing when none was).
fn write_cut(f: &mut std::fmt::Formatter<'_>, cut: usize) -> std::fmt::Result {
    match cut {
        0 => Ok(()),
        n => write!(f, "…[+{n} bytes]"),
    }
}

/// Writes `s` with each character of [`breaks_lines`] as an escape (`\n`, `\r`, `\t`, else
/// `\u{hex}`) and a backslash as `\\`, so that every backslash written starts an escape; with
/// `one_line`, `\r` and `\n` as spaces.
fn write_escaped(f: &mut std::fmt::Formatter<'_>, s: &str, one_line: bool) -> std::fmt::Result {
    let bytes = s.as_bytes();
    let mut from = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Plain ASCII is skipped a word at a time; only a word with something else in it is
        // read by character.
        if crate::swar::word_at(bytes, i).is_some_and(plain_word) {
            i += 8;
            continue;
        }
        let Some(c) = s.get(i..).and_then(|rest| rest.chars().next()) else { break };
        let at = i;
        i += c.len_utf8();
        if !(breaks_lines(c) || c == '\\') {
            continue;
        }
        f.write_str(&s[from..at])?;
        match c {
            '\r' | '\n' if one_line => f.write_str(" ")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            '\\' => f.write_str("\\\\")?,
            c => write!(f, "\\u{{{:x}}}", c as u32)?,
        }
        from = i;
    }
    f.write_str(&s[from..])
}

/// True when each of the 8 bytes of `w` is printable ASCII (0x20 to 0x7e) other than `\`:
/// a word [`write_escaped`] writes as it is.
fn plain_word(w: u64) -> bool {
    use crate::swar::{has_below, has_byte, has_high};
    !(has_high(w) || has_below(w, 0x20) || has_byte(w, b'\\') || has_byte(w, 0x7f))
}

/// True for a character that could break a log line or a terminal: C0/C1 controls (newline,
/// carriage return, escape, ...) and U+2028 / U+2029.
fn breaks_lines(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// True when [`write_escaped`] would change `s`.
fn needs_escape(s: &str) -> bool {
    // Printable ASCII without a backslash, byte by byte (the common case), else by character.
    let plain = |b: u8| (0x20..0x7f).contains(&b) && b != b'\\';
    !s.bytes().all(plain) && s.chars().any(|c| breaks_lines(c) || c == '\\')
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

    #[test]
    fn a_character_to_escape_is_found_at_any_offset_in_a_word() {
        // Every character class, at every position of a word and across word boundaries: the
        // word-at-a-time skip must stop wherever the character-by-character reading would.
        let by_char = |s: &str| -> String {
            s.chars()
                .map(|c| match c {
                    '\n' => "\\n".to_string(),
                    '\r' => "\\r".to_string(),
                    '\t' => "\\t".to_string(),
                    '\\' => "\\\\".to_string(),
                    c if breaks_lines(c) => format!("\\u{{{:x}}}", c as u32),
                    c => c.to_string(),
                })
                .collect()
        };
        let odd =
            ['\0', '\x01', '\x1f', ' ', '~', '\x7f', '\\', '\n', '\u{80}', '\u{9f}', 'é', '\u{2028}', '😀'];
        for c in odd {
            for at in 0..20 {
                let s = format!("{}{c}{}", "a".repeat(at), "b".repeat(19 - at));
                assert_eq!(clip_to(&s, 1000), by_char(&s), "{c:?} at {at}");
            }
        }
    }

    #[test]
    fn a_clipped_join_is_the_clipped_joined_string() {
        let parts: Vec<String> = (0..40).map(|i| format!("vol-{i}-{}", "é\n".repeat(i % 4))).collect();
        for n in [0, 1, 2, 5, 40] {
            for max in [0, 1, 3, 7, 8, 9, 30, 100, 384, 10_000] {
                let want = clip_to(&parts[..n].join(","), max).into_owned();
                assert_eq!(clip_joined(&parts[..n], ",", max).to_string(), want, "{n} parts, max {max}");
            }
        }
    }

    #[test]
    fn a_clipped_line_is_the_clipped_string_with_spaces_for_line_breaks() {
        let long = format!("head:\r\n- a\u{1b}b\n- {}\n- end", "é".repeat(300));
        for s in ["", "one line", "two\nlines\r\n", "tab\there\\", long.as_str()] {
            for max in [0, 1, 4, 6, 7, 100, 384, 10_000] {
                let want = clip_to(&s.replace(['\r', '\n'], " "), max).into_owned();
                assert_eq!(clip_line_to(s, max).to_string(), want, "{s:?} at {max}");
            }
        }
    }
}
