//! `default-replica-count` values: a plain count or a per-data-engine JSON object.

use std::collections::BTreeMap;

use serde_json::Value;

use super::wording::{quoted, quoted_json};

/// Longhorn's accepted replica range (`default-replica-count` and `numberOfReplicas`).
pub(super) const LONGHORN_RANGE: std::ops::RangeInclusive<i64> = 1..=20;

/// The replica counts a `default-replica-count` value sets, per data engine.
#[derive(Debug, PartialEq, Eq)]
pub enum DefaultCount {
    /// A plain integer: applies to every data engine.
    Plain(i64),
    /// A JSON object: engine -> count, in engine order.
    PerEngine(BTreeMap<String, i64>),
}

impl DefaultCount {
    /// The count for one data engine (`""` means `v1`).
    pub fn for_engine(&self, engine: &str) -> Option<i64> {
        let engine = if engine.is_empty() { "v1" } else { engine };
        match self {
            Self::Plain(n) => Some(*n),
            Self::PerEngine(m) => m.get(engine).copied(),
        }
    }
}

/// Parses a `default-replica-count` value: `"3"` or `{"v1":"3","v2":"3"}` (numbers also
/// accepted inside the object). The error says what could not be read.
pub fn parse_default_count(value: &str) -> Result<DefaultCount, String> {
    let v = value.trim();
    if v.starts_with('{') {
        let map: serde_json::Map<String, Value> =
            serde_json::from_str(v).map_err(|_| format!("{} (not a JSON object)", quoted(v)))?;
        if map.is_empty() {
            return Err("{} (names no data engine)".into());
        }
        let counts = map.into_iter().map(|(engine, n)| {
            let parsed = match &n {
                Value::String(s) => s.trim().parse::<i64>().ok(),
                Value::Number(x) => x.as_i64(),
                _ => None,
            };
            match parsed.filter(|n| LONGHORN_RANGE.contains(n)) {
                Some(count) => Ok((engine, count)),
                None => Err(format!("{engine}={} (want 1..20)", quoted_json(&n))),
            }
        });
        return counts.collect::<Result<_, _>>().map(DefaultCount::PerEngine);
    }
    match v.parse::<i64>() {
        Ok(n) if LONGHORN_RANGE.contains(&n) => Ok(DefaultCount::Plain(n)),
        _ => Err(format!("{} (want 1..20 or {{\"v1\":\"3\",...}})", quoted(v))),
    }
}

/// The string to suggest for a numeric Helm `defaultReplicaCount`: the number itself when it
/// is a count Longhorn accepts (1..20), else `"3"`, Longhorn's default.
pub fn suggested_count(value: &Value) -> String {
    match value.as_i64().filter(|n| LONGHORN_RANGE.contains(n)) {
        Some(n) => n.to_string(),
        None => "3".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggested_count_is_the_value_only_when_it_is_a_count() {
        for (value, want) in [
            (serde_json::json!(2), "2"),
            (serde_json::json!(20), "20"),
            (serde_json::from_str::<Value>("99999999999999999999999").unwrap(), "3"),
            (serde_json::json!(2.5), "3"),
            (serde_json::json!(0), "3"),
            (serde_json::json!(-1), "3"),
            (serde_json::json!(21), "3"),
        ] {
            assert_eq!(suggested_count(&value), want, "{value}");
        }
    }
}
