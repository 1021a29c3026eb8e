//! YAML parsing limits that grow with the input (serde-saphyr's default budget refuses a
//! snapshot of a few hundred volumes), and the names of JSON types for messages.

/// "a string", "an array", ...: the JSON type of a value, for error messages.
pub fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Parse options for `text`: never below serde-saphyr's defaults.
pub fn options_for(text: &str) -> serde_saphyr::Options {
    let len = text.len();
    let mut budget = serde_saphyr::Budget::default();
    // A node takes at least one byte of the text plus a separator; an event at most three per node.
    budget.max_nodes = budget.max_nodes.max(len);
    budget.max_events = budget.max_events.max(len.saturating_mul(3));
    budget.max_documents = budget.max_documents.max(len / 4);
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(len);
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// Every document of `text` (empty ones skipped), with [`options_for`] limits.
pub fn from_multiple<T: serde::de::DeserializeOwned>(text: &str) -> Result<Vec<T>, serde_saphyr::Error> {
    serde_saphyr::from_multiple_with_options(text, options_for(text))
}

/// The one document of `text`, with [`options_for`] limits.
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, options_for(text))
}

/// serde-saphyr's message on one line, without the source snippet it appends:
/// `line 2 column 3: unknown field ...`.
pub fn message(e: &serde_saphyr::Error) -> String {
    message_text(&e.to_string())
}

/// [`message`] for an error already rendered as text.
pub fn message_text(s: &str) -> String {
    let flat = crate::clip::one_line(s);
    let head = flat.split(" --> ").next().unwrap_or(&flat);
    head.strip_prefix("error: ").unwrap_or(head).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_grow_with_the_text_but_not_for_aliases() {
        let big = "a: b\n".repeat(200_000);
        let b = options_for(&big).budget.unwrap();
        let d = serde_saphyr::Budget::default();
        assert!(b.max_nodes >= big.len() && b.max_events >= 3 * big.len());
        assert_eq!((b.max_aliases, b.max_anchors, b.max_depth), (d.max_aliases, d.max_anchors, d.max_depth));
        let small = options_for("a: b\n").budget.unwrap();
        assert_eq!(
            (small.max_nodes, small.max_events, small.max_documents),
            (d.max_nodes, d.max_events, d.max_documents)
        );
    }

    #[test]
    fn messages_are_one_line_without_the_snippet() {
        let e = from_str::<serde_json::Value>("a: [\n").unwrap_err();
        let m = message(&e);
        assert!(m.starts_with("line 1 column ") && !m.contains("-->") && !m.contains('\n'), "{m}");
    }
}
