//! A `JSONPatch` mutation applied as Kubernetes and Kyverno apply it (both
//! with evanphx/json-patch v4): operations in order, every one must apply,
//! except that a failed `test` leaves the object as it was, without an
//! error, and `replace` of an object member that is not there sets it (the
//! library looks the member up without requiring it).

use json_patch::{AddOperation, PatchErrorKind, PatchOperation};
use serde_json::Value;

use super::apply::{SchemaType, check_written};

/// Applies the operations to `object`, of type `schema` (`None`: a kind with
/// no schema here): what each writes is checked against it.
pub fn apply(
    object: &mut Value,
    operations: Vec<PatchOperation>,
    schema: Option<SchemaType>,
) -> Result<(), String> {
    // Only a `test` can call for the object as it was.
    let before = operations
        .iter()
        .any(|op| matches!(op, PatchOperation::Test(_)))
        .then(|| object.clone());
    for (index, operation) in operations.into_iter().enumerate() {
        let operation = match operation {
            PatchOperation::Replace(replace) if missing_member(object, &replace.path) => {
                PatchOperation::Add(AddOperation {
                    path: replace.path,
                    value: replace.value,
                })
            }
            other => other,
        };
        if let Err(why) = json_patch::patch(object, std::slice::from_ref(&operation)) {
            if let (PatchErrorKind::TestFailed, Some(before)) = (&why.kind, before) {
                *object = before;
                return Ok(());
            }
            // Operations go one by one: the crate's index would always be 0.
            return Err(format!(
                "JSON Patch does not apply: operation {index} failed at path '{}': {}",
                why.path, why.kind
            ));
        }
        let written = match &operation {
            PatchOperation::Add(op) => Some(&op.path),
            PatchOperation::Replace(op) => Some(&op.path),
            PatchOperation::Copy(op) => Some(&op.path),
            PatchOperation::Move(op) => Some(&op.path),
            PatchOperation::Remove(_) | PatchOperation::Test(_) => None,
        };
        if let (Some(schema), Some(path)) = (schema, written) {
            check_written(object, schema, path.as_str())
                .map_err(|why| format!("JSON Patch: {why}"))?;
        }
    }
    Ok(())
}

/// Whether `path` names a member of an object that the object lacks.
fn missing_member(object: &Value, path: &json_patch::jsonptr::Pointer) -> bool {
    let Some((parent, last)) = path.split_back() else {
        return false;
    };
    matches!(parent.resolve(object), Ok(Value::Object(map)) if !map.contains_key(last.decoded().as_ref()))
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
