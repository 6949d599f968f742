//! Kubernetes label selectors (`matchLabels`, `matchExpressions`), as
//! Kyverno's rules and CEL policies' match constraints both write them.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::shared::glob::wildcard;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<SelectorRequirement>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectorRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}

/// Label selector semantics, with Kyverno's wildcards in `matchLabels`.
pub fn selector_matches(
    selector: &LabelSelector,
    labels: Option<&serde_json::Map<String, Value>>,
) -> bool {
    let get = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    let labels_ok = selector.match_labels.iter().all(|(k, v)| {
        if k.contains(['*', '?']) {
            labels.is_some_and(|l| {
                l.iter().any(|(lk, lv)| {
                    wildcard(k, lk) && lv.as_str().is_some_and(|lv| wildcard(v, lv))
                })
            })
        } else {
            get(k).is_some_and(|lv| wildcard(v, lv))
        }
    });
    labels_ok
        && selector
            .match_expressions
            .iter()
            .all(|e| match e.operator.as_str() {
                "In" => get(&e.key).is_some_and(|v| e.values.iter().any(|x| x == v)),
                "NotIn" => get(&e.key).is_none_or(|v| !e.values.iter().any(|x| x == v)),
                "Exists" => get(&e.key).is_some(),
                "DoesNotExist" => get(&e.key).is_none(),
                _ => false,
            })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors() {
        let labels = json!({"app":"web","tier":"front"});
        let labels = labels.as_object();
        let sel = |v: Value| serde_json::from_value::<LabelSelector>(v).unwrap();
        assert!(selector_matches(
            &sel(json!({"matchLabels":{"app":"web"}})),
            labels
        ));
        assert!(selector_matches(
            &sel(json!({"matchLabels":{"app":"w*"}})),
            labels
        ));
        assert!(!selector_matches(
            &sel(json!({"matchLabels":{"app":"db"}})),
            labels
        ));
        assert!(selector_matches(
            &sel(
                json!({"matchExpressions":[{"key":"tier","operator":"In","values":["front","back"]}]})
            ),
            labels
        ));
        assert!(selector_matches(
            &sel(json!({"matchExpressions":[{"key":"x","operator":"DoesNotExist"}]})),
            labels
        ));
        assert!(!selector_matches(
            &sel(json!({"matchExpressions":[{"key":"app","operator":"NotIn","values":["web"]}]})),
            labels
        ));
    }
}
