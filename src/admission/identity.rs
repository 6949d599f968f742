//! What no mutation may change: which object it is. Every engine's result
//! passes [`check`] before it becomes the object the answer carries, so a
//! rule that would turn a Binding into a string, drop its target or rename the
//! Pod is refused (and judged by `failurePolicy`) instead of reaching the API
//! server as a JSON Patch that replaces the object.

use serde_json::Value;

/// The fields that say which object this is, as paths of keys with the name
/// users know them by. Keys, not JSON pointers: `Value::pointer` unescapes
/// each step into a new string, two allocations a step on every request.
const IDENTITY: [(&[&str], &str); 4] = [
    (&["apiVersion"], "apiVersion"),
    (&["kind"], "kind"),
    (&["metadata", "name"], "metadata.name"),
    (&["metadata", "namespace"], "metadata.namespace"),
];

/// The value at `path` in `value`, if every step is there.
fn at<'v>(value: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(value, |value, key| value.get(key))
}

/// `Ok` when `after` is still the object `before` was: a JSON object with the
/// same `apiVersion`, `kind`, `metadata.name`, `metadata.namespace` and, for a
/// Binding, the same `target`. The error says what the mutation would have
/// done.
pub fn check(before: &Value, after: &Value) -> Result<(), String> {
    if !after.is_object() {
        return Err(format!(
            "the mutation would replace the whole object with {}; refused",
            describe(after)
        ));
    }
    let binding = before.get("kind").and_then(Value::as_str) == Some("Binding");
    let target: Option<(&[&str], &str)> = binding.then_some((&["target"], "target"));
    for (path, name) in IDENTITY.into_iter().chain(target) {
        let (old, new) = (at(before, path), at(after, path));
        if old != new {
            let change = match (old, new) {
                (_, None) => format!("remove {name}"),
                (None, Some(value)) => format!("set {name} to {}", describe(value)),
                (Some(_), Some(value)) => format!("change {name} to {}", describe(value)),
            };
            return Err(format!(
                "the mutation would {change}, which says which object this is; refused"
            ));
        }
    }
    Ok(())
}

/// A value named for a message, short whatever its size.
fn describe(value: &Value) -> String {
    match value {
        Value::String(text) if text.chars().count() <= 64 => format!("the string {text:?}"),
        Value::String(_) => "a string".to_string(),
        Value::Null => "null".to_string(),
        Value::Bool(_) | Value::Number(_) => format!("the value {value}"),
        Value::Array(_) => "a list".to_string(),
        Value::Object(_) => "a map".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::check;
    use serde_json::json;

    fn binding() -> serde_json::Value {
        json!({"apiVersion":"v1","kind":"Binding",
               "metadata":{"name":"p","namespace":"ns","annotations":{}},
               "target":{"apiVersion":"v1","kind":"Node","name":"node-1"}})
    }

    #[test]
    fn metadata_changes_pass() {
        let mut after = binding();
        after["metadata"]["annotations"]["a"] = json!("b");
        after["metadata"]["labels"] = json!({"x": "y"});
        assert_eq!(check(&binding(), &after), Ok(()));
    }

    #[test]
    fn replacing_the_root_is_refused() {
        let err = check(&binding(), &json!("metadata: {}")).unwrap_err();
        assert!(
            err.contains("replace the whole object with the string \"metadata: {}\""),
            "{err}"
        );
        let err = check(&binding(), &json!([{"metadata": {}}])).unwrap_err();
        assert!(err.contains("with a list"), "{err}");
        assert!(check(&binding(), &json!(null)).is_err());
    }

    #[test]
    fn identity_fields_are_kept() {
        for (pointer, value, words) in [
            (
                "/kind",
                Some(json!("Pod")),
                "change kind to the string \"Pod\"",
            ),
            ("/apiVersion", None, "remove apiVersion"),
            ("/metadata/name", Some(json!("q")), "change metadata.name"),
            ("/metadata/namespace", None, "remove metadata.namespace"),
            (
                "/target/name",
                Some(json!("node-2")),
                "change target to a map",
            ),
            ("/target", None, "remove target"),
        ] {
            let mut after = binding();
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            let holder = after.pointer_mut(parent).unwrap().as_object_mut().unwrap();
            match value {
                Some(v) => holder.insert(key.to_string(), v),
                None => holder.remove(key),
            };
            let err = check(&binding(), &after).unwrap_err();
            assert!(err.contains(words), "{pointer}: {err}");
        }
    }

    #[test]
    fn a_pod_may_have_any_target_field_but_not_a_new_name() {
        let pod = json!({"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"p-"}});
        let mut after = pod.clone();
        after["target"] = json!("anything");
        assert_eq!(check(&pod, &after), Ok(()));
        after["metadata"]["name"] = json!("p-1");
        let err = check(&pod, &after).unwrap_err();
        assert!(
            err.contains("set metadata.name to the string \"p-1\""),
            "{err}"
        );
    }
}
