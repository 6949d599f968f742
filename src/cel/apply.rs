//! `ApplyConfiguration`: the expression's object merged into the object as
//! server-side apply merges: maps field by field, associative lists item by
//! item by their keys, every other list replaced whole.
//!
//! Which lists are associative, and by which keys, is Kubernetes' schema for
//! the built-in kinds (`x-kubernetes-list-type: map` and its
//! `x-kubernetes-list-map-keys`); the table below holds the lists of the
//! kinds Pods and their controllers are made of. An object of a kind with no
//! schema here (a custom resource) merges as Kubernetes merges an unknown
//! type: maps field by field, lists replaced.

use serde_json::Value;

/// Lists merged item by item, by the field names that follow them: found by
/// the field path's last segments (list indexes left out).
const ASSOCIATIVE: &[(&[&str], &[&str])] = &[
    (&["containers"], &["name"]),
    (&["initContainers"], &["name"]),
    (&["ephemeralContainers"], &["name"]),
    (&["containers", "env"], &["name"]),
    (&["initContainers", "env"], &["name"]),
    (&["ephemeralContainers", "env"], &["name"]),
    (&["containers", "ports"], &["containerPort", "protocol"]),
    (&["initContainers", "ports"], &["containerPort", "protocol"]),
    (&["containers", "volumeMounts"], &["mountPath"]),
    (&["initContainers", "volumeMounts"], &["mountPath"]),
    (&["ephemeralContainers", "volumeMounts"], &["mountPath"]),
    (&["containers", "volumeDevices"], &["devicePath"]),
    (&["initContainers", "volumeDevices"], &["devicePath"]),
    (&["resources", "claims"], &["name"]),
    (&["spec", "volumes"], &["name"]),
    (&["spec", "imagePullSecrets"], &["name"]),
    (&["spec", "hostAliases"], &["ip"]),
    (
        &["spec", "topologySpreadConstraints"],
        &["topologyKey", "whenUnsatisfiable"],
    ),
    (&["spec", "resourceClaims"], &["name"]),
    (&["spec", "schedulingGates"], &["name"]),
    (&["metadata", "ownerReferences"], &["uid"]),
    (&["status", "conditions"], &["type"]),
];

/// Lists merged as sets of scalars.
const SETS: &[&[&str]] = &[&["metadata", "finalizers"]];

/// Key fields Kubernetes defaults when an item leaves them out.
fn key_default(field: &str) -> Option<Value> {
    (field == "protocol").then(|| Value::String("TCP".to_string()))
}

/// Merges `config` into `object`. `schema` says whether the object is of a
/// built-in kind whose lists the table describes.
pub fn merge(object: &mut Value, config: &Value, schema: bool) -> Result<(), String> {
    let mut path = Vec::new();
    merge_at(object, config, &mut path, schema, 0)
}

const MAX_DEPTH: usize = 128;

fn merge_at(
    object: &mut Value,
    config: &Value,
    path: &mut Vec<String>,
    schema: bool,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested more than {MAX_DEPTH} deep"));
    }
    match (object, config) {
        (Value::Object(target), Value::Object(fields)) => {
            for (name, value) in fields {
                path.push(name.clone());
                match target.get_mut(name) {
                    Some(existing) => merge_at(existing, value, path, schema, depth + 1)?,
                    None => {
                        target.insert(name.clone(), value.clone());
                    }
                }
                path.pop();
            }
            Ok(())
        }
        (Value::Array(items), Value::Array(applied)) if schema => {
            if let Some(keys) = associative_keys(path) {
                for item in applied {
                    let found = items
                        .iter_mut()
                        .find(|existing| same_key(existing, item, keys));
                    match found {
                        Some(existing) => merge_at(existing, item, path, schema, depth + 1)?,
                        None => items.push(item.clone()),
                    }
                }
            } else if is_set(path) {
                for item in applied {
                    if !items.contains(item) {
                        items.push(item.clone());
                    }
                }
            } else {
                *items = applied.clone();
            }
            Ok(())
        }
        (object, config) => {
            *object = config.clone();
            Ok(())
        }
    }
}

fn ends_with(path: &[String], suffix: &[&str]) -> bool {
    path.len() >= suffix.len()
        && path
            .iter()
            .rev()
            .zip(suffix.iter().rev())
            .all(|(segment, wanted)| segment == wanted)
}

fn associative_keys(path: &[String]) -> Option<&'static [&'static str]> {
    ASSOCIATIVE
        .iter()
        .find(|(suffix, _)| ends_with(path, suffix))
        .map(|(_, keys)| *keys)
}

fn is_set(path: &[String]) -> bool {
    SETS.iter().any(|suffix| ends_with(path, suffix))
}

fn same_key(a: &Value, b: &Value, keys: &[&str]) -> bool {
    keys.iter().all(|key| {
        let field = |item: &Value| item.get(key).cloned().or_else(|| key_default(key));
        field(a) == field(b)
    })
}

/// Whether the table describes objects of this `apiVersion`: the built-in
/// groups (no dot, or under `k8s.io`).
pub fn has_schema(api_version: &str) -> bool {
    match api_version.rsplit_once('/') {
        None => true,
        Some((group, _)) => !group.contains('.') || group.ends_with(".k8s.io"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merged(object: Value, config: Value) -> Value {
        let mut object = object;
        merge(&mut object, &config, true).unwrap();
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
    fn atomic_lists_are_replaced_and_sets_unite() {
        assert_eq!(
            merged(
                json!({"spec": {"tolerations": [{"key": "a"}]}, "metadata": {"finalizers": ["x"]}}),
                json!({"spec": {"tolerations": [{"key": "b"}]}, "metadata": {"finalizers": ["y", "x"]}})
            ),
            json!({"spec": {"tolerations": [{"key": "b"}]}, "metadata": {"finalizers": ["x", "y"]}})
        );
    }

    #[test]
    fn custom_resources_replace_lists() {
        let mut object = json!({"spec": {"containers": [{"name": "a"}]}});
        merge(
            &mut object,
            &json!({"spec": {"containers": [{"name": "b"}]}}),
            false,
        )
        .unwrap();
        assert_eq!(object, json!({"spec": {"containers": [{"name": "b"}]}}));
        assert!(has_schema("v1") && has_schema("apps/v1") && has_schema("networking.k8s.io/v1"));
        assert!(!has_schema("example.com/v1"));
    }
}
