//! Label selectors of PodDisruptionBudgets as the API server evaluates them: `matchLabels`
//! and `matchExpressions` (`In`, `NotIn`, `Exists`, `DoesNotExist`) must all hold; an empty
//! selector (`{}`) selects every pod of the namespace, a missing one none (policy/v1).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt as _};

/// True when `selector` selects a pod with `labels` (kube's [`Selector`] evaluation). A
/// selector the API server would refuse (an unknown operator) selects nothing.
pub fn matches(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    selector.and_then(|s| Selector::try_from(s.clone()).ok()).is_some_and(|s| s.matches(labels))
}

/// The selector as `kubectl get -l` would take it: `a=b,c in (x,y),!d`; `<none>` for a
/// missing selector and `<everything>` for an empty one.
pub fn text(selector: Option<&LabelSelector>) -> String {
    let Some(s) = selector else { return "<none>".into() };
    let mut parts: Vec<String> = s.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
    for e in s.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            op => format!("{} {op} ({values})", e.key),
        });
    }
    if parts.is_empty() {
        "<everything>".into()
    } else {
        parts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sel(v: serde_json::Value) -> LabelSelector {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn evaluates_labels_and_expressions_as_the_api_server() {
        let labels: BTreeMap<String, String> =
            [("app".to_string(), "web".to_string()), ("tier".to_string(), "front".to_string())].into();
        let s = sel(json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]}));
        assert!(matches(Some(&s), &labels));
        assert_eq!(text(Some(&s)), "app=web,tier in (front,back),!canary");
        let s = sel(json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}));
        assert!(!matches(Some(&s), &labels));
        let s = sel(json!({"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]}));
        assert!(!matches(Some(&s), &labels), "an unknown operator selects nothing");
        assert!(matches(Some(&sel(json!({}))), &labels));
        assert_eq!(text(Some(&sel(json!({})))), "<everything>");
        assert!(!matches(None, &labels));
        assert_eq!(text(None), "<none>");
    }
}
