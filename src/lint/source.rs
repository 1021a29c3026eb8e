//! Reading lint input: files and folders, splitting YAML streams into documents with their
//! line ranges, and finding the line of a field inside a document.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Why an input could not be read. Shown as `path[:line]: reason`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}{}: {reason}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct InputError {
    pub path: String,
    pub line: Option<usize>,
    pub reason: String,
}

/// One input text and the name it is shown under.
#[derive(Debug)]
pub struct Input {
    pub path: String,
    pub text: String,
}

impl Input {
    /// The text without a leading byte-order mark.
    fn text_without_bom(&self) -> &str {
        self.text.strip_prefix('\u{feff}').unwrap_or(&self.text)
    }
}

/// Expands `paths` into inputs: files as given (any extension), folders recursively
/// (`*.yaml`, `*.yml`, `*.json`, in name order), `-` as stdin. A file named on the command line
/// or stdin with no document at all (empty, blank, only comments and `---`) is an error: in CI it
/// is almost always a render step that failed (`helm template ... | lint -`), and passing it would
/// be a silent pass. So is a folder named on the command line with no such file; empty files
/// found in a folder are skipped.
pub fn collect(paths: &[PathBuf], stdin: &mut dyn std::io::Read) -> (Vec<Input>, Vec<InputError>) {
    let mut inputs = Vec::new();
    let mut errors = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            let mut text = String::new();
            match stdin.read_to_string(&mut text) {
                Ok(_) => named(Input { path: "-".into(), text }, &mut inputs, &mut errors),
                Err(e) => errors.push(err("-", None, format!("cannot read stdin: {e}"))),
            }
        } else if p.is_dir() {
            let mut files = Vec::new();
            if let Err(e) = walk(p, &mut files) {
                errors.push(err(&p.display().to_string(), None, format!("cannot read folder: {e}")));
            } else if files.is_empty() {
                errors.push(err(
                    &p.display().to_string(),
                    None,
                    "empty input: no *.yaml, *.yml or *.json file in the folder (did the step that renders it fail?)"
                        .into(),
                ));
            }
            files.sort();
            for f in files {
                inputs.extend(read_file(&f, &mut errors));
            }
        } else if let Some(input) = read_file(p, &mut errors) {
            named(input, &mut inputs, &mut errors);
        }
    }
    (inputs, errors)
}

/// Keeps an input named on the command line, or reports it as empty.
fn named(input: Input, inputs: &mut Vec<Input>, errors: &mut Vec<InputError>) {
    let text = input.text_without_bom();
    if text.lines().any(|l| is_content(l) && !matches!(separator(l), Some(None))) {
        inputs.push(input);
    } else {
        let what = if input.path == "-" { "stdin" } else { "the file" };
        errors.push(err(
            &input.path,
            None,
            format!(
                "empty input: {what} holds no YAML or JSON document (did the step that renders it fail?)"
            ),
        ));
    }
}

fn err(path: &str, line: Option<usize>, reason: String) -> InputError {
    InputError { path: path.to_string(), line, reason }
}

fn read_file(p: &Path, errors: &mut Vec<InputError>) -> Option<Input> {
    let path = p.display().to_string();
    let reason = match std::fs::read(p).map(String::from_utf8) {
        Ok(Ok(text)) => return Some(Input { path, text }),
        Ok(Err(_)) => "cannot read: not UTF-8 text".to_string(),
        Err(e) => format!("cannot read: {e}"),
    };
    errors.push(err(&path, None, reason));
    None
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        // Symlinked folders are not followed (no loops); symlinked files are read.
        if entry.file_type()?.is_dir() {
            walk(&path, out)?;
        } else if path.is_file()
            && path.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        {
            out.push(path);
        }
    }
    Ok(())
}

/// One document of an input: its parsed value and its lines (1-based, `first..=last`).
#[derive(Debug)]
pub struct Document {
    pub value: Value,
    /// The first line with content (not blank, not a comment).
    pub first: usize,
    pub last: usize,
}

