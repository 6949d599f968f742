//! Metadata the API server would refuse, checked on what every language
//! writes: label and annotation keys and values, the annotations' total
//! size, and maps that are not maps.

use serde_json::{Map, Value};

use crate::shared::k8s_names::{
    TOTAL_ANNOTATION_SIZE_LIMIT, check_label_value, check_qualified_name,
};

/// What is wrong with `value` written under `key` in `metadata.<section>`
/// (`labels` or `annotations`) that the API server would refuse, in words
/// that name the key: `label "bad key" is not a valid key: ...`.
pub fn metadata_problem(section: &str, key: &str, value: Option<&Value>) -> Option<String> {
    let noun = section.strip_suffix('s').unwrap_or(section);
    if let Err(why) = check_qualified_name(key) {
        return Some(format!("{noun} {key:?} is not a valid key: {why}"));
    }
    match value {
        None => None,
        Some(Value::String(value)) if section == "labels" => check_label_value(value)
            .err()
            .map(|why| format!("label {key:?}: value {value:?} is not a valid label value: {why}")),
        Some(Value::String(_)) => None,
        Some(other) => Some(format!("{noun} {key:?}: value {other} is not a string")),
    }
}

/// The maps of `metadata` whose keys are checked.
const METADATA_MAPS: [&str; 2] = ["labels", "annotations"];

/// `metadata.labels` and `.annotations` of `object`, where it has them: what
/// a change is compared with, without copying the rest of the object.
pub fn metadata_maps(object: &Value) -> [Option<&Value>; 2] {
    METADATA_MAPS.map(|section| object.get("metadata").and_then(|m| m.get(section)))
}

/// Kubernetes decodes each mutation's object into its Go type before the
/// next mutation sees it, and ObjectMeta's `labels` and `annotations` are
/// `omitempty`: an empty or null map is gone, so that a later `test` of
/// `/metadata/labels` finds nothing there (checked against k8s.io/apiserver's
/// patchers by `make differential`).
pub fn drop_empty_metadata_maps(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for section in METADATA_MAPS {
            let empty = metadata
                .get(section)
                .is_some_and(|v| v.is_null() || v.as_object().is_some_and(Map::is_empty));
            if empty {
                metadata.remove(section);
            }
        }
    }
}

/// The keys a change of `metadata.<section>` from `old` to `new` writes that
/// the API server would refuse, each with the problem.
fn refused_keys(
    section: &str,
    old: Option<&Value>,
    new: &Map<String, Value>,
) -> Vec<(String, String)> {
    let old = old.and_then(Value::as_object);
    let mut refused = Vec::new();
    for (key, value) in new {
        if old.and_then(|old| old.get(key)) != Some(value)
            && let Some(why) = metadata_problem(section, key, Some(value))
        {
            refused.push((key.clone(), why));
        }
    }
    refused
}

/// The first key that a change from `before` (the object's
/// [`metadata_maps`] then) to `after` writes into `metadata.labels` or
/// `.annotations` and that the API server would refuse (see
/// [`metadata_problem`]), or either written as something else than a map.
pub fn first_metadata_problem(before: [Option<&Value>; 2], after: &Value) -> Option<String> {
    METADATA_MAPS
        .into_iter()
        .zip(before)
        .find_map(
            |(section, old)| match after.get("metadata").and_then(|m| m.get(section)) {
                None | Some(Value::Null) => None,
                Some(Value::Object(new)) => refused_keys(section, old, new)
                    .into_iter()
                    .next()
                    .map(|(_, problem)| problem),
                Some(other) => Some(format!("metadata.{section} is {other}, not a map")),
            },
        )
}

