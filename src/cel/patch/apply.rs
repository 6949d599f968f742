//! `ApplyConfiguration`: the expression's object merged into the object as
//! Kubernetes' mutating admission policies merge it (structured merge, the
//! server-side apply merge): structs and maps field by field, associative
//! lists item by item by their keys, sets as sets, atomic values whole.
//!
//! For a built-in kind the schema (`apply_schema`) decides, and the apply
//! configuration is first checked against it as Kubernetes checks it: a
//! field the kind does not declare, or a value of the wrong type, is an
//! error, and so is any atomic list, map or struct it sets, unless the
//! policy asked for server-side apply's replacing of atomics (Kyverno's
//! `evaluation.useServerSideApply`). An object of a kind with no schema here
//! (a custom resource) merges as Kubernetes merges a type it knows nothing
//! of: maps field by field, lists replaced.

use serde_json::Value;

use crate::cel::patch::apply_schema::{ListKind, Shape};

pub use crate::cel::patch::apply_schema::{SchemaType, kind as schema_of};

/// Merges `config` into `object`, whose type is `schema` (`None`: not a
/// built-in kind). `atomics` says whether atomic values may be replaced.
pub fn merge(
    object: &mut Value,
    config: &Value,
    schema: Option<SchemaType>,
    atomics: bool,
) -> Result<(), String> {
    if let Some(schema) = schema {
        let mut found = Vec::new();
        check(config, schema, &mut String::new(), &mut found, 0).map_err(|why| {
            let why = match why {
                Mismatch::Undeclared(path) => format!("{path}: field not declared in schema"),
                Mismatch::Other(why) => why,
            };
            format!("failed to convert patch object to typed object: {why}")
        })?;
        if !found.is_empty() && !atomics {
            return Err(format!(
                "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
                found.join(", ")
            ));
        }
    }
    merge_at(object, config, schema, 0)
}

const MAX_DEPTH: usize = 128;

/// Checks what a JSON Patch operation wrote at `pointer` (already applied to
/// `object`) against the schema, as Kubernetes' strict decoding of the
/// patched object does: a field the kind does not declare is an error.
pub fn check_written(object: &Value, schema: SchemaType, pointer: &str) -> Result<(), String> {
    let mut at = object;
    let mut ty = schema;
    let mut path = String::new();
    let unknown = |path: &str| {
        format!(
            "strict decoding error: unknown field \"{}\"",
            path.trim_start_matches('.')
        )
    };
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        let next = match (ty.shape(), at) {
            (Some(Shape::Struct { .. } | Shape::Map { .. }), Value::Object(fields)) => {
                push_field(&mut path, &segment);
                ty = ty.member(&segment).ok_or_else(|| unknown(&path))?;
                fields.get(&segment)
            }
            (Some(Shape::List { element, .. }), Value::Array(items)) => {
                let index = match segment.as_str() {
                    "-" => items.len().saturating_sub(1),
                    index => index.parse().unwrap_or(usize::MAX),
                };
                path.push_str(&format!("[{index}]"));
                ty = element;
                items.get(index)
            }
            // Untyped values and anything the patch left odd: nothing to check.
            _ => return Ok(()),
        };
        let Some(next) = next else { return Ok(()) };
        at = next;
    }
    check(at, ty, &mut path, &mut Vec::new(), 0).map_err(|why| match why {
        Mismatch::Undeclared(path) => unknown(&path),
        Mismatch::Other(why) => why,
    })
}

/// Why a value does not fit its type; each caller words an undeclared field
/// as Kubernetes does at its step.
enum Mismatch {
    /// The path of a field the struct does not declare.
    Undeclared(String),
    Other(String),
}

