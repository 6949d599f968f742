//! RFC 6902 JSON Patch as the two Go libraries the reference engines use
//! apply it, one function each: Kyverno's `patchesJson6902` (evanphx/json-patch
//! v5 with Kyverno's own additions) and a CEL policy's `JSONPatch`
//! (evanphx/json-patch v4, in Kubernetes and Kyverno alike).

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchErrorKind, PatchOperation};
use serde_json::{Map, Value};

/// Applies the operations as evanphx/json-patch v4 does, which Kubernetes
/// and Kyverno apply a CEL `JSONPatch` with: in order, every one must apply,
/// except that a failed `test` leaves the object as it was, without an
/// error (`Ok(None)`), and a member that is not there is read as nothing:
/// `replace` sets it, `copy` from it adds null, and `test` of it holds for
/// null and fails quietly otherwise. `Ok(Some)`: the paths written.
pub fn apply_v4(
    object: &mut Value,
    operations: Vec<PatchOperation>,
) -> Result<Option<Vec<PointerBuf>>, String> {
    // Only a `test` can call for the object as it was.
    let before = operations
        .iter()
        .any(|op| matches!(op, PatchOperation::Test(_)))
        .then(|| object.clone());
    let mut written = Vec::new();
    for (index, operation) in operations.into_iter().enumerate() {
        // A `test` of a member the object lacks reads nothing: that equals
        // null and fails any other value, without error.
        if let PatchOperation::Test(test) = &operation
            && missing_member(object, &test.path)
        {
            if test.value.is_null() {
                continue;
            }
            if let Some(before) = before {
                *object = before;
            }
            return Ok(None);
        }
        let operation = match operation {
            PatchOperation::Replace(replace) if missing_member(object, &replace.path) => {
                PatchOperation::Add(AddOperation {
                    path: replace.path,
                    value: replace.value,
                })
            }
            // The library reads a missing member as nothing and copies
            // that: null is added (kube-apiserver, `make differential`).
            PatchOperation::Copy(copy) if missing_member(object, &copy.from) => {
                PatchOperation::Add(AddOperation {
                    path: copy.path,
                    value: Value::Null,
                })
            }
            other => other,
        };
        if let Err(why) = json_patch::patch(object, std::slice::from_ref(&operation)) {
            if let (PatchErrorKind::TestFailed, Some(before)) = (&why.kind, before) {
                *object = before;
                return Ok(None);
            }
            // Operations go one by one: the crate's index would always be 0.
            return Err(format!(
                "JSON Patch does not apply: operation {index} failed at path '{}': {}",
                why.path, why.kind
            ));
        }
        match operation {
            PatchOperation::Add(op) => written.push(op.path),
            PatchOperation::Replace(op) => written.push(op.path),
            PatchOperation::Copy(op) => written.push(op.path),
            PatchOperation::Move(op) => written.push(op.path),
            PatchOperation::Remove(_) | PatchOperation::Test(_) => {}
        }
    }
    Ok(Some(written))
}

/// Whether `path` names a member of an object that the object lacks.
fn missing_member(object: &Value, path: &json_patch::jsonptr::Pointer) -> bool {
    let Some((parent, last)) = path.split_back() else {
        return false;
    };
    matches!(parent.resolve(object), Ok(Value::Object(map)) if !map.contains_key(last.decoded().as_ref()))
}

/// Applies RFC 6902 operations as Kyverno does: `add` creates missing
/// parents (a list where the next step is `-` or an index, an object
/// otherwise), `remove` of a missing path does nothing, negative indices
/// count from the end, and `replace` of a missing path is an error.
pub fn apply_json6902(resource: &mut Value, patch: &json_patch::Patch) -> Result<(), String> {
    use json_patch::PatchOperation::{Add, Remove, Replace};
    for operation in &patch.0 {
        let mut operation = operation.clone();
        match &mut operation {
            Add(add) => {
                ensure_parents(resource, add.path.as_str());
                add.path = resolved_pointer(resource, &add.path, true);
            }
            Remove(remove) => {
                remove.path = resolved_pointer(resource, &remove.path, false);
                if resource.pointer(remove.path.as_str()).is_none() {
                    continue;
                }
            }
            // evanphx/json-patch v5, which Kyverno applies these with,
            // replaces only what is there (Kyverno 1.19's engine, through
            // `make differential`).
            Replace(replace) => {
                replace.path = resolved_pointer(resource, &replace.path, false);
                if resource.pointer(replace.path.as_str()).is_none() {
                    let parent = replace.path.split_back().map(|(parent, _)| parent);
                    let what = match parent.map(|p| p.resolve(resource).is_ok()) {
                        Some(true) => "key",
                        _ => "path",
                    };
                    return Err(format!(
                        "replace operation does not apply: doc is missing {what}: {}",
                        replace.path
                    ));
                }
            }
            _ => {}
        }
        json_patch::patch(resource, std::slice::from_ref(&operation)).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn pointer_segments(path: &str) -> Vec<String> {
    path.split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect()
}

fn pointer_from(segments: &[String]) -> String {
    segments
        .iter()
        .map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The path with negative list indices turned into positions from the end:
/// `-1` is the last element, except as the last step of an insertion, where
/// it is the end of the list (after the last element).
fn resolved_pointer(
    resource: &Value,
    original: &json_patch::jsonptr::PointerBuf,
    insert: bool,
) -> json_patch::jsonptr::PointerBuf {
    let path = original.as_str();
    let mut segments = pointer_segments(path);
    let last = segments.len().saturating_sub(1);
    let mut node = Some(resource);
    for (i, segment) in segments.iter_mut().enumerate() {
        let extra = i64::from(insert && i == last);
        if let (Some(Value::Array(items)), Ok(index)) = (node, segment.parse::<i64>())
            && index < 0
            && let Some(position) = (items.len() as i64 + extra).checked_add(index)
            && position >= 0
        {
            *segment = position.to_string();
        }
        node = node.and_then(|n| match n {
            Value::Object(map) => map.get(segment.as_str()),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        });
    }
    json_patch::jsonptr::PointerBuf::parse(pointer_from(&segments))
        .unwrap_or_else(|_| original.clone())
}

/// Creates the missing parents of `path`'s last step.
fn ensure_parents(resource: &mut Value, path: &str) {
    let segments = pointer_segments(path);
    let Some((_, parents)) = segments.split_last() else {
        return;
    };
    let mut node = resource;
    for (i, segment) in parents.iter().enumerate() {
        let next_is_index = segments
            .get(i + 1)
            .is_some_and(|n| n == "-" || n.parse::<i64>().is_ok());
        let fresh = || {
            if next_is_index {
                Value::Array(Vec::new())
            } else {
                Value::Object(Map::new())
            }
        };
        node = match node {
            Value::Object(map) => {
                let child = map.entry(segment.clone()).or_insert_with(fresh);
                if child.is_null() {
                    *child = fresh();
                }
                child
            }
            Value::Array(items) => {
                let len = items.len() as i64;
                let index = match segment.parse::<i64>() {
                    Ok(i) if (0..len).contains(&i) => i,
                    Ok(i) if i < 0 && len + i >= 0 => len + i,
                    // `-` or `-1` past an empty list: a new last element.
                    Ok(-1) | Err(_) if segment == "-" || segment == "-1" => {
                        items.push(fresh());
                        len
                    }
                    _ => return,
                };
                let Ok(index) = usize::try_from(index) else {
                    return;
                };
                match items.get_mut(index) {
                    Some(child) => child,
                    None => return,
                }
            }
            _ => return,
        };
    }
}
