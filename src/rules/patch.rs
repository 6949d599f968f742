//! Mutations: Kyverno's `patchStrategicMerge` (with anchors) and
//! `patchesJson6902`.

use serde_json::{Map, Value};

use super::conditions::equals;

/// Why a strategic merge patch did not apply.
#[derive(Debug, PartialEq)]
pub enum Skip {
    /// A conditional anchor `(key)` did not hold for this object: skip it.
    Condition,
    /// A global anchor `<(key)` did not hold: skip the whole rule.
    Global(String),
    /// A value could not be substituted where it landed (`{{@}}`).
    Failed(String),
}

/// Substitutes a patch string that refers to `{{@}}`, given the object's
/// value where it lands.
pub type LateSubstitution<'f> = &'f dyn Fn(&str, &Value) -> Result<Value, String>;

enum Anchor<'k> {
    Condition(&'k str),
    AddIfAbsent(&'k str),
    Global(&'k str),
    Plain(&'k str),
}

fn anchor(key: &str) -> Anchor<'_> {
    if let Some(inner) = key.strip_prefix("<(").and_then(|k| k.strip_suffix(')')) {
        Anchor::Global(inner)
    } else if let Some(inner) = key.strip_prefix("+(").and_then(|k| k.strip_suffix(')')) {
        Anchor::AddIfAbsent(inner)
    } else if let Some(inner) = key.strip_prefix('(').and_then(|k| k.strip_suffix(')')) {
        Anchor::Condition(inner)
    } else {
        Anchor::Plain(key)
    }
}

/// The key Kubernetes' strategic merge uses to merge the items of a list
/// field, for the Pod fields users patch; other lists are replaced.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "readinessGates"
        | "resourceClaims"
        | "schedulingGates" => Some("name"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "ports" => Some("containerPort"),
        "hostAliases" => Some("ip"),
        "topologySpreadConstraints" => Some("topologyKey"),
        _ => None,
    }
}

/// Applies a strategic merge patch (already substituted) to `resource`;
/// strings that mention `{{@}}` are substituted by `late` against the value
/// they replace. `Ok(false)` when a top-level conditional anchor did not hold.
pub fn strategic_merge(
    resource: &mut Value,
    patch: &Value,
    late: LateSubstitution,
) -> Result<bool, Skip> {
    match merge_value(resource, patch, "", late) {
        Ok(()) => Ok(true),
        Err(Skip::Condition) => Ok(false),
        Err(global) => Err(global),
    }
}

fn merge_value(
    resource: &mut Value,
    patch: &Value,
    field: &str,
    late: LateSubstitution,
) -> Result<(), Skip> {
    match patch {
        Value::Object(patch_map) => {
            if !resource.is_object() {
                *resource = Value::Object(Map::new());
            }
            let Some(target) = resource.as_object_mut() else {
                return Err(Skip::Condition);
            };
            merge_object(target, patch_map, late)
        }
        Value::Array(items) => merge_list(resource, items, field, late),
        Value::String(text) if super::variables::mentions_at(text) => {
            *resource = late(text, resource).map_err(Skip::Failed)?;
            Ok(())
        }
        other => {
            *resource = other.clone();
            Ok(())
        }
    }
}

fn merge_object(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    late: LateSubstitution,
) -> Result<(), Skip> {
    // All conditions first: an object is patched only when every one holds.
    for (key, pattern) in patch {
        match anchor(key) {
            Anchor::Condition(k) if !holds(target.get(k), pattern) => return Err(Skip::Condition),
            Anchor::Global(k) if !holds(target.get(k), pattern) => {
                return Err(Skip::Global(format!("global anchor <({k}) did not match")));
            }
            _ => {}
        }
    }
    for (key, value) in patch {
        match anchor(key) {
            Anchor::Condition(k) | Anchor::Global(k) => {
                // A condition whose value is an object may carry nested
                // patches for that object.
                if value.is_object()
                    && let Some(child) = target.get_mut(k)
                {
                    merge_value(child, &without_conditions(value), k, late)?;
                }
            }
            Anchor::AddIfAbsent(k) => {
                if !target.contains_key(k) {
                    target.insert(k.to_string(), strip_anchors(value));
                }
            }
            Anchor::Plain(k) => {
                if value.is_null() {
                    target.remove(k);
                    continue;
                }
                let child = target.entry(k.to_string()).or_insert(Value::Null);
                let was_absent = child.is_null();
                match merge_value(child, value, k, late) {
                    Ok(()) => {}
                    Err(Skip::Condition) => {
                        if was_absent {
                            target.remove(k);
                        }
                    }
                    Err(global) => return Err(global),
                }
            }
        }
    }
    Ok(())
}

fn merge_list(
    resource: &mut Value,
    items: &[Value],
    field: &str,
    late: LateSubstitution,
) -> Result<(), Skip> {
    let has_anchors = items.iter().any(|i| {
        i.as_object()
            .is_some_and(|o| o.keys().any(|k| !matches!(anchor(k), Anchor::Plain(_))))
    });
    let key = merge_key(field);
    if !resource.is_array() || (!has_anchors && key.is_none()) {
        if !has_anchors {
            *resource = Value::Array(items.iter().map(strip_anchors).collect());
        } else if !resource.is_array() {
            *resource = Value::Array(Vec::new());
        }
        if key.is_none() && !has_anchors {
            return Ok(());
        }
    }
    let Some(list) = resource.as_array_mut() else {
        return Ok(());
    };
    for item in items {
        let anchored = item
            .as_object()
            .is_some_and(|o| o.keys().any(|k| !matches!(anchor(k), Anchor::Plain(_))));
        if anchored {
            // Applied to every existing element whose conditions hold.
            for element in list.iter_mut() {
                let mut candidate = element.clone();
                match merge_value(&mut candidate, item, field, late) {
                    Ok(()) => *element = candidate,
                    Err(Skip::Failed(why)) => return Err(Skip::Failed(why)),
                    Err(_) => {}
                }
            }
            continue;
        }
        let item_key = key.and_then(|k| item.get(k));
        let existing = item_key.and_then(|wanted| {
            list.iter_mut()
                .find(|e| key.and_then(|k| e.get(k)) == Some(wanted))
        });
        match existing {
            Some(element) => {
                if let Err(Skip::Failed(why)) = merge_value(element, item, field, late) {
                    return Err(Skip::Failed(why));
                }
            }
            None => list.push(strip_anchors(item)),
        }
    }
    Ok(())
}

/// Whether the resource's value satisfies an anchor's pattern.
fn holds(actual: Option<&Value>, pattern: &Value) -> bool {
    let Some(actual) = actual else {
        return false;
    };
    match pattern {
        Value::Object(expected) => {
            let Some(actual) = actual.as_object() else {
                return false;
            };
            expected.iter().all(|(k, v)| match anchor(k) {
                Anchor::Plain(k) | Anchor::Condition(k) | Anchor::Global(k) => {
                    holds(actual.get(k), v)
                }
                Anchor::AddIfAbsent(_) => true,
            })
        }
        Value::Array(expected) => {
            let Some(actual) = actual.as_array() else {
                return false;
            };
            expected
                .iter()
                .all(|e| actual.iter().any(|a| holds(Some(a), e)))
        }
        scalar => equals(actual, scalar),
    }
}

fn without_conditions(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| matches!(anchor(k), Anchor::Plain(_) | Anchor::AddIfAbsent(_)))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn strip_anchors(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter_map(|(k, v)| match anchor(k) {
                    Anchor::Plain(k) | Anchor::AddIfAbsent(k) => {
                        Some((k.to_string(), strip_anchors(v)))
                    }
                    _ => None,
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_anchors).collect()),
        other => other.clone(),
    }
}

