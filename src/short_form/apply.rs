//! The short form's rules at work: which Node keys become which Pod keys
//! ([`select`]), and writing them into the received object ([`apply`]) without
//! ever producing metadata the API server would refuse.

use std::collections::BTreeMap;

use serde_json::map::Entry;
use serde_json::{Map, Value};

use super::entry::PresetKeys;
use super::rule::{CopyRule, Source};
use crate::host::node_lookup::NodeMetadata;
use crate::shared::k8s_names::{
    TOTAL_ANNOTATION_SIZE_LIMIT, check_label_value, check_qualified_name, reserved_prefix,
};
use crate::shared::metadata::{annotations_size, section};

/// Node metadata chosen for the Pod, per destination, with the rule that
/// produced each key (first rule listed wins a key).
#[derive(Debug, Default)]
pub struct Selection<'p> {
    pub annotations: BTreeMap<String, (String, &'p CopyRule)>,
    pub labels: BTreeMap<String, (String, &'p CopyRule)>,
    pub warnings: Vec<String>,
}

/// At most this many keys are written in one evaluation (labels and
/// annotations together): a glob over a Node with thousands of labels cannot
/// produce an object of unbounded size.
pub const MAX_KEYS_WRITTEN: usize = 1000;

pub fn select<'p>(rules: &'p [CopyRule], node_name: &str, node: &NodeMetadata) -> Selection<'p> {
    let mut selection = Selection::default();
    let mut skipped = 0usize;
    // Entries that met only reserved keys, with those keys.
    let mut only_withheld = Vec::new();
    for rule in rules {
        let source = match rule.source {
            Source::Label => &node.labels,
            Source::Annotation => &node.annotations,
        };
        let mut found = Vec::new();
        if rule.selector.is_exact() {
            match source.get(rule.selector.as_str()) {
                Some(value) => found.push((rule.selector.as_str(), value.as_str())),
                None => {
                    if let Some(default) = &rule.default {
                        found.push((rule.selector.as_str(), default.as_str()));
                    }
                }
            }
        } else {
            found.extend(
                source
                    .iter()
                    .filter(|(key, _)| rule.selector.matches(key.as_str()))
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            );
        }
        // Reserved keys this glob met and left out: worth a word when they
        // are all it met and no other entry wrote them.
        let mut withheld = Vec::new();
        let mut copied = false;
        for (node_key, value) in found {
            if selection
                .annotations
                .len()
                .saturating_add(selection.labels.len())
                >= MAX_KEYS_WRITTEN
            {
                skipped = skipped.saturating_add(1);
                continue;
            }
            let pod_key = rule.naming.apply(node_key);
            if let Err(why) = check_qualified_name(&pod_key) {
                selection.warnings.push(format!(
                    "Node {node_name:?} {} {node_key:?} not copied: Pod key {pod_key:?} is invalid: {why}",
                    rule.source.noun()
                ));
                continue;
            }
            // Keys under kubernetes.io / k8s.io are Kubernetes' own: write them
            // only where the settings spell that prefix out.
            if reserved_prefix(&pod_key).is_some() && !rule.names_prefix_of(&pod_key) {
                withheld.push(pod_key);
                continue;
            }
            copied = true;
            if rule.destination.annotations() {
                selection
                    .annotations
                    .entry(pod_key.clone())
                    .or_insert_with(|| (value.to_string(), rule));
            }
            if rule.destination.labels() {
                match check_label_value(value) {
                    Ok(()) => {
                        selection.labels.entry(pod_key).or_insert_with(|| (value.to_string(), rule));
                    }
                    Err(why) => selection.warnings.push(format!(
                        "Node {node_name:?} {} {node_key:?} not copied to Pod label {pod_key:?}: value is not a valid label value: {why}",
                        rule.source.noun()
                    )),
                }
            }
        }
        if !copied && !withheld.is_empty() {
            only_withheld.push((rule, withheld));
        }
    }
    for (rule, mut withheld) in only_withheld {
        withheld.retain(|key| {
            !selection.annotations.contains_key(key) && !selection.labels.contains_key(key)
        });
        if let Some(example) = withheld.first() {
            let prefix = example.split_once('/').map_or("", |(prefix, _)| prefix);
            selection.warnings.push(format!(
                "settings.{} glob {:?} matched only Node {}s under prefixes Kubernetes reserves ({}), so nothing was copied: such keys are copied only by an entry that spells the prefix out, such as \"{prefix}/*\"",
                rule.origin,
                rule.selector.as_str(),
                rule.source.noun(),
                withheld.join(", ")
            ));
        }
    }
    if skipped > 0 {
        selection.warnings.insert(
            0,
            format!(
            "{skipped} Node keys not copied from Node {node_name:?}: at most {MAX_KEYS_WRITTEN} keys are written per Pod"
        ),
        );
    }
    selection
}

