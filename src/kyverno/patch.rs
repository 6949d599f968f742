//! Mutations: Kyverno's `patchStrategicMerge` (with anchors) and
//! `patchesJson6902`.

use serde_json::{Map, Value};

use super::jmes_values::number_text;

/// Why a strategic merge patch did not apply.
#[derive(Debug, PartialEq)]
pub enum Skip {
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

/// Applies a strategic merge patch (already substituted) to `resource`, in
/// Kyverno's two phases: first the anchors are resolved against the resource
/// (conditions checked, `+(key)` kept or dropped, list elements with
/// conditions turned into plain elements naming the resource elements they
/// matched, anchor-only parts removed), then what is left is merged. Strings
/// that mention `{{@}}` are substituted by `late` against the value they
/// replace. `Ok(false)` when a condition did not hold (nothing is written).
pub fn strategic_merge(
    resource: &mut Value,
    patch: &Value,
    late: LateSubstitution,
) -> Result<bool, Skip> {
    let mut plain = patch.clone();
    match resolve_anchors(&mut plain, Some(resource)) {
        Ok(()) => {}
        Err(Mismatch::Condition) => return Ok(false),
        Err(Mismatch::Global(why)) => return Err(Skip::Global(why)),
    }
    if let Some(map) = plain.as_object_mut() {
        remove_anchors_in_map(map);
    }
    merge_value(resource, &plain, "", late)?;
    Ok(true)
}

/// An anchor that did not hold while resolving.
enum Mismatch {
    /// A conditional anchor: skips the enclosing list element, or the whole
    /// patch when it is not inside a list.
    Condition,
    /// A global anchor: skips the rule, unless another element of the same
    /// list satisfies it.
    Global(String),
}

fn is_condition(key: &str) -> bool {
    matches!(anchor(key), Anchor::Condition(_) | Anchor::Global(_))
}

/// Whether `pattern` has any anchor key selected by `wanted`, in its maps and
/// lists at any depth.
fn has_anchor(pattern: &Value, wanted: &dyn Fn(&Anchor) -> bool) -> bool {
    match pattern {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| wanted(&anchor(k)) || has_anchor(v, wanted)),
        Value::Array(items) => items.iter().any(|i| has_anchor(i, wanted)),
        _ => false,
    }
}

fn any_anchor(a: &Anchor) -> bool {
    !matches!(a, Anchor::Plain(_))
}

fn global_anchor(a: &Anchor) -> bool {
    matches!(a, Anchor::Global(_))
}

fn resolve_anchors(pattern: &mut Value, resource: Option<&Value>) -> Result<(), Mismatch> {
    match pattern {
        Value::Object(map) => resolve_map(map, resource.and_then(Value::as_object)),
        Value::Array(items) if items.first().is_some_and(Value::is_object) => {
            resolve_list(items, resource.and_then(Value::as_array))
        }
        _ => Ok(()),
    }
}

/// `+(key)` is dropped when the resource has `key`, otherwise it becomes a
/// plain `key`. Returns how many there were.
fn resolve_add_if_absent(
    map: &mut Map<String, Value>,
    resource: Option<&Map<String, Value>>,
) -> usize {
    let keys: Vec<String> = map
        .keys()
        .filter(|k| matches!(anchor(k), Anchor::AddIfAbsent(_)))
        .cloned()
        .collect();
    for key in &keys {
        let Some(value) = map.remove(key) else {
            continue;
        };
        if let Anchor::AddIfAbsent(plain) = anchor(key)
            && !resource.is_some_and(|r| r.contains_key(plain))
        {
            map.insert(plain.to_string(), value);
        }
    }
    keys.len()
}

fn resolve_map(
    map: &mut Map<String, Value>,
    resource: Option<&Map<String, Value>>,
) -> Result<(), Mismatch> {
    resolve_add_if_absent(map, resource);
    // Global anchors are checked before conditional ones, over the whole map.
    for global in [true, false] {
        for (key, pattern) in map.iter_mut() {
            let inner = match anchor(key) {
                Anchor::Global(k) if global => k,
                Anchor::Condition(k) if !global => k,
                _ => continue,
            };
            let Some(actual) = resource.and_then(|r| r.get(inner)) else {
                return Err(mismatch(global, || format!("no {inner:?} in the resource")));
            };
            // A condition whose value adds fields is satisfied by adding them.
            if let Value::Object(nested) = pattern
                && resolve_add_if_absent(nested, actual.as_object()) > 0
            {
                continue;
            }
            if !holds(Some(actual), pattern) {
                return Err(mismatch(global, || format!("anchor {key} did not match")));
            }
        }
    }
    // Plain keys, and conditions that held (what they carry besides their
    // checks is patched too), resolve against the resource's value.
    for (key, pattern) in map.iter_mut() {
        if let Anchor::Plain(k) | Anchor::Condition(k) | Anchor::Global(k) = anchor(key) {
            resolve_anchors(pattern, resource.and_then(|r| r.get(k)))?;
        }
    }
    Ok(())
}

