//! Comparing the policy's output with the resource a test expects, as
//! Kyverno's CLI does (both tidied, then equal), and naming the first path
//! where they differ.

use serde_json::{Map, Value};

/// Kyverno's `Tidy`: nulls, empty maps and empty lists removed, recursively.
pub fn tidy(value: &Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::Object(map) => {
            let out: Map<String, Value> = map
                .iter()
                .filter_map(|(k, v)| tidy(v).map(|v| (k.clone(), v)))
                .collect();
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Value::Array(items) => {
            let out: Vec<Value> = items.iter().filter_map(tidy).collect();
            (!out.is_empty()).then_some(Value::Array(out))
        }
        other => Some(other.clone()),
    }
}

/// The first path where `actual` and `expected` differ, `None` when equal.
pub fn first_difference(actual: &Value, expected: &Value, path: &str) -> Option<String> {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => {
            let mut keys: Vec<&String> = a.keys().chain(e.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (a.get(k), e.get(k)) {
                    (Some(x), Some(y)) => first_difference(x, y, &p),
                    (Some(_), None) => Some(format!("{p} (added by the policy, not expected)")),
                    _ => Some(format!("{p} (expected, missing)")),
                }
            })
        }
        (Value::Array(a), Value::Array(e)) => {
            if a.len() != e.len() {
                return Some(format!(
                    "{path} ({} elements, expected {})",
                    a.len(),
                    e.len()
                ));
            }
            a.iter()
                .zip(e)
                .enumerate()
                .find_map(|(i, (x, y))| first_difference(x, y, &format!("{path}/{i}")))
        }
        _ if actual == expected => None,
        _ => Some(format!("{path} ({actual} , expected {expected})")),
    }
}

/// Kyverno's CLI comparison (both sides tidied, then equal), and on top of it
/// a check Kyverno's tidy would miss: a list element the policy added that
/// tidies away (`{"hostPath": {}}` in a volume list) still fails.
pub fn compare(actual: &Value, expected: &Value) -> Option<String> {
    let (a, e) = (tidy(actual), tidy(expected));
    let (a, e) = (a.unwrap_or(Value::Null), e.unwrap_or(Value::Null));
    first_difference(&a, &e, "").or_else(|| hidden_elements(actual, expected, ""))
}

fn hidden_elements(actual: &Value, expected: &Value, path: &str) -> Option<String> {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => a.iter().find_map(|(k, v)| {
            hidden_elements(v, e.get(k).unwrap_or(&Value::Null), &format!("{path}/{k}"))
        }),
        (Value::Array(a), e) => {
            let e = e.as_array().map_or(&[][..], Vec::as_slice);
            if a.len() > e.len() {
                return Some(format!(
                    "{path} ({} elements, expected {}: an empty element was added)",
                    a.len(),
                    e.len()
                ));
            }
            a.iter()
                .zip(e)
                .enumerate()
                .find_map(|(i, (x, y))| hidden_elements(x, y, &format!("{path}/{i}")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tidy_compare_is_kyvernos_but_an_empty_added_element_still_fails() {
        let expected = json!({"spec": {"volumes": [{"name": "a"}], "x": {}}});
        assert_eq!(
            compare(&json!({"spec": {"volumes": [{"name": "a"}]}}), &expected),
            None
        );
        let added = json!({"spec": {"volumes": [{"name": "a"}, {"hostPath": {}}]}});
        assert!(compare(&added, &expected).is_some_and(|p| p.starts_with("/spec/volumes")));
        let wrong = json!({"spec": {"volumes": [{"name": "b"}]}});
        assert_eq!(
            compare(&wrong, &expected).as_deref(),
            Some("/spec/volumes/0/name (\"b\" , expected \"a\")")
        );
        let extra =
            json!({"spec": {"volumes": [{"name": "a"}]}, "metadata": {"labels": {"k": "v"}}});
        assert!(compare(&extra, &expected).is_some_and(|p| p.contains("added by the policy")));
    }
}