/// Splits an input into documents. JSON text (starting with `{` or `[`) is one document;
/// YAML is split at `---` lines, empty and comment-only documents (`helm template`) skipped.
pub fn documents(input: &Input) -> Result<Vec<Document>, InputError> {
    let text = input.text_without_bom();
    let lines: Vec<&str> = text.lines().collect();
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') || input.path.ends_with(".json") {
        match serde_json::from_str::<Value>(text) {
            Ok(value) => {
                let first = first_content_line(&lines, 0, lines.len()).unwrap_or(1);
                return Ok(vec![Document { value, first, last: lines.len().max(1) }]);
            }
            Err(e) if input.path.ends_with(".json") => {
                return Err(err(
                    &input.path,
                    Some(e.line()),
                    format!("JSON syntax error: {}", strip_at(&e.to_string())),
                ));
            }
            Err(_) => {} // flow-style YAML: parse below
        }
    }
    let mut docs = Vec::new();
    // The index of the chunk's first line.
    let mut start = 0usize;
    // A document that starts on its `---` line (`--- {kind: StorageClass, ...}`): that line
    // with the marker blanked, so columns stay the file's.
    let mut head: Option<String> = None;
    for i in 0..=lines.len() {
        let separator = if i == lines.len() { Some(None) } else { separator(lines[i]) };
        let Some(rest) = separator else { continue };
        if let Some(doc) = parse_chunk(&input.path, &lines, start, i, head.take())? {
            docs.push(doc);
        }
        start = i + 1;
        if let Some(rest) = rest {
            // `rest` ends the line (less trailing space): blank what comes before it.
            head = Some(format!("{}{rest}", " ".repeat(lines[i].trim_end().len() - rest.len())));
            start = i;
        }
    }
    Ok(docs)
}

/// A document boundary at column 0: `---` (alone, or followed by whitespace and a comment or
/// the start of the next document) or `...`. `Some` of that start on the line, if any.
fn separator(line: &str) -> Option<Option<&str>> {
    let l = line.trim_end();
    if l == "..." {
        return Some(None);
    }
    let rest = l.strip_prefix("---")?;
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let content = rest.trim_start();
    Some((!content.is_empty() && !content.starts_with('#')).then_some(content))
}

fn is_content(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && !t.starts_with('#') && !t.starts_with('%')
}

fn first_content_line(lines: &[&str], from: usize, to: usize) -> Option<usize> {
    (from..to).find(|&i| is_content(lines[i])).map(|i| i + 1)
}

/// Parses lines `from..to` as one YAML document, line `from` replaced by `head` when given (a
/// document started on its `---` line); `None` for an empty one. Parser line numbers are
/// shifted to the file's.
fn parse_chunk(
    path: &str,
    lines: &[&str],
    from: usize,
    to: usize,
    head: Option<String>,
) -> Result<Option<Document>, InputError> {
    let first = match &head {
        Some(h) if is_content(h) => Some(from + 1),
        _ => first_content_line(lines, from, to),
    };
    let Some(first) = first else { return Ok(None) };
    let mut text = String::new();
    for (n, l) in lines[from..to].iter().enumerate() {
        match (&head, n) {
            (Some(h), 0) => text.push_str(h),
            _ => text.push_str(l),
        }
        text.push('\n');
    }
    match crate::yaml::from_str::<Value>(&text) {
        Ok(Value::Null) => Ok(None),
        Ok(value) => Ok(Some(Document { value, first, last: to.max(first) })),
        Err(e) => {
            let line = e
                .location()
                .map(|l| l.line() as usize)
                .filter(|l| *l >= 1)
                .map(|l| l + from)
                .unwrap_or(first);
            Err(err(path, Some(line), format!("YAML syntax error: {}", yaml_reason(&e.to_string()))))
        }
    }
}

/// serde-saphyr's message without its `error: line L column C: ` head and source snippet
/// (the line is shown before the message).
fn yaml_reason(s: &str) -> String {
    let s = crate::yaml::message_text(s);
    match s.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((pos, rest)) if pos.contains(" column ") => rest.to_string(),
        _ => s,
    }
}