/// The reason is only written for a global anchor: a conditional one fails
/// for every list element it does not select, and nobody reads why.
fn mismatch(global: bool, why: impl FnOnce() -> String) -> Mismatch {
    if global {
        Mismatch::Global(format!("global {}", why()))
    } else {
        Mismatch::Condition
    }
}

/// A list element with anchors is tried against every resource element: each
/// one it holds for gets a plain copy naming that element (so the merge
/// patches it), and the anchored element itself is removed later. A global
/// anchor in an element holds when any resource element satisfies it.
fn resolve_list(items: &mut Vec<Value>, resource: Option<&Vec<Value>>) -> Result<(), Mismatch> {
    let mut named = Vec::new();
    for item in items.iter() {
        if !has_anchor(item, &any_anchor) {
            continue;
        }
        let global = has_anchor(item, &global_anchor);
        let mut any_global_held = false;
        let mut last_global = None;
        let mut candidate = item.clone();
        match resource {
            Some(elements) => {
                for element in elements {
                    match resolve_anchors(&mut candidate, Some(element)) {
                        Err(Mismatch::Condition) => {}
                        Err(Mismatch::Global(why)) => last_global = Some(why),
                        Ok(()) if global => any_global_held = true,
                        Ok(()) => named.extend(plain_copy_for(&candidate, element)),
                    }
                }
            }
            None => match resolve_anchors(&mut candidate, None) {
                Err(Mismatch::Condition) => continue,
                Err(global) => return Err(global),
                Ok(()) => any_global_held = global,
            },
        }
        if !any_global_held && let Some(why) = last_global {
            return Err(Mismatch::Global(why));
        }
    }
    items.extend(named);
    Ok(())
}