/// What applying a selection did.
#[derive(Debug, Default)]
pub struct Applied {
    pub changed: bool,
    pub warnings: Vec<String>,
}

/// Whether stale managed keys already on the object are handled: only a Pod
/// created with `spec.nodeName` carries metadata its creator chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Binding,
    PlacedPod,
}

/// Writes the selection into `object.metadata`. Returns `Err` with a message
/// when the Pod must be rejected (`onPresetKeys: Reject`).
pub fn apply(
    object: &mut Value,
    selection: Selection,
    rules: &[CopyRule],
    on_preset_keys: PresetKeys,
    kind: ObjectKind,
) -> Result<Applied, String> {
    let mut applied = Applied {
        changed: false,
        warnings: selection.warnings,
    };
    let Some(object_map) = object.as_object_mut() else {
        applied
            .warnings
            .push("the object is not a JSON object; left unchanged".to_string());
        return Ok(applied);
    };
    let metadata = object_map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        applied
            .warnings
            .push("the object's metadata is not a JSON object; left unchanged".to_string());
        return Ok(applied);
    };

    if kind == ObjectKind::PlacedPod {
        let stale_annotations = stale_keys(
            metadata.get("annotations"),
            &selection.annotations,
            rules,
            false,
        );
        let stale_labels = stale_keys(metadata.get("labels"), &selection.labels, rules, true);
        if on_preset_keys == PresetKeys::Reject {
            let mut lies: Vec<String> = stale_annotations
                .iter()
                .map(|k| format!("annotation {k:?}"))
                .collect();
            lies.extend(stale_labels.iter().map(|k| format!("label {k:?}")));
            lies.extend(mismatched(
                metadata.get("annotations"),
                &selection.annotations,
                "annotation",
            ));
            lies.extend(mismatched(
                metadata.get("labels"),
                &selection.labels,
                "label",
            ));
            if !lies.is_empty() {
                return Err(format!(
                    "Pod sets {} that this policy fills from its Node, with values the Node does not have; remove them (onPresetKeys: Reject)",
                    lies.join(", ")
                ));
            }
        }
        applied.changed |= remove_keys(metadata, "annotations", &stale_annotations);
        applied.changed |= remove_keys(metadata, "labels", &stale_labels);
    }

    if !selection.labels.is_empty() {
        match section(metadata, "labels") {
            Some(labels) => {
                for (key, (value, _)) in selection.labels {
                    applied.changed |= set(labels, key, value);
                }
            }
            None => applied
                .warnings
                .push("metadata.labels is not a map; labels not written".to_string()),
        }
    }
    if !selection.annotations.is_empty() {
        match section(metadata, "annotations") {
            Some(annotations) => {
                let mut total = annotations_size(annotations);
                for (key, (value, _)) in selection.annotations {
                    let size = key.len().saturating_add(value.len());
                    // One search of the map per key: string comparisons are
                    // most of the cost of writing many keys in wasm.
                    let mut slot = annotations.entry(key);
                    let old = match &mut slot {
                        Entry::Occupied(old) if old.get().as_str() == Some(value.as_str()) => {
                            continue;
                        }
                        Entry::Occupied(old) => {
                            let old_value = old.get().as_str().map_or(0, str::len);
                            old.key().len().saturating_add(old_value)
                        }
                        Entry::Vacant(_) => 0,
                    };
                    let new_total = total.saturating_sub(old).saturating_add(size);
                    if new_total > TOTAL_ANNOTATION_SIZE_LIMIT {
                        applied.warnings.push(format!(
                            "annotation {:?} not written: it would take the annotations over Kubernetes' 256 KiB limit",
                            slot.key()
                        ));
                        continue;
                    }
                    total = new_total;
                    match slot {
                        Entry::Occupied(mut old) => {
                            old.insert(Value::String(value));
                        }
                        Entry::Vacant(new) => {
                            new.insert(Value::String(value));
                        }
                    }
                    applied.changed = true;
                }
            }
            None => applied
                .warnings
                .push("metadata.annotations is not a map; annotations not written".to_string()),
        }
    }
    Ok(applied)
}

fn set(map: &mut Map<String, Value>, key: String, value: String) -> bool {
    if map.get(&key).and_then(Value::as_str) == Some(value.as_str()) {
        return false;
    }
    map.insert(key, Value::String(value));
    true
}

