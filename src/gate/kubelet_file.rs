//! The downward-API annotations file as the kubelet writes it (`fieldpath.FormatMap`): one
//! `key="value"` line per annotation, keys sorted, values quoted like Go's `%q`.

use std::collections::BTreeMap;

/// The annotations of the file's text.
pub fn parse_kubelet_map(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Some((key, quoted)) = line.split_once('=') else {
            return Err(format!("line {} has no '=': {:?}", i + 1, crate::decision::clip(line, 60)));
        };
        let value = unquote_go(quoted).map_err(|e| format!("line {} (key {key:?}): {e}", i + 1))?;
        map.insert(key.to_string(), value);
    }
    Ok(map)
}

/// Reverses Go's `strconv.Quote`: a double-quoted string with Go escapes
/// (`\a \b \f \n \r \t \v \\ \"`, `\NNN` octal, `\xNN`, `\uNNNN`, `\UNNNNNNNN`).
pub fn unquote_go(s: &str) -> Result<String, String> {
    let inner = s
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .filter(|_| s.len() >= 2)
        .ok_or_else(|| "value is not a double-quoted string".to_string())?;
    let mut out: Vec<u8> = Vec::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Err("unescaped '\"' inside the value".into()),
            '\n' => return Err("newline inside the value".into()),
            '\\' => {
                let e = chars.next().ok_or("value ends in a lone backslash")?;
                match e {
                    'a' => out.push(0x07),
                    'b' => out.push(0x08),
                    'f' => out.push(0x0c),
                    'n' => out.push(b'\n'),
                    'r' => out.push(b'\r'),
                    't' => out.push(b'\t'),
                    'v' => out.push(0x0b),
                    '\\' => out.push(b'\\'),
                    '"' => out.push(b'"'),
                    '0'..='7' => {
                        let v =
                            e.to_digit(8).unwrap_or(0) * 64 + digits(&mut chars, 2, 8, "bad octal escape")?;
                        out.push(u8::try_from(v).map_err(|_| "octal escape above \\377")?);
                    }
                    'x' => out.push(digits(&mut chars, 2, 16, "bad hex escape")? as u8),
                    'u' | 'U' => {
                        let v = digits(&mut chars, if e == 'u' { 4 } else { 8 }, 16, "bad hex escape")?;
                        let ch =
                            char::from_u32(v).ok_or_else(|| format!("escape {v:#x} is not a character"))?;
                        out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                    }
                    other => return Err(format!("unknown escape \\{other}")),
                }
            }
            c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The value of the next `n` digits in `radix`; `bad` when they are not.
fn digits(chars: &mut std::str::Chars<'_>, n: usize, radix: u32, bad: &str) -> Result<u32, String> {
    let mut v = 0u32;
    for _ in 0..n {
        v = v * radix + chars.next().and_then(|d| d.to_digit(radix)).ok_or(bad)?;
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_file_format_with_go_escapes() {
        // What kubelet's fieldpath.FormatMap writes: sorted `key=%q` lines, no trailing newline.
        let text = "a.io/x=\"plain\"\nb=\"[{\\n    \\\"name\\\": \\\"x\\\"\\n}]\"\nc=\"tab\\there \\u00e9 \\U0001F600 \\x41\\101\\\\ ünï\"";
        let m = parse_kubelet_map(text).unwrap();
        assert_eq!(m["a.io/x"], "plain");
        assert_eq!(m["b"], "[{\n    \"name\": \"x\"\n}]");
        assert_eq!(m["c"], "tab\there é 😀 AA\\ ünï");
        assert_eq!(parse_kubelet_map("").unwrap().len(), 0);
        for bad in ["k=plain", "k=\"x", "k=\"a\"b\"", "k=\"\\q\"", "k=\"\\x4\"", "novalue", "k=\"\\400\""] {
            assert!(parse_kubelet_map(bad).is_err(), "{bad:?}");
        }
    }
}