/// The patch for one resource element a conditional list element held for:
/// the element without its anchor-only parts, naming the resource element.
/// Elements without a name cannot be addressed by the merge and are left.
fn plain_copy_for(candidate: &Value, element: &Value) -> Option<Value> {
    let name = element.get("name").filter(|n| !is_empty(n))?.clone();
    let mut copy = candidate.clone();
    let map = copy.as_object_mut()?;
    if remove_anchors_in_map(map) {
        return None;
    }
    map.insert("name".to_string(), name);
    Some(copy)
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// Removes anchors below `node`; `true` when `node` itself should go (it was
/// only anchors, or is a scalar under a condition key).
fn remove_anchors(node: &mut Value, drop_scalar: bool) -> bool {
    match node {
        Value::Object(map) => remove_anchors_in_map(map),
        Value::Array(items) => {
            let was_empty = items.is_empty();
            items.retain_mut(|item| {
                if has_anchor(item, &any_anchor) {
                    return false;
                }
                !remove_anchors(item, false)
            });
            items.is_empty() && !was_empty
        }
        _ => drop_scalar,
    }
}

/// The last step of resolving, for the whole patch and for each map in it:
/// conditions with scalar values go; conditions on objects lose their
/// anchor and keep what they patch inside; list elements with anchors go. `true` when the map ends empty
/// having had something removed (a map that was `{}` in the patch stays).
fn remove_anchors_in_map(map: &mut Map<String, Value>) -> bool {
    let was_empty = map.is_empty();
    let conditions: Vec<String> = map.keys().filter(|k| is_condition(k)).cloned().collect();
    for key in conditions {
        let Some(mut value) = map.remove(&key) else {
            continue;
        };
        if !remove_anchors(&mut value, true)
            && let Anchor::Condition(plain) | Anchor::Global(plain) = anchor(&key)
        {
            map.insert(plain.to_string(), value);
        }
    }
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if let Some(value) = map.get_mut(&key)
            && remove_anchors(value, false)
        {
            map.remove(&key);
        }
    }
    map.is_empty() && !was_empty
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
            if let Some(target) = resource.as_object_mut() {
                for (key, value) in patch_map {
                    if value.is_null() {
                        target.remove(key);
                        continue;
                    }
                    let child = target.entry(key.clone()).or_insert(Value::Null);
                    merge_value(child, value, key, late)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => merge_list(resource, items, field, late),
        Value::String(text) if super::variables::mentions_at(text) => {
            *resource = late(text, resource).map_err(Skip::Failed)?;
            Ok(())
        }
        // kustomize's merge writes a scalar over a string as the new text
        // with the string's type: a number or bool a variable gave over an
        // existing label is stored as a string (`2` over `app: web` is "2").
        Value::Number(_) | Value::Bool(_) if resource.is_string() => {
            *resource = Value::String(scalar_text(patch));
            Ok(())
        }
        other => {
            *resource = other.clone();
            Ok(())
        }
    }
}

/// A number or bool as the text kustomize's merge leaves (Kyverno v1.19.1,
/// its engine run in e2e-tests/oracle/kyverno): as [`number_text`] writes a
/// number, and `-0` as `0`.
fn scalar_text(scalar: &Value) -> String {
    match scalar {
        Value::Number(number) if number.as_f64() == Some(0.0) => "0".to_string(),
        Value::Number(number) => number_text(number, false),
        other => other.to_string(),
    }
}

/// Lists with a merge key merge element by element; other lists are
/// replaced. Kyverno merges with kustomize's list prepend option, which walks
/// the patch's elements before the resource's: the patch's elements come
/// first, in the patch's order (each merged into the element with its key,
/// if the resource has one), then the resource's other elements in theirs.
fn merge_list(
    resource: &mut Value,
    items: &[Value],
    field: &str,
    late: LateSubstitution,
) -> Result<(), Skip> {
    let Some(key) = merge_key(field) else {
        let mut replaced = Vec::with_capacity(items.len());
        for item in items {
            let mut value = Value::Null;
            merge_value(&mut value, item, "", late)?;
            replaced.push(value);
        }
        *resource = Value::Array(replaced);
        return Ok(());
    };
    let mut rest = match resource.take() {
        Value::Array(list) => list,
        _ => Vec::new(),
    };
    let mut merged = Vec::with_capacity(items.len() + rest.len());
    for item in items {
        let position = item
            .get(key)
            .and_then(|wanted| rest.iter().position(|e| e.get(key) == Some(wanted)));
        let mut value = match position {
            Some(i) => rest.remove(i),
            None => Value::Null,
        };
        merge_value(&mut value, item, field, late)?;
        merged.push(value);
    }
    merged.append(&mut rest);
    *resource = Value::Array(merged);
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
        scalar => super::pattern::matches(actual, scalar),
    }
}

