//! Reading Multus' annotations as Go's `encoding/json` fills a struct: an object key names a
//! field when it equals the field's name under Unicode simple case folding (`"INTERFACE"` is
//! `interface`); of two keys for one field the exact spelling wins.

use serde_json::{Map, Value};

/// `c` as Go's JSON field matching folds it, for the ASCII letters of a field name.
fn fold(c: char) -> char {
    match c {
        'ſ' => 's',
        '\u{212A}' => 'k',
        c => c.to_ascii_lowercase(),
    }
}

/// True when `key` names `field` under Go's case-insensitive matching.
fn names(key: &str, field: &str) -> bool {
    key.chars().count() == field.len() && key.chars().map(fold).eq(field.chars())
}

/// Renames, in every object of the list `value`, each key that names one of `fields` (all
/// lowercase ASCII) ignoring case to that field. Other values and keys are left as they are.
pub fn fold_field_names(value: &mut Value, fields: &[&str]) {
    let Value::Array(items) = value else { return };
    for item in items {
        let Value::Object(obj) = item else { continue };
        if obj.keys().all(|k| fields.contains(&k.as_str()) || !fields.iter().any(|f| names(k, f))) {
            continue;
        }
        let mut folded = Map::new();
        let mut exact = Map::new();
        for (k, v) in std::mem::take(obj) {
            match fields.iter().find(|f| names(&k, f)) {
                Some(f) if k == *f => {
                    exact.insert(k, v);
                }
                Some(f) => {
                    folded.insert(f.to_string(), v);
                }
                None => {
                    folded.insert(k, v);
                }
            }
        }
        folded.extend(exact);
        *obj = folded;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_match_fields_ignoring_case_as_go_does() {
        let mut v = json!([
            {"Name": "storage", "NAMESPACE": "kube-system", "interFace": "lhnet1", "mac": "x"},
            {"name": "exact", "NAME": "folded"},
            {"na\u{17F}e": "not a fold of name"},
            {"name\u{17F}pace": "long s", "\u{130}nterface": "dotted I", "\u{131}nterface": "dotless i"},
            {"\u{212A}ind": "Kelvin", "INTERFACE": "upper"},
            null,
            "text"
        ]);
        fold_field_names(&mut v, &["name", "namespace", "interface", "kind"]);
        assert_eq!(
            v,
            json!([
                {"name": "storage", "namespace": "kube-system", "interface": "lhnet1", "mac": "x"},
                {"name": "exact"},
                {"na\u{17F}e": "not a fold of name"},
                {"namespace": "long s", "\u{130}nterface": "dotted I", "\u{131}nterface": "dotless i"},
                {"kind": "Kelvin", "interface": "upper"},
                null,
                "text"
            ])
        );
        // Not a list: left alone (`parse_networks` then refuses it, as Multus does).
        let mut obj = json!({"Name": "x"});
        fold_field_names(&mut obj, &["name"]);
        assert_eq!(obj, json!({"Name": "x"}));
    }

    #[test]
    fn both_annotations_are_read_with_keys_in_any_case() {
        use super::super::networks::parse_networks;
        use super::super::status::{check, NETWORK_STATUS_ANNOTATION};
        use std::collections::BTreeMap;
        let want = parse_networks(
            r#"[{"Name": "storage-net", "NameSpace": "kube-system", "Interface": "lhnet1"}]"#,
            Some("longhorn-system"),
        )
        .unwrap();
        assert_eq!(want[0].full_name(), "kube-system/storage-net");
        let status =
            r#"[{"Name": "kube-system/storage-net", "INTERFACE": "lhnet1", "IPs": ["192.168.9.7"]}]"#;
        let annotations = BTreeMap::from([(NETWORK_STATUS_ANNOTATION.to_string(), status.to_string())]);
        let found = check(&want, &annotations, &|_| true).unwrap();
        assert_eq!((found[0].ip.as_str(), found[0].interface.as_deref()), ("192.168.9.7", Some("lhnet1")));
    }
}