/// Parses `patchesJson6902` (YAML or JSON text of RFC 6902 operations).
pub fn parse_json6902(text: &str) -> Result<json_patch::Patch, String> {
    let value: Value =
        serde_yaml::from_str(text).map_err(|e| format!("is not YAML or JSON: {e}"))?;
    serde_json::from_value(value).map_err(|e| format!("is not a list of RFC 6902 operations: {e}"))
}

/// Applies RFC 6902 operations with Kyverno's reading of `replace`: it adds
/// the value when the path does not exist yet.
pub fn apply_json6902(resource: &mut Value, patch: &json_patch::Patch) -> Result<(), String> {
    for operation in &patch.0 {
        let operation = match operation {
            json_patch::PatchOperation::Replace(replace)
                if resource.pointer(replace.path.as_str()).is_none() =>
            {
                json_patch::PatchOperation::Add(json_patch::AddOperation {
                    path: replace.path.clone(),
                    value: replace.value.clone(),
                })
            }
            other => other.clone(),
        };
        json_patch::patch(resource, std::slice::from_ref(&operation)).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(mut resource: Value, patch: Value) -> (Result<bool, Skip>, Value) {
        let verbatim = |text: &str, _: &Value| Ok(Value::String(text.to_string()));
        let result = strategic_merge(&mut resource, &patch, &verbatim);
        (result, resource)
    }

    #[test]
    fn maps_merge_and_null_deletes() {
        let (r, out) = smp(
            json!({"metadata":{"name":"p","labels":{"a":"1","b":"2"}}}),
            json!({"metadata":{"labels":{"b":null,"c":"3"},"annotations":{"x":"y"}}}),
        );
        assert_eq!(r, Ok(true));
        assert_eq!(
            out,
            json!({"metadata":{"name":"p","labels":{"a":"1","c":"3"},"annotations":{"x":"y"}}})
        );
    }

    #[test]
    fn named_lists_merge_by_their_keys() {
        let pod = json!({"spec":{"containers":[{"name":"a","image":"x","env":[{"name":"E","value":"1"}]},{"name":"b","image":"y"}]}});
        let (_, out) = smp(
            pod,
            json!({"spec":{"containers":[{"name":"a","env":[{"name":"F","value":"2"}]},{"name":"c","image":"z"}]}}),
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name":"a","image":"x","env":[{"name":"E","value":"1"},{"name":"F","value":"2"}]},{"name":"b","image":"y"},{"name":"c","image":"z"}])
        );
        let (_, out) = smp(
            json!({"spec":{"args":["a"]}}),
            json!({"spec":{"args":["b"]}}),
        );
        assert_eq!(
            out["spec"]["args"],
            json!(["b"]),
            "lists without a merge key are replaced"
        );
    }

    #[test]
    fn conditional_anchor_in_list_items() {
        let pod = json!({"spec":{"containers":[{"name":"a","image":"nginx:latest"},{"name":"b","image":"nginx:1.27"}]}});
        let (_, out) = smp(
            pod,
            json!({"spec":{"containers":[{"(image)":"*:latest","imagePullPolicy":"IfNotPresent"}]}}),
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name":"a","image":"nginx:latest","imagePullPolicy":"IfNotPresent"},{"name":"b","image":"nginx:1.27"}])
        );
    }

    #[test]
    fn add_if_absent_and_conditions_at_the_top() {
        let (_, out) = smp(
            json!({"metadata":{"labels":{"a":"1"}}}),
            json!({"metadata":{"labels":{"+(a)":"2","+(b)":"2"}}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"a":"1","b":"2"}));
        let (r, out) = smp(
            json!({"kind":"Pod","metadata":{}}),
            json!({"(kind)":"Deployment","metadata":{"labels":{"x":"y"}}}),
        );
        assert_eq!(r, Ok(false));
        assert_eq!(out, json!({"kind":"Pod","metadata":{}}));
        let (r, _) = smp(json!({"kind":"Pod"}), json!({"<(kind)":"Deployment","x":1}));
        assert!(matches!(r, Err(Skip::Global(_))));
    }

    #[test]
    fn json6902_with_kyverno_replace() {
        let patch = parse_json6902("- op: replace\n  path: /metadata/annotations\n  value: {a: b}\n- op: add\n  path: /metadata/labels/x\n  value: y\n").unwrap();
        let mut pod = json!({"metadata":{"labels":{}}});
        apply_json6902(&mut pod, &patch).unwrap();
        assert_eq!(
            pod,
            json!({"metadata":{"labels":{"x":"y"},"annotations":{"a":"b"}}})
        );
        assert!(parse_json6902("op: add").unwrap_err().contains("RFC 6902"));
        let remove_missing = parse_json6902(r#"[{"op":"remove","path":"/nope"}]"#).unwrap();
        assert!(apply_json6902(&mut pod, &remove_missing).is_err());
    }
}