/// Keys on the Pod that a rule manages (its produced keys follow the rule's
/// target pattern, and that pattern names a prefix or a whole key) but that
/// the Node does not back.
fn stale_keys(
    existing: Option<&Value>,
    selected: &BTreeMap<String, (String, &CopyRule)>,
    rules: &[CopyRule],
    labels: bool,
) -> Vec<String> {
    let Some(existing) = existing.and_then(Value::as_object) else {
        return Vec::new();
    };
    existing
        .keys()
        .filter(|key| !selected.contains_key(*key))
        .filter(|key| {
            rules.iter().any(|rule| {
                let in_place = if labels {
                    rule.destination.labels()
                } else {
                    rule.destination.annotations()
                };
                in_place && manages(rule, key)
            })
        })
        .cloned()
        .collect()
}

fn manages(rule: &CopyRule, key: &str) -> bool {
    let names_key_or_prefix = rule.target.is_exact() || rule.target.literal_prefix().contains('/');
    names_key_or_prefix && rule.target.matches(key)
}

fn mismatched(
    existing: Option<&Value>,
    selected: &BTreeMap<String, (String, &CopyRule)>,
    noun: &str,
) -> Vec<String> {
    let Some(existing) = existing.and_then(Value::as_object) else {
        return Vec::new();
    };
    selected
        .iter()
        .filter(|(key, (value, _))| {
            existing
                .get(*key)
                .is_some_and(|v| v.as_str() != Some(value.as_str()))
        })
        .map(|(key, _)| format!("{noun} {key:?}"))
        .collect()
}