/// Checks a value against its type, as Kubernetes types an apply
/// configuration: every field declared, every value of its type. Collects
/// the paths of the atomic values it sets.
fn check(
    value: &Value,
    schema: SchemaType,
    path: &mut String,
    atomics: &mut Vec<String>,
    depth: usize,
) -> Result<(), Mismatch> {
    if depth > MAX_DEPTH {
        return Err(Mismatch::Other(format!(
            "{path}: nested more than {MAX_DEPTH} deep"
        )));
    }
    let shape = schema
        .shape()
        .ok_or_else(|| Mismatch::Other(format!("{path}: no type in the schema table")))?;
    let mismatch = |expected: &str, path: &String| {
        Err(Mismatch::Other(format!(
            "{path}: expected {expected}, got {}",
            kind_of(value)
        )))
    };
    match (shape, value) {
        (_, Value::Null) => Ok(()),
        (Shape::String, Value::String(_))
        | (Shape::Numeric, Value::Number(_))
        | (Shape::Boolean, Value::Bool(_))
        | (Shape::AnyScalar, Value::String(_) | Value::Number(_) | Value::Bool(_)) => Ok(()),
        (Shape::String, _) => mismatch("string", path),
        (Shape::Numeric, _) => mismatch("numeric (int or float)", path),
        (Shape::Boolean, _) => mismatch("boolean", path),
        (Shape::AnyScalar, _) => mismatch("scalar", path),
        (
            Shape::Struct { atomic } | Shape::Map { atomic, .. } | Shape::Untyped { atomic },
            Value::Object(fields),
        ) => {
            if atomic {
                atomics.push(path.clone());
            }
            for (name, field) in fields {
                let length = push_field(path, name);
                let member = schema
                    .member(name)
                    .ok_or_else(|| Mismatch::Undeclared(path.clone()))?;
                check(field, member, path, atomics, depth + 1)?;
                path.truncate(length);
            }
            Ok(())
        }
        (Shape::Untyped { .. }, Value::Array(items)) => {
            atomics.push(path.clone());
            check_items(items, SchemaType::UNTYPED_ATOMIC, path, atomics, depth)
        }
        (Shape::Untyped { .. }, _) => Ok(()),
        (Shape::Struct { .. } | Shape::Map { .. }, _) => mismatch("map", path),
        (Shape::List { element, kind }, Value::Array(items)) => {
            if kind == ListKind::Atomic {
                atomics.push(path.clone());
            }
            check_items(items, element, path, atomics, depth)
        }
        (Shape::List { .. }, _) => mismatch("list", path),
    }
}

fn check_items(
    items: &[Value],
    element: SchemaType,
    path: &mut String,
    atomics: &mut Vec<String>,
    depth: usize,
) -> Result<(), Mismatch> {
    for (i, item) in items.iter().enumerate() {
        let length = path.len();
        path.push_str(&format!("[{i}]"));
        check(item, element, path, atomics, depth + 1)?;
        path.truncate(length);
    }
    Ok(())
}

