//! The two JSON values the response writes by hand: strings, escaped exactly as
//! `serde_json` escapes them (`\"`, `\\`, `\b \f \n \r \t`, other controls as `\u00xx`,
//! everything else as it is), and unsigned integers.

/// True when a byte of `word` is a control character, `"` or `\` (may also be true when
/// none is: the caller then looks at each byte; never false when one is).
fn may_need_escape(word: u64) -> bool {
    use crate::swar::{has_below, has_byte};
    has_below(word, 0x20) || has_byte(word, b'"') || has_byte(word, b'\\')
}

/// The escape of one byte, or `None` when it is written as it is.
fn escape(b: u8) -> Option<&'static [u8]> {
    Some(match b {
        b'"' => b"\\\"",
        b'\\' => b"\\\\",
        0x08 => b"\\b",
        0x0c => b"\\f",
        b'\n' => b"\\n",
        b'\r' => b"\\r",
        b'\t' => b"\\t",
        0x00..=0x1f => &[],
        _ => return None,
    })
}

/// `s` as a JSON string, quotes included, at the end of `out`.
pub fn string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        // Eight bytes at a time while none of them needs an escape.
        while let Some(word) = crate::swar::word_at(bytes, i) {
            if may_need_escape(word) {
                break;
            }
            i += 8;
        }
        let Some(&b) = bytes.get(i) else { break };
        if let Some(esc) = escape(b) {
            out.extend_from_slice(&bytes[start..i]);
            if esc.is_empty() {
                out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ]);
            } else {
                out.extend_from_slice(esc);
            }
            start = i + 1;
        }
        i += 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// `key` as it is (its quotes, colon and any leading comma), then `value` as a string.
pub fn member(out: &mut Vec<u8>, key: &[u8], value: &str) {
    out.extend_from_slice(key);
    string(out, value);
}

/// `n` in decimal at the end of `out`.
pub fn unsigned(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn written(s: &str) -> String {
        let mut out = Vec::new();
        string(&mut out, s);
        String::from_utf8(out).expect("UTF-8 in, UTF-8 out")
    }

    #[test]
    fn every_byte_is_escaped_as_serde_json_escapes_it() {
        for b in 0u8..=0x7f {
            let s = (b as char).to_string();
            assert_eq!(written(&s), serde_json::to_string(&s).unwrap(), "byte {b:#04x}");
            // At every offset within and across an eight-byte word.
            for at in 0..20 {
                let long = format!("{}{s}{}", "a".repeat(at), "z".repeat(19 - at));
                assert_eq!(written(&long), serde_json::to_string(&long).unwrap(), "byte {b:#04x} at {at}");
            }
        }
        assert_eq!(written(""), "\"\"");
    }

    #[test]
    fn integers_are_decimal() {
        for n in [0u64, 7, 10, 429, 65_535, u64::MAX] {
            let mut out = Vec::new();
            unsigned(&mut out, n);
            assert_eq!(out, n.to_string().into_bytes());
        }
    }

    proptest! {
        #[test]
        fn any_string_is_written_as_serde_json_writes_it(s in any::<String>(), t in "[ -~\\n\\t\"\\\\é✓\\x00-\\x1f]{0,80}") {
            prop_assert_eq!(written(&s), serde_json::to_string(&s).unwrap());
            prop_assert_eq!(written(&t), serde_json::to_string(&t).unwrap());
        }
    }
}
