//! Chainsaw's comparison of an expected document with an object in the
//! cluster: maps are a subset, lists are compared element by element and must
//! have the same length, scalars are equal, and a key in parentheses is a
//! JMESPath expression evaluated on the object at that point, whose result is
//! compared with the value.

use serde_json::Value;

/// `Ok` when `actual` holds everything `expected` asks for; otherwise the
/// first path where it does not.
pub fn is_subset(actual: &Value, expected: &Value, path: &str) -> Result<(), String> {
    match expected {
        Value::Object(expected) => {
            for (key, want) in expected {
                let (got, at) = match key.strip_prefix('(').and_then(|k| k.strip_suffix(')')) {
                    Some(expression) => (
                        jmespath(expression, actual)?,
                        format!("{path}/({expression})"),
                    ),
                    None => {
                        if key.starts_with('~') {
                            return Err(format!(
                                "{path}/{key}: chainsaw's `~` iteration is not supported"
                            ));
                        }
                        (
                            actual.get(key).cloned().unwrap_or(Value::Null),
                            format!("{path}/{key}"),
                        )
                    }
                };
                if got.is_null() && !want.is_null() {
                    return Err(format!("{at}: missing"));
                }
                is_subset(&got, want, &at)?;
            }
            Ok(())
        }
        Value::Array(expected) => {
            let Some(actual) = actual.as_array() else {
                return Err(format!("{path}: not a list"));
            };
            if actual.len() != expected.len() {
                return Err(format!(
                    "{path}: {} elements, expected {}",
                    actual.len(),
                    expected.len()
                ));
            }
            actual
                .iter()
                .zip(expected)
                .enumerate()
                .try_for_each(|(i, (a, e))| is_subset(a, e, &format!("{path}/{i}")))
        }
        Value::Number(want) => match (actual.as_f64(), want.as_f64()) {
            (Some(a), Some(w)) if a == w => Ok(()),
            _ => Err(format!("{path}: {actual}, expected {want}")),
        },
        _ if actual == expected => Ok(()),
        _ => Err(format!("{path}: {actual}, expected {expected}")),
    }
}

fn jmespath(expression: &str, data: &Value) -> Result<Value, String> {
    let compiled =
        jmespath::compile(expression).map_err(|e| format!("JMESPath ({expression}): {e}"))?;
    let result = compiled
        .search(data)
        .map_err(|e| format!("JMESPath ({expression}): {e}"))?;
    serde_json::to_value(&*result).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_are_subsets_and_lists_compare_element_by_element() {
        let pod = json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
            "spec": {"containers": [{"name": "c", "image": "x"}, {"name": "d", "image": "y"}]}});
        assert!(is_subset(&pod, &json!({"metadata": {"labels": {"a": "1"}}}), "").is_ok());
        assert!(
            is_subset(
                &pod,
                &json!({"spec": {"containers": [{"name": "c"}, {}]}}),
                ""
            )
            .is_ok()
        );
        assert_eq!(
            is_subset(&pod, &json!({"spec": {"containers": [{"name": "c"}]}}), ""),
            Err("/spec/containers: 2 elements, expected 1".to_string())
        );
        assert!(is_subset(&pod, &json!({"metadata": {"labels": {"c": "3"}}}), "").is_err());
        assert!(is_subset(&pod, &json!({"metadata": {"labels": {"c": null}}}), "").is_ok());
    }

    #[test]
    fn a_key_in_parentheses_is_jmespath() {
        let pod = json!({"spec": {"containers": [{"name": "c"}, {"name": "d"}]}});
        assert!(is_subset(&pod, &json!({"(length(spec.containers))": 2}), "").is_ok());
        assert!(
            is_subset(
                &pod,
                &json!({"spec": {"(containers[?name=='d'])": [{"name": "d"}]}}),
                ""
            )
            .is_ok()
        );
        assert!(is_subset(&pod, &json!({"(length(spec.containers))": 3}), "").is_err());
    }
}