/// Appends `.name` to a path, giving the length to cut it back to.
fn push_field(path: &mut String, name: &str) -> usize {
    let length = path.len();
    path.push('.');
    path.push_str(name);
    length
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

fn merge_at(
    object: &mut Value,
    config: &Value,
    schema: Option<SchemaType>,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested more than {MAX_DEPTH} deep"));
    }
    let shape = schema.and_then(SchemaType::shape);
    match (object, config, shape) {
        // Atomic values are replaced whole (reached only when allowed).
        (
            object,
            config,
            Some(
                Shape::Struct { atomic: true }
                | Shape::Map { atomic: true, .. }
                | Shape::Untyped { atomic: true }
                | Shape::List {
                    kind: ListKind::Atomic,
                    ..
                },
            ),
        ) => {
            *object = config.clone();
            Ok(())
        }
        (Value::Object(target), Value::Object(fields), _) => {
            for (name, value) in fields {
                let field = schema.and_then(|s| s.member(name));
                match target.get_mut(name) {
                    Some(existing) => merge_at(existing, value, field, depth + 1)?,
                    None => {
                        target.insert(name.clone(), value.clone());
                    }
                }
            }
            Ok(())
        }
        (Value::Array(items), Value::Array(applied), Some(Shape::List { element, kind })) => {
            match kind {
                ListKind::Map => {
                    let Some(list) = schema else { return Ok(()) };
                    for item in applied {
                        let mut same = items
                            .iter()
                            .enumerate()
                            .filter(|(_, existing)| list.same_keys(existing, item))
                            .map(|(at, _)| at);
                        match (same.next(), same.next()) {
                            (Some(at), None) => {
                                if let Some(existing) = items.get_mut(at) {
                                    merge_at(existing, item, Some(element), depth + 1)?;
                                }
                            }
                            // Items the object has twice (Kubernetes lets old
                            // objects keep them) are replaced by the one set.
                            (Some(first), Some(_)) => {
                                let mut at = 0;
                                items.retain(|existing| {
                                    at += 1;
                                    at - 1 == first || !list.same_keys(existing, item)
                                });
                                if let Some(kept) = items.get_mut(first) {
                                    *kept = item.clone();
                                }
                            }
                            _ => items.push(item.clone()),
                        }
                    }
                }
                _ => {
                    for item in applied {
                        if !items.contains(item) {
                            items.push(item.clone());
                        }
                    }
                }
            }
            Ok(())
        }
        (object, config, _) => {
            *object = config.clone();
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Option<SchemaType> {
        schema_of("v1", "Pod")
    }

    fn merged(object: Value, config: Value) -> Value {
        let mut object = object;
        merge(&mut object, &config, pod(), true).unwrap();
        object
    }

    #[test]
    fn maps_merge_field_by_field() {
        assert_eq!(
            merged(
                json!({"metadata": {"name": "p", "annotations": {"a": "1"}}}),
                json!({"metadata": {"annotations": {"b": "2"}}})
            ),
            json!({"metadata": {"name": "p", "annotations": {"a": "1", "b": "2"}}})
        );
    }

    #[test]
    fn containers_merge_by_name_and_env_by_name() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}]},
            {"name": "b", "image": "y"}
        ]}});
        let config = json!({"spec": {"containers": [
            {"name": "b", "image": "z"},
            {"name": "a", "env": [{"name": "F", "value": "2"}]},
            {"name": "c", "image": "new"}
        ]}});
        assert_eq!(
            merged(pod, config),
            json!({"spec": {"containers": [
                {"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}]},
                {"name": "b", "image": "z"},
                {"name": "c", "image": "new"}
            ]}})
        );
    }

    #[test]
    fn ports_key_defaults_protocol_to_tcp() {
        let pod =
            json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]}});
        let config = json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}]}]}});
        assert_eq!(
            merged(pod, config),
            json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}]}]}})
        );
    }

    #[test]
    fn atomic_lists_are_replaced_when_allowed_and_sets_unite() {
        assert_eq!(
            merged(
                json!({"spec": {"tolerations": [{"key": "a"}]}, "metadata": {"finalizers": ["x"]}}),
                json!({"spec": {"tolerations": [{"key": "b"}]}, "metadata": {"finalizers": ["y", "x"]}})
            ),
            json!({"spec": {"tolerations": [{"key": "b"}]}, "metadata": {"finalizers": ["x", "y"]}})
        );
    }

    #[test]
    fn atomic_values_are_refused_unless_allowed() {
        let mut object = json!({"spec": {"containers": [{"name": "a", "args": ["x"]}]}});
        let config = json!({"spec": {
            "containers": [{"name": "a", "args": ["y"]}],
            "nodeSelector": {"zone": "a"}
        }});
        let error = merge(&mut object, &config, pod(), false).unwrap_err();
        assert_eq!(
            error,
            "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.containers[0].args, .spec.nodeSelector"
        );
        assert_eq!(
            object,
            json!({"spec": {"containers": [{"name": "a", "args": ["x"]}]}})
        );
    }

    #[test]
    fn undeclared_fields_and_wrong_types_are_errors() {
        let mut object = json!({"spec": {}});
        let error =
            merge(&mut object, &json!({"spec": {"nodeNme": "n"}}), pod(), true).unwrap_err();
        assert_eq!(
            error,
            "failed to convert patch object to typed object: .spec.nodeNme: field not declared in schema"
        );
        let error = merge(
            &mut object,
            &json!({"spec": {"priority": "high"}}),
            pod(),
            true,
        )
        .unwrap_err();
        assert!(
            error.ends_with(".spec.priority: expected numeric (int or float), got string"),
            "{error}"
        );
        // Labels and annotations are maps of strings, whatever their keys.
        assert!(
            merge(
                &mut object,
                &json!({"metadata": {"labels": {"any.key/x": "v"}}}),
                pod(),
                false
            )
            .is_ok()
        );
    }

    #[test]
    fn json_patch_writes_are_checked_against_the_schema() {
        let deployment = schema_of("apps/v1", "Deployment").unwrap();
        let object = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a"}, {"name": "x", "ports": [{"containerPortZ": 8080}]}
        ]}}}});
        assert_eq!(
            check_written(&object, deployment, "/spec/template/spec/containers/-"),
            Err("strict decoding error: unknown field \"spec.template.spec.containers[1].ports[0].containerPortZ\"".to_string())
        );
        assert!(check_written(&object, deployment, "/spec/template/spec/containers/0").is_ok());
        let labelled = json!({"metadata": {"labels": {"a/b": "c"}}});
        assert!(check_written(&labelled, deployment, "/metadata/labels/a~1b").is_ok());
        assert_eq!(
            check_written(&labelled, deployment, "/metadata/labelz"),
            Err("strict decoding error: unknown field \"metadata.labelz\"".to_string())
        );
    }

    #[test]
    fn custom_resources_merge_maps_and_replace_lists() {
        let mut object = json!({"spec": {"containers": [{"name": "a"}], "x": {"a": 1}}});
        merge(
            &mut object,
            &json!({"spec": {"containers": [{"name": "b"}], "x": {"b": 2}}}),
            schema_of("example.com/v1", "Widget"),
            false,
        )
        .unwrap();
        assert_eq!(
            object,
            json!({"spec": {"containers": [{"name": "b"}], "x": {"a": 1, "b": 2}}})
        );
    }
}