/// What a Kyverno rule wrote into `metadata.labels` / `.annotations` that the
/// API server would refuse (invalid keys or label values, annotations over
/// the size limit) is put back as it was, with a warning per key naming who
/// wrote it (`who`: `rule "r"`, made only for a warning): a refused Binding
/// is a Pod that cannot be scheduled. A map the object did not have before
/// and that nothing valid goes into is not created, so no empty map reaches
/// the patch.
pub fn guard_metadata(who: &dyn Fn() -> String, before: &Value, after: &mut Value) -> Vec<String> {
    let mut warnings = Vec::new();
    let empty = serde_json::Map::new();
    // Borrowed, not copied: a Pod can carry hundreds of keys, and only the
    // ones the rules changed are looked at.
    for (section, had) in METADATA_MAPS.into_iter().zip(metadata_maps(before)) {
        let old = had.and_then(Value::as_object).unwrap_or(&empty);
        let Some(metadata) = after.get_mut("metadata").and_then(Value::as_object_mut) else {
            continue;
        };
        let Some(new) = metadata.get_mut(section) else {
            continue;
        };
        let mut put_back = false;
        match new.as_object_mut() {
            None => {
                warnings.push(format!(
                    "{}: metadata.{section} written as something other than a map; put back",
                    who()
                ));
                *new = Value::Object(old.clone());
                put_back = true;
            }
            Some(new) => {
                for (key, problem) in refused_keys(section, had, new) {
                    warnings.push(format!(
                        "{}: {section} change not applied: {problem}",
                        who()
                    ));
                    put_back = true;
                    match old.get(&key) {
                        Some(previous) => {
                            new.insert(key, previous.clone());
                        }
                        None => {
                            new.remove(&key);
                        }
                    }
                }
                if section == "annotations"
                    && annotations_size(new)
                        > TOTAL_ANNOTATION_SIZE_LIMIT.max(annotations_size(old))
                {
                    warnings.push(format!(
                        "{}: annotations not applied: they would exceed Kubernetes' 256 KiB limit",
                        who()
                    ));
                    *new = old.clone();
                    put_back = true;
                }
            }
        }
        // What was put back leaves no map the object did not have.
        if put_back && had.is_none() && new.as_object().is_some_and(Map::is_empty) {
            metadata.remove(section);
        }
    }
    warnings
}

/// `map[name]` as a map, made where missing or null; `None` where it
/// is something else.
pub fn section<'m>(
    metadata: &'m mut Map<String, Value>,
    name: &str,
) -> Option<&'m mut Map<String, Value>> {
    let entry = metadata
        .entry(name)
        .or_insert_with(|| Value::Object(Map::new()));
    if entry.is_null() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

/// What Kubernetes counts against its 256 KiB annotation limit: every key's
/// and value's length.
pub fn annotations_size(annotations: &Map<String, Value>) -> usize {
    annotations
        .iter()
        .map(|(k, v)| k.len().saturating_add(v.as_str().map_or(0, str::len)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_rules_write_is_checked_like_what_copy_writes() {
        let before = json!({"metadata":{"labels":{"a":"1"},"annotations":{"x":"1"}}});
        let mut after = json!({"metadata":{"labels":{"a":"not valid!","b":"2","bad key":"3"},"annotations":{"x":"2","topology.ku#bernetes.io/zone":"z","n":5}}});
        let warnings = guard_metadata(&|| "rule \"r\"".to_string(), &before, &mut after);
        assert_eq!(
            after,
            json!({"metadata":{"labels":{"a":"1","b":"2"},"annotations":{"x":"2"}}})
        );
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert!(
            warnings.iter().any(|w| w.starts_with(
                "rule \"r\": annotations change not applied: annotation \"topology.ku#bernetes.io/zone\" is not a valid key: "
            )),
            "{warnings:?}"
        );
        assert!(
            warnings.contains(
                &"rule \"r\": annotations change not applied: annotation \"n\": value 5 is not a string"
                    .to_string()
            ),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_map_nothing_valid_goes_into_is_not_created() {
        // Issue 34: an invalid label on a Binding without labels left
        // `labels: {}`, and the patch added an empty map.
        let before = json!({"metadata":{"name":"p"}});
        let mut after = json!({"metadata":{"name":"p","labels":{"bad key":"x"},"annotations":[]}});
        let warnings = guard_metadata(&|| "rule \"r\"".to_string(), &before, &mut after);
        assert_eq!(after, before, "{warnings:?}");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        // A map the object had stays, even emptied.
        let before = json!({"metadata":{"labels":{}}});
        let mut after = json!({"metadata":{"labels":{"bad key":"x"}}});
        guard_metadata(&|| "rule \"r\"".to_string(), &before, &mut after);
        assert_eq!(after, before);
    }

    #[test]
    fn the_first_metadata_problem_names_the_key() {
        let before = json!({"metadata":{"labels":{"ok":"1"}}});
        let problem = |after: Value| first_metadata_problem(metadata_maps(&before), &after);
        assert_eq!(
            problem(json!({"metadata":{"labels":{"ok":"1","b":"2"}}})),
            None
        );
        assert_eq!(
            problem(json!({"metadata":{"labels":{"ok":"1","bad key":"2"}}})).as_deref(),
            Some(
                "label \"bad key\" is not a valid key: name part \"bad key\" may contain only letters, digits, '-', '_' and '.'"
            )
        );
        assert!(
            problem(json!({"metadata":{"labels":{"ok":"not valid!"}}}))
                .is_some_and(|p| p
                    .starts_with("label \"ok\": value \"not valid!\" is not a valid label value"))
        );
        assert_eq!(
            problem(json!({"metadata":{"annotations":"x"}})).as_deref(),
            Some("metadata.annotations is \"x\", not a map")
        );
        assert_eq!(
            problem(json!({"metadata":{"annotations":{"a":"not valid!"}}})),
            None
        );
    }
}
