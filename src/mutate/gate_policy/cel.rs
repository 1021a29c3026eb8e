//! CEL text for the gate's MutatingAdmissionPolicy: JSON values as CEL literals, and RE2
//! expressions that read the networks annotation as [`crate::gate::networks::parse_networks`]
//! does, but for forms Longhorn never writes (docs/init-gate.md, "Without the webhook").

use serde_json::Value;

/// JSON whitespace (not RE2's `\s`, which also holds form feed).
const WS: &str = r"[ \t\n\r]*";
/// A JSON string without escapes (control characters are not allowed in one).
const STRING: &str = r#""[^"\\\x00-\x1f]*""#;

/// `(?i)"field"` followed by the key's colon, for one of the selection element's fields. `(?i)`
/// is Unicode simple case folding, as Go's JSON decoding matches keys to fields (`ſ` is an
/// `s`, the Kelvin sign a `k`), as `crate::gate::go_json` does.
fn key(field: &str) -> String {
    format!(r#"(?i)"{field}"{WS}:{WS}"#)
}

/// A JSON scalar, or a list of scalars (the values of other keys of a selection element).
fn value_re() -> String {
    let scalar =
        format!(r"(?:{STRING}|null|true|false|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)");
    format!(r"(?:{scalar}|\[{WS}(?:{scalar}(?:{WS},{WS}{scalar})*)?{WS}\])")
}

/// One JSON object of the list, whole.
pub fn object_re() -> String {
    let member = format!(r"{STRING}{WS}:{WS}{}", value_re());
    format!(r"\{{{WS}(?:{member}(?:{WS},{WS}{member})*)?{WS}\}}")
}

/// The whole annotation as a JSON list of such objects.
pub fn list_re() -> String {
    let obj = object_re();
    format!(r"^\[{WS}(?:{obj}(?:{WS},{WS}{obj})*)?{WS}\]$")
}

/// A namespace or NetworkAttachmentDefinition name (`valid_name_part`): lower-case
/// alphanumerics, `-` and `.`, alphanumeric at both ends, at most 253 bytes.
pub const NAME_RE: &str = r"^[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?$";
/// An interface name's characters (`valid_interface_name`): anything but `/`, `:`, `,`, `@` and
/// Unicode white space (`\pZ`, `\t`..`\r`, U+0085), as Rust's `char::is_whitespace`.
pub const IFACE_RE: &str = r"^[^/:,@\t-\r \x{85}\pZ]+$";

/// A CEL raw string literal of `text` (which must hold no `'`).
pub fn raw(text: &str) -> String {
    debug_assert!(!text.contains('\''), "{text}");
    format!("r'{text}'")
}

/// A CEL string literal: JSON's escapes are CEL's.
pub fn string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// The expression of the `entries` variable: the annotation's networks as maps of `namespace`,
/// `name` and `interface` (empty when not given) and `ok` (`"yes"` when the entry's form was
/// readable; a string, as the API server's CEL wants a map literal's values of one type).
pub fn entries(annotation: &str) -> String {
    let field = |o: &str, f: &str| {
        let k = key(f);
        format!(
            r#"(size({o}.findAll({any})) == size({o}.findAll({str})) + size({o}.findAll({null})) && size({o}.findAll({any})) <= 1)"#,
            any = raw(&format!(r#"(?i)"{f}"{WS}:"#)),
            str = raw(&format!("{k}{STRING}")),
            null = raw(&format!("{k}null")),
        )
    };
    let text = |o: &str, f: &str| {
        let k = raw(&format!("{}{STRING}", key(f)));
        format!(
            r#"({o}.findAll({k}).size() == 1 ? {o}.find({k}).find({last}).replace('"', '') : "")"#,
            last = raw(&format!("{STRING}$"))
        )
    };
    format!(
        r#"{a}.matches({json}) ?
  {a}.findAll({obj}).map(o, {{
    "ok": {nsok} && {nameok} && {ifok} ? "yes" : "no",
    "namespace": {ns},
    "name": {name},
    "interface": {iface}}}) :
  {a}.split(",").map(e, e.trim()).map(e, [e.split("@"), e.split("@")[0].split("/")]).map(p, {{
    "ok": p[0].size() <= 2 && p[1].size() <= 2 && (p[0].size() == 1 || p[0][1] != "") &&
      (p[1].size() == 1 || p[1][0].matches({name_re})) ? "yes" : "no",
    "namespace": p[1].size() == 2 ? p[1][0] : "",
    "name": p[1][p[1].size() - 1],
    "interface": p[0].size() == 2 ? p[0][1] : ""}})"#,
        a = annotation,
        json = raw(r#"[\[{"]"#),
        obj = raw(&object_re()),
        nsok = field("o", "namespace"),
        nameok = field("o", "name"),
        ifok = field("o", "interface"),
        ns = text("o", "namespace"),
        name = text("o", "name"),
        iface = text("o", "interface"),
        name_re = raw(NAME_RE),
    )
}

/// The expression of the `readable` variable: every entry is a valid network, and a JSON form
/// is a list of objects (`parse_networks` would not fail).
pub fn readable(annotation: &str, entries: &str) -> String {
    format!(
        r#"(!{annotation}.matches({json}) || {annotation}.matches({list})) && {entries}.all(x, x.ok == "yes" &&
  x.name.matches({name}) && (x.namespace == "" || x.namespace.matches({name})) &&
  (x.interface == "" || (x.interface.matches({iface}) && bytes(x.interface).size() < 16 &&
    x.interface != "." && x.interface != "..")))"#,
        json = raw(r#"[\[{"]"#),
        list = raw(&list_re()),
        name = raw(NAME_RE),
        iface = raw(IFACE_RE),
    )
}

/// The expression of the `networks` variable: `--networks` in the comma form, as
/// `format_networks` writes it (a name without namespace is in the pod's).
pub fn networks(entries: &str) -> String {
    format!(
        r#"{entries}.map(x, (x.namespace == "" ? request.namespace : x.namespace) + "/" + x.name +
  (x.interface == "" ? "" : "@" + x.interface)).join(",")"#
    )
}

/// Stand-ins in a JSON value and the CEL expressions they become.
pub struct Substitutions<'a> {
    /// Strings replaced by an expression.
    pub strings: &'a [(&'a str, &'a str)],
    /// A list item (object) holding this string somewhere is rendered only when the condition
    /// holds: `(cond ? [item] : [])`.
    pub optional: Option<(&'a str, &'a str)>,
}

/// `value` as a CEL literal whose objects are of type `type_name` (`Object.spec.initContainers`)
/// and below; objects at the paths in `maps` (type names) are plain CEL maps.
pub fn literal(
    value: &Value,
    type_name: &str,
    maps: &[&str],
    subst: &Substitutions<'_>,
    indent: usize,
) -> String {
    let pad = "  ".repeat(indent + 1);
    let end = "  ".repeat(indent);
    match value {
        Value::String(s) => match subst.strings.iter().find(|(k, _)| k == s) {
            Some((_, expr)) => (*expr).to_string(),
            None => string(s),
        },
        Value::Array(items) => {
            let list = |fixed: Vec<String>| format!("[\n{pad}{}\n{end}]", fixed.join(&format!(",\n{pad}")));
            let mut segments: Vec<String> = Vec::new();
            let mut fixed: Vec<String> = Vec::new();
            for item in items {
                let text = literal(item, type_name, maps, subst, indent + 1);
                match subst.optional.filter(|(marker, _)| holds(item, marker)) {
                    Some((_, cond)) => {
                        if !fixed.is_empty() {
                            segments.push(list(std::mem::take(&mut fixed)));
                        }
                        segments.push(format!("({cond} ? [{text}] : [])"));
                    }
                    None => fixed.push(text),
                }
            }
            if !fixed.is_empty() {
                segments.push(list(fixed));
            } else if segments.is_empty() {
                segments.push("[]".into());
            }
            segments.join(" + ")
        }
        Value::Object(fields) => {
            let is_map = maps.contains(&type_name);
            let parts: Vec<String> = fields
                .iter()
                .map(|(k, v)| {
                    let inner = literal(v, &format!("{type_name}.{k}"), maps, subst, indent + 1);
                    if is_map {
                        format!("{}: {inner}", string(k))
                    } else {
                        format!("{k}: {inner}")
                    }
                })
                .collect();
            let body = format!("\n{pad}{}\n{end}", parts.join(&format!(",\n{pad}")));
            if is_map {
                format!("{{{body}}}")
            } else {
                format!("{type_name}{{{body}}}")
            }
        }
        other => other.to_string(),
    }
}

/// Whether `value` holds the string `marker` anywhere.
fn holds(value: &Value, marker: &str) -> bool {
    match value {
        Value::String(s) => s == marker,
        Value::Array(items) => items.iter().any(|v| holds(v, marker)),
        Value::Object(fields) => fields.values().any(|v| holds(v, marker)),
        _ => false,
    }
}

/// A CEL condition that `expr` (an object of the pod) has every field of `value` with its
/// value: scalars equal, lists of the same length item by item.
pub fn has_fields(expr: &str, value: &Value) -> String {
    match value {
        Value::Object(fields) => fields
            .iter()
            .map(|(k, v)| format!("has({expr}.{k}) && {}", has_fields(&format!("{expr}.{k}"), v)))
            .collect::<Vec<_>>()
            .join(" && "),
        Value::Array(items) => {
            let mut parts = vec![format!("size({expr}) == {}", items.len())];
            parts.extend(items.iter().enumerate().map(|(i, v)| has_fields(&format!("{expr}[{i}]"), v)));
            parts.join(" && ")
        }
        Value::String(s) => format!("{expr} == {}", string(s)),
        other => format!("{expr} == {other}"),
    }
}