/// Drops serde_json's ` at line L column C` (the line is shown before the message).
fn strip_at(s: &str) -> String {
    s.rfind(" at line ").map_or(s, |i| &s[..i]).to_string()
}

/// One input's lines, split once, and the lines naming each object (`name: X`, or `"name":
/// "X"` anywhere in a line), so that a finding finds its object's line without a scan.
pub struct Lines<'a> {
    lines: Vec<&'a str>,
    names: std::collections::HashMap<&'a str, Vec<usize>>,
}

impl<'a> Lines<'a> {
    pub fn new(text: &'a str) -> Self {
        let lines: Vec<&str> = text.lines().collect();
        let mut names: std::collections::HashMap<&str, Vec<usize>> = std::collections::HashMap::new();
        let mut note = |name: &'a str, n: usize| {
            let at = names.entry(name).or_default();
            if at.last() != Some(&n) {
                at.push(n);
            }
        };
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start().trim_start_matches("- ");
            if let Some(r) = t.strip_prefix("name:") {
                note(r.trim().trim_matches(['"', '\'']), i + 1);
            }
            let mut rest = *l;
            while let Some(at) = rest.find("\"name\": \"") {
                rest = &rest[at + "\"name\": \"".len()..];
                if let Some(end) = rest.find('"') {
                    note(&rest[..end], i + 1);
                }
            }
        }
        Self { lines, names }
    }

    /// The first line (1-based) in `first..=last` naming `name`.
    fn naming(&self, name: &str, first: usize, last: usize) -> Option<usize> {
        let at = self.names.get(name)?;
        at.get(at.partition_point(|n| *n < first)).copied().filter(|n| *n <= last)
    }
}

/// The line of `key:` (YAML) or `"key":` (JSON) in lines `first..=last` (1-based) of `lines`:
/// the first one at or after the line naming `anchor` (an object's name, for List items), else
/// the first one in the range. `None` when the key is not there.
pub fn find_key_line(
    lines: &Lines<'_>,
    first: usize,
    last: usize,
    key: &str,
    anchor: Option<&str>,
) -> Option<usize> {
    let text = &lines.lines;
    let last = last.min(text.len());
    if first == 0 || first > last {
        return None;
    }
    let json_key = format!("\"{key}\":");
    let has_key = |l: &str| {
        let t = l.trim_start().trim_start_matches("- ");
        t.strip_prefix(key).is_some_and(|r| r.trim_start().starts_with(':')) || l.contains(&json_key)
    };
    let from = anchor.and_then(|name| lines.naming(name, first, last)).unwrap_or(first);
    (from..=last).find(|&n| has_key(text[n - 1])).or_else(|| (first..=last).find(|&n| has_key(text[n - 1])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_is_placed_at_its_objects_key_in_yaml_and_json_lists() {
        let yaml = "items:\n- metadata:\n    name: a\n  parameters:\n    numberOfReplicas: \"1\"\n\
                    - metadata:\n    name: 'b'\n  parameters:\n    numberOfReplicas: \"2\"\n";
        let lines = Lines::new(yaml);
        assert_eq!(find_key_line(&lines, 1, 9, "numberOfReplicas", Some("a")), Some(5));
        assert_eq!(find_key_line(&lines, 1, 9, "numberOfReplicas", Some("b")), Some(9));
        // Not named in the range: the first key of the range.
        assert_eq!(find_key_line(&lines, 1, 9, "numberOfReplicas", Some("c")), Some(5));
        assert_eq!(find_key_line(&lines, 6, 9, "numberOfReplicas", Some("a")), Some(9));
        assert_eq!(find_key_line(&lines, 1, 9, "absent", Some("a")), None);
        // Compact JSON: several objects on one line.
        let json = r#"{"items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}, "x": 1}]}"#;
        let lines = Lines::new(json);
        assert_eq!(find_key_line(&lines, 1, 1, "x", Some("b")), Some(1));
        assert_eq!(lines.naming("b", 1, 1), Some(1));
        assert_eq!(find_key_line(&lines, 2, 1, "x", None), None);
    }
}
