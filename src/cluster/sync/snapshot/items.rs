//! The items of a snapshot file, one at a time, in file order with the same labels either way
//! (`document 1, item 7`): a JSON `List` is streamed, each item parsed into its own small `Value`
//! so a 100,000-snapshot file never becomes one tree; anything else goes through
//! [`parse_documents`] whole.

use serde::de::{self, DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{flatten, parse_documents};

/// Why the items could not all be read.
#[derive(Debug, PartialEq, Eq)]
pub enum ItemsError {
    /// Neither JSON nor YAML (one line).
    Syntax(String),
    /// `f` refused this item: its label and the reason.
    Item { label: String, message: String },
}

/// Calls `f` on a fresh `init()` state with every item of `text`, Lists expanded, and returns
/// the state. The first item `f` refuses ends the reading.
pub fn items_of<S>(
    text: &str,
    init: impl Fn() -> S,
    mut f: impl FnMut(&mut S, String, Value) -> Result<(), String>,
) -> Result<S, ItemsError> {
    if text.trim_start().starts_with('{') {
        let mut state = init();
        let mut refused: Option<(String, String)> = None;
        let streamed = {
            let mut each = |label: String, item: Value| f(&mut state, label, item);
            stream_list(text, &mut each, &mut refused)
        };
        if let Some((label, message)) = refused {
            return Err(ItemsError::Item { label, message });
        }
        if streamed {
            return Ok(state);
        }
        // Not a JSON List the stream takes: start over on the whole-document path.
    }
    let docs = parse_documents(text).map_err(ItemsError::Syntax)?;
    let mut state = init();
    for (d, doc) in docs.into_iter().enumerate() {
        let mut items = Vec::new();
        flatten(doc, &format!("document {}", d + 1), &mut items);
        for (label, item) in items {
            if let Err(message) = f(&mut state, label.clone(), item) {
                return Err(ItemsError::Item { label, message });
            }
        }
    }
    Ok(state)
}

type Each<'a> = dyn FnMut(String, Value) -> Result<(), String> + 'a;

/// Streams the items of a JSON object with `kind: *List` and an `items` array to `each`.
/// False (after possibly handing over some items) when `text` is not such a document or not
/// valid JSON; `refused` holds the item `each` refused, if any.
fn stream_list(text: &str, each: &mut Each<'_>, refused: &mut Option<(String, String)>) -> bool {
    let mut de = serde_json::Deserializer::from_str(text);
    let list = de.deserialize_map(Stream { each, refused });
    matches!(list, Ok(true)) && de.end().is_ok()
}

/// Reads the List object (a map) and, as a seed, its `items` (a sequence).
struct Stream<'a, 'b> {
    each: &'a mut Each<'b>,
    refused: &'a mut Option<(String, String)>,
}

impl<'de> Visitor<'de> for Stream<'_, '_> {
    /// True when the object was a List whose items were all handed over.
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes List")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut kind: Option<Value> = None;
        let mut items = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                // Twice would mean the last one counts (as in a parsed tree): not streamable.
                "items" if items => return Err(de::Error::custom("items given twice")),
                "items" => {
                    map.next_value_seed(Stream { each: &mut *self.each, refused: &mut *self.refused })?;
                    items = true;
                }
                "kind" => kind = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(items && kind.as_ref().and_then(Value::as_str).is_some_and(|k| k.ends_with("List")))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let mut i = 0;
        while let Some(item) = seq.next_element::<Value>()? {
            let mut flat = Vec::new();
            flatten(item, &format!("document 1, item {i}"), &mut flat);
            for (label, item) in flat {
                if let Err(message) = (self.each)(label.clone(), item) {
                    *self.refused = Some((label, message));
                    return Err(de::Error::custom("item refused"));
                }
            }
            i += 1;
        }
        Ok(true)
    }
}

impl<'de> DeserializeSeed<'de> for Stream<'_, '_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_seq(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(text: &str) -> Result<Vec<(String, String)>, ItemsError> {
        items_of(text, Vec::new, |out, label, item| {
            out.push((label, item["metadata"]["name"].as_str().unwrap_or("").to_string()));
            Ok(())
        })
    }

    fn named(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(l, n)| (l.to_string(), n.to_string())).collect()
    }

    #[test]
    fn streamed_and_whole_document_paths_give_the_same_items() {
        let a = r#"{"metadata":{"name":"a"}}"#;
        let b = r#"{"metadata":{"name":"b"}}"#;
        let want = named(&[("document 1, item 0", "a"), ("document 1, item 1, item 0", "b")]);
        // kubectl order (items before kind), kind first, and YAML.
        let nested = format!(r#"{{"kind":"PodList","items":[{b}]}}"#);
        for text in [
            format!(r#"{{"apiVersion":"v1","items":[{a},{nested}],"kind":"List","metadata":{{}}}}"#),
            format!(r#"{{"kind":"List","items":[{a},{nested}]}}"#),
            "kind: List\nitems:\n- metadata: {name: a}\n- kind: PodList\n  items:\n  - metadata: {name: b}\n"
                .to_string(),
        ] {
            assert_eq!(labels(&text).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn documents_the_stream_does_not_take_are_read_whole_from_a_fresh_state() {
        // Not a List (its items are not items), items twice, trailing text, a top-level array.
        let cases = [
            (
                r#"{"kind":"Volume","items":[{"metadata":{"name":"x"}}],"metadata":{"name":"v"}}"#,
                Ok(named(&[("document 1", "v")])),
            ),
            (
                r#"{"kind":"List","items":[{"metadata":{"name":"x"}}],"items":[{"metadata":{"name":"y"}}]}"#,
                Ok(named(&[("document 1, item 0", "y")])),
            ),
            (r#"{"kind":"List","items":[{"metadata":{"name":"x"}}]} {"#, Err(())),
        ];
        for (text, want) in cases {
            match (labels(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{text}"),
                (Err(ItemsError::Syntax(_)), Err(())) => {}
                (got, _) => panic!("{text}: {got:?}"),
            }
        }
    }

    #[test]
    fn the_first_refused_item_ends_the_reading_with_its_label() {
        let text = r#"{"kind":"List","items":[{"metadata":{"name":"a"}},{"metadata":{"name":"bad"}},{"metadata":{"name":"c"}}]}"#;
        let mut seen = Vec::new();
        let err = items_of(
            text,
            || (),
            |_, label, item| {
                seen.push(label.clone());
                if item["metadata"]["name"] == "bad" {
                    Err("no".into())
                } else {
                    Ok(())
                }
            },
        )
        .unwrap_err();
        assert_eq!(err, ItemsError::Item { label: "document 1, item 1".into(), message: "no".into() });
        assert_eq!(seen, ["document 1, item 0", "document 1, item 1"]);
    }
}
