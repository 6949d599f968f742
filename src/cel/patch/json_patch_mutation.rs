//! A `JSONPatch` mutation applied as Kubernetes and Kyverno apply it: the
//! operations as evanphx/json-patch v4 applies them ([`rfc6902::apply_v4`]),
//! then what they wrote checked against the object's type.

use json_patch::PatchOperation;
use serde_json::Value;

use crate::cel::patch::apply::{SchemaType, check_written};
use crate::shared::rfc6902;

/// Applies the operations to `object`, of type `schema` (`None`: a kind with
/// no schema here): what each writes is checked against it.
pub fn apply(
    object: &mut Value,
    operations: Vec<PatchOperation>,
    schema: Option<SchemaType>,
) -> Result<(), String> {
    let Some(written) = rfc6902::apply_v4(object, operations)? else {
        // A `test` failed: the object is as it was.
        return Ok(());
    };
    // Kubernetes decodes the object once the whole patch applied: what an
    // operation wrote is checked as the last one left it (`add` of a number
    // then `replace` with a string is a string).
    empty_null_metadata(object);
    if let Some(schema) = schema {
        for path in &written {
            check_written(object, schema, path.as_str())
                .map_err(|why| format!("JSON Patch: {why}"))?;
        }
    }
    Ok(())
}

/// The API server decodes the patched object's metadata into its Go type
/// (for every kind, Kyverno's answers too), where a null label or annotation
/// value is the empty string (a `copy` from a missing member writes null).
fn empty_null_metadata(object: &mut Value) {
    for map in ["labels", "annotations"] {
        if let Some(Value::Object(entries)) =
            object.get_mut("metadata").and_then(|m| m.get_mut(map))
        {
            for value in entries.values_mut() {
                if value.is_null() {
                    *value = Value::String(String::new());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(object: Value, patch: Value) -> Result<Value, String> {
        let mut object = object;
        apply(&mut object, serde_json::from_value(patch).unwrap(), None)?;
        Ok(object)
    }

    #[test]
    fn a_test_of_a_missing_member_fails_quietly_unless_it_tests_null() {
        // kube-apiserver's answer to `make differential` seed 1, map-39.
        let object = json!({"metadata": {"annotations": {"a": "b"}}});
        let add = json!({"op": "add", "path": "/metadata/annotations/c", "value": "d"});
        let tested = |value: Value| {
            run(
                object.clone(),
                json!([add, {"op": "test", "path": "/metadata/annotations/env", "value": value}]),
            )
        };
        assert_eq!(tested(json!({"a": "b"})), Ok(object.clone()));
        assert_eq!(
            tested(Value::Null),
            Ok(json!({"metadata": {"annotations": {"a": "b", "c": "d"}}}))
        );
        // A missing container is an error, as in the library.
        let missing = run(
            object,
            json!([{"op": "test", "path": "/metadata/labels/x", "value": "y"}]),
        );
        assert!(missing.is_err(), "{missing:?}");
    }

    #[test]
    fn copy_from_a_missing_member_writes_an_empty_value_but_move_fails() {
        // kube-apiserver's answer to `make differential` seed 1, map-226:
        // the Pod is admitted with the annotation "moved" empty.
        let object = json!({"metadata": {"labels": {"x": ""}, "annotations": {}}});
        let copied = run(
            object.clone(),
            json!([{"op": "copy", "from": "/metadata/labels/tier", "path": "/metadata/annotations/moved"}]),
        );
        assert_eq!(
            copied,
            Ok(json!({"metadata": {"labels": {"x": ""}, "annotations": {"moved": ""}}}))
        );
        let moved = run(
            object,
            json!([{"op": "move", "from": "/metadata/labels/tier", "path": "/metadata/annotations/moved"}]),
        );
        assert!(moved.is_err(), "{moved:?}");
    }

    #[test]
    fn replace_sets_a_missing_member_but_not_a_missing_item() {
        assert_eq!(
            run(
                json!({"metadata": {"labels": {"y": "1"}}}),
                json!([{"op": "replace", "path": "/metadata/labels/x", "value": "2"}])
            ),
            Ok(json!({"metadata": {"labels": {"y": "1", "x": "2"}}}))
        );
        assert!(
            run(
                json!({"a": [1]}),
                json!([{"op": "replace", "path": "/a/-", "value": 2}])
            )
            .is_err()
        );
        assert!(
            run(
                json!({}),
                json!([{"op": "replace", "path": "/a/b", "value": 2}])
            )
            .is_err()
        );
    }

    #[test]
    fn an_error_names_the_operation_that_failed() {
        assert_eq!(
            run(
                json!({"a": 1}),
                json!([{"op": "add", "path": "/b", "value": 2},
                    {"op": "remove", "path": "/c"}])
            ),
            Err(
                "JSON Patch does not apply: operation 1 failed at path '/c': path is invalid"
                    .to_string()
            )
        );
    }

    #[test]
    fn a_failed_test_leaves_the_object_as_it_was() {
        assert_eq!(
            run(
                json!({"a": 1}),
                json!([{"op": "add", "path": "/b", "value": 2},
                    {"op": "test", "path": "/a", "value": 3},
                    {"op": "add", "path": "/c", "value": 4}])
            ),
            Ok(json!({"a": 1}))
        );
    }
}