/// Parses `patchesJson6902` (YAML or JSON text of RFC 6902 operations).
pub fn parse_json6902(text: &str) -> Result<json_patch::Patch, String> {
    let value =
        crate::shared::yaml::to_json(text).map_err(|e| format!("is not YAML or JSON: {e}"))?;
    serde_json::from_value(value).map_err(|e| format!("is not a list of RFC 6902 operations: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::rfc6902::apply_json6902;
    use serde_json::json;

    fn smp(mut resource: Value, patch: Value) -> (Result<bool, Skip>, Value) {
        let verbatim = |text: &str, _: &Value| Ok(Value::String(text.to_string()));
        let result = strategic_merge(&mut resource, &patch, &verbatim);
        (result, resource)
    }

    #[test]
    fn a_scalar_over_a_string_is_written_as_its_text() {
        // Kyverno v1.19.1's answers (its engine in e2e-tests/oracle/kyverno),
        // each a variable's value written by patchStrategicMerge over a Pod
        // with `app: web`, `terminationGracePeriodSeconds: 30`,
        // `hostNetwork: false` and a container image `nginx`.
        let pod = json!({"metadata":{"labels":{"app":"web"}},"spec":{"terminationGracePeriodSeconds":30,"hostNetwork":false,"containers":[{"name":"a","image":"nginx"}]}});
        let label = |value: Value| {
            let (r, out) = smp(pod.clone(), json!({"metadata":{"labels":{"app":value}}}));
            assert_eq!(r, Ok(true));
            out["metadata"]["labels"]["app"].clone()
        };
        assert_eq!(label(json!(2)), json!("2"));
        assert_eq!(label(json!(2.0)), json!("2"));
        assert_eq!(label(json!(1.5)), json!("1.5"));
        assert_eq!(label(json!(true)), json!("true"));
        assert_eq!(label(json!(1e12)), json!("1000000000000"));
        assert_eq!(label(json!(1.0 / 3.0)), json!("0.3333333333333333"));
        assert_eq!(label(json!(1e25)), json!("1e+25"));
        assert_eq!(
            label(json!(1.0 / 30_000_000.0)),
            json!("3.3333333333333334e-8")
        );
        assert_eq!(label(json!(-0.0)), json!("0"));
        // A key the object did not have takes the value as it is (the API
        // server then refuses a number), and only a string keeps its type.
        let (_, out) = smp(pod.clone(), json!({"metadata":{"labels":{"new":2}}}));
        assert_eq!(out["metadata"]["labels"]["new"], json!(2));
        let (_, out) = smp(
            pod.clone(),
            json!({"spec":{"terminationGracePeriodSeconds":"x","hostNetwork":2,"containers":[{"name":"a","image":2}]}}),
        );
        assert_eq!(out["spec"]["terminationGracePeriodSeconds"], json!("x"));
        assert_eq!(out["spec"]["hostNetwork"], json!(2));
        assert_eq!(out["spec"]["containers"][0]["image"], json!("2"));
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
            json!([{"name":"a","image":"x","env":[{"name":"F","value":"2"},{"name":"E","value":"1"}]},{"name":"c","image":"z"},{"name":"b","image":"y"}]),
            "the patch's elements first, in its order, then the resource's others, as Kyverno merges"
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
        // A condition on an object at the top: the anchor's key is never
        // written; what the condition carries besides its checks is merged.
        let (r, out) = smp(
            json!({"metadata":{"labels":{"app":"web"}}}),
            json!({"(metadata)":{"labels":{"(app)":"web","+(tier)":"front"}}}),
        );
        assert_eq!(r, Ok(true));
        assert_eq!(
            out,
            json!({"metadata":{"labels":{"app":"web","tier":"front"}}})
        );
    }

    #[test]
    fn json6902_with_kyverno_replace() {
        // Kyverno 1.19.1's engine: `replace` needs what it replaces.
        let patch = parse_json6902("- op: replace\n  path: /metadata/annotations\n  value: {a: b}\n- op: add\n  path: /metadata/labels/x\n  value: 'y'\n").unwrap();
        let mut pod = json!({"metadata":{"labels":{}}});
        assert_eq!(
            apply_json6902(&mut pod, &patch),
            Err(
                "replace operation does not apply: doc is missing key: /metadata/annotations"
                    .into()
            )
        );
        let missing_parent =
            parse_json6902("- op: replace\n  path: /metadata/missing/x\n  value: 1\n").unwrap();
        assert_eq!(
            apply_json6902(&mut pod, &missing_parent),
            Err(
                "replace operation does not apply: doc is missing path: /metadata/missing/x".into()
            )
        );
        let mut pod = json!({"metadata":{"labels":{}, "annotations": {}}});
        apply_json6902(&mut pod, &patch).unwrap();
        assert_eq!(
            pod,
            json!({"metadata":{"labels":{"x":"y"},"annotations":{"a":"b"}}})
        );
        assert!(parse_json6902("op: add").unwrap_err().contains("RFC 6902"));
        let mut affinity = json!({"spec": {}});
        let nested =
            parse_json6902("- op: add\n  path: /spec/terms/-1/expressions/-1\n  value: {key: k}\n")
                .unwrap();
        apply_json6902(&mut affinity, &nested).unwrap();
        assert_eq!(
            affinity,
            json!({"spec": {"terms": [{"expressions": [{"key": "k"}]}]}})
        );
        apply_json6902(&mut affinity, &nested).unwrap();
        assert_eq!(
            affinity,
            json!({"spec": {"terms": [{"expressions": [{"key": "k"}, {"key": "k"}]}]}}),
            "-1 names the last element on the way, the end of the list at the end"
        );
        let before = pod.clone();
        let remove_missing = parse_json6902(r#"[{"op":"remove","path":"/nope"}]"#).unwrap();
        apply_json6902(&mut pod, &remove_missing).unwrap();
        assert_eq!(
            pod, before,
            "removing a missing path is not an error, and changes nothing"
        );
    }
}