fn remove_keys(metadata: &mut Map<String, Value>, name: &str, keys: &[String]) -> bool {
    let Some(map) = metadata.get_mut(name).and_then(Value::as_object_mut) else {
        return false;
    };
    let mut changed = false;
    for key in keys {
        changed |= map.remove(key).is_some();
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::node_lookup::Text;
    use crate::settings::load;
    use serde_json::json;

    fn node(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> NodeMetadata<'static> {
        let texts = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (Text::from(*k), Text::from(*v)))
                .collect()
        };
        NodeMetadata {
            labels: texts(labels),
            annotations: texts(annotations),
        }
    }

    fn run(
        settings: &str,
        node: &NodeMetadata,
        mut object: Value,
        kind: ObjectKind,
    ) -> (Result<Applied, String>, Value) {
        let plan = load(settings.as_bytes()).unwrap();
        let selection = select(&plan.copy, "n1", node);
        let result = apply(
            &mut object,
            selection,
            &plan.copy,
            plan.on_preset_keys,
            kind,
        );
        (result, object)
    }

    const ZONE: &str = "topology.kubernetes.io/zone";
    const REGION: &str = "topology.kubernetes.io/region";

    #[test]
    fn default_copies_zone_and_region_only() {
        let n = node(&[(ZONE, "a"), (REGION, "r"), ("other", "x")], &[]);
        let (res, obj) = run(
            "{}",
            &n,
            json!({"target":{"name":"n1"}}),
            ObjectKind::Binding,
        );
        assert!(res.unwrap().changed);
        assert_eq!(
            obj,
            json!({"target":{"name":"n1"},"metadata":{"annotations":{ZONE:"a",REGION:"r"}}})
        );
    }

    #[test]
    fn second_run_changes_nothing() {
        let n = node(&[(ZONE, "a")], &[]);
        let (_, once) = run("{}", &n, json!({}), ObjectKind::Binding);
        let (res, twice) = run("{}", &n, once.clone(), ObjectKind::Binding);
        assert!(!res.unwrap().changed);
        assert_eq!(once, twice);
    }

    #[test]
    fn globs_rename_prefix_default_and_labels() {
        let n = node(
            &[
                ("rack.example.com/row", "7"),
                ("rack.example.com/slot", "3"),
                ("zone", "z"),
            ],
            &[("team.example.com/owner", "infra")],
        );
        let settings = r#"{"copy":[
            {"label":"rack.example.com/*","replacePrefix":{"from":"rack.example.com/","to":"node.example.com/"},"to":"both"},
            {"label":"zone","rename":"example.com/zone"},
            {"annotation":"team.example.com/*","addPrefix":"x-"},
            {"label":"missing","default":"none","rename":"example.com/missing"},
            {"label":"missing-too"}
        ]}"#;
        let (res, obj) = run(settings, &n, json!({}), ObjectKind::Binding);
        assert!(res.unwrap().warnings.is_empty());
        assert_eq!(
            obj["metadata"],
            json!({
                "labels": {"node.example.com/row":"7","node.example.com/slot":"3"},
                "annotations": {"node.example.com/row":"7","node.example.com/slot":"3","example.com/zone":"z",
                                "x-team.example.com/owner":"infra","example.com/missing":"none"}
            })
        );
    }

    #[test]
    fn invalid_keys_and_label_values_are_skipped_with_warnings() {
        let n = node(
            &[
                ("a.example.com/ok", "fine"),
                ("a.example.com/bad", "not a label value!"),
            ],
            &[("x/-bad", "v")],
        );
        let settings = r#"{"copy":[{"label":"a.example.com/*","to":"both"},{"annotation":"x/*"}]}"#;
        let (res, obj) = run(settings, &n, json!({}), ObjectKind::Binding);
        let warnings = res.unwrap().warnings;
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].contains("\"a.example.com/bad\" not copied to Pod label"),
            "{warnings:?}"
        );
        assert!(
            warnings[1].contains("Pod key \"x/-bad\" is invalid"),
            "{warnings:?}"
        );
        // Annotations take any value; labels only valid ones.
        assert_eq!(
            obj["metadata"]["annotations"]["a.example.com/bad"],
            "not a label value!"
        );
        assert_eq!(
            obj["metadata"]["labels"],
            json!({"a.example.com/ok":"fine"})
        );
    }

    #[test]
    fn reserved_prefixes_need_to_be_named() {
        let n = node(
            &[(ZONE, "a"), ("kubernetes.io/hostname", "h"), ("rack", "r")],
            &[],
        );
        let (_, obj) = run(
            r#"{"copy":[{"label":"*"}]}"#,
            &n,
            json!({}),
            ObjectKind::Binding,
        );
        assert_eq!(obj["metadata"]["annotations"], json!({"rack":"r"}));
        let (_, obj) = run(
            r#"{"copy":[{"label":"topology.kubernetes.io/*"}]}"#,
            &n,
            json!({}),
            ObjectKind::Binding,
        );
        assert_eq!(obj["metadata"]["annotations"], json!({ZONE:"a"}));
    }

    #[test]
    fn annotation_size_limit_is_respected() {
        let big = "v".repeat(200 * 1024);
        let n = node(
            &[],
            &[
                ("a.example.com/big1", big.as_str()),
                ("a.example.com/big2", big.as_str()),
            ],
        );
        let (res, obj) = run(
            r#"{"copy":[{"annotation":"a.example.com/*"}]}"#,
            &n,
            json!({}),
            ObjectKind::Binding,
        );
        let warnings = res.unwrap().warnings;
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("big2") && w.contains("256 KiB")),
            "{warnings:?}"
        );
        assert!(
            obj["metadata"]["annotations"]
                .get("a.example.com/big1")
                .is_some()
        );
        assert!(
            obj["metadata"]["annotations"]
                .get("a.example.com/big2")
                .is_none()
        );
    }

    #[test]
    fn placed_pods_get_preset_keys_overwritten_or_removed() {
        let n = node(&[(ZONE, "real")], &[]);
        let pod = json!({"metadata":{"annotations":{ZONE:"fake",REGION:"fake","user":"keep"}}});
        let (res, obj) = run("{}", &n, pod, ObjectKind::PlacedPod);
        assert!(res.unwrap().changed);
        assert_eq!(
            obj["metadata"]["annotations"],
            json!({ZONE:"real","user":"keep"})
        );
    }

    #[test]
    fn placed_pods_with_lies_can_be_rejected() {
        let n = node(&[(ZONE, "real")], &[]);
        let pod = json!({"metadata":{"annotations":{ZONE:"fake"}}});
        let (res, _) = run(
            r#"{"onPresetKeys":"Reject"}"#,
            &n,
            pod,
            ObjectKind::PlacedPod,
        );
        let msg = res.unwrap_err();
        assert!(
            msg.contains("annotation \"topology.kubernetes.io/zone\""),
            "{msg}"
        );
        // The truth is fine.
        let pod = json!({"metadata":{"annotations":{ZONE:"real"}}});
        let (res, _) = run(
            r#"{"onPresetKeys":"Reject"}"#,
            &n,
            pod,
            ObjectKind::PlacedPod,
        );
        assert!(!res.unwrap().changed);
    }

    #[test]
    fn odd_metadata_is_left_alone_with_a_warning() {
        let n = node(&[(ZONE, "a")], &[]);
        let (res, obj) = run("{}", &n, json!({"metadata":"oops"}), ObjectKind::Binding);
        let applied = res.unwrap();
        assert!(!applied.changed && applied.warnings[0].contains("metadata is not a JSON object"));
        assert_eq!(obj, json!({"metadata":"oops"}));
        let (res, _) = run(
            "{}",
            &n,
            json!({"metadata":{"annotations":[1]}}),
            ObjectKind::Binding,
        );
        assert!(res.unwrap().warnings[0].contains("annotations is not a map"));
        let (res, obj) = run(
            "{}",
            &n,
            json!({"metadata":{"annotations":null}}),
            ObjectKind::Binding,
        );
        assert!(res.unwrap().changed);
        assert_eq!(obj["metadata"]["annotations"][ZONE], "a");
    }
}
