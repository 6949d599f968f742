//! Reading a test's YAML documents and naming what they hold: finding the
//! test files, an object's name, namespace and kind, which policy documents the
//! settings take, and the admission request the API server would send for an
//! object.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{Value, json};

/// Every `kyverno-test.yaml` under `root`, sorted.
pub fn find_tests(root: &Path) -> Vec<PathBuf> {
    find_files_named(root, "kyverno-test.yaml")
}

/// Every file called `file_name` under `root`, sorted.
pub fn find_files_named(root: &Path, file_name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == file_name) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

pub fn read_documents(path: &Path) -> Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value: Value = serde_yaml::with::singleton_map_recursive::deserialize(doc)
            .with_context(|| format!("parsing {}", path.display()))?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                docs.extend(
                    map.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            other => docs.push(other),
        }
    }
    Ok(docs)
}

/// Kinds without a namespace; every other object gets `default` when its
/// file names none, as the API server gives it one on creation (Kyverno's CLI
/// does the same for the resources and the expected results).
pub const CLUSTER_SCOPED: [&str; 16] = [
    "Namespace",
    "Node",
    "PersistentVolume",
    "ClusterRole",
    "ClusterRoleBinding",
    "StorageClass",
    "CustomResourceDefinition",
    "PriorityClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ClusterPolicy",
    "IngressClass",
    "RuntimeClass",
    "CSIDriver",
    "APIService",
    "ClusterIssuer",
];

pub fn with_default_namespace(mut object: Value) -> Value {
    let namespaced = !CLUSTER_SCOPED.contains(&kind_of(&object));
    if namespaced
        && namespace_of(&object).is_empty()
        && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        metadata.insert("namespace".to_string(), json!("default"));
    }
    object
}

pub fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

pub fn namespace_of(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

pub fn kind_of(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

/// Kyverno's result `kind` may be `Kind` or `group/version/Kind`.
pub(super) fn short_kind(kind: &str) -> &str {
    kind.rsplit('/').next().unwrap_or(kind)
}

/// A result names a resource as `name` or `namespace/name`.
pub(super) fn find_resource<'a>(
    objects: &'a [Value],
    kind: &str,
    reference: &str,
) -> Option<&'a Value> {
    let (namespace, name) = match reference.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, reference),
    };
    objects.iter().find(|o| {
        name_of(o) == name
            && (kind.is_empty() || kind_of(o) == short_kind(kind))
            && namespace.is_none_or(|ns| namespace_of(o) == ns)
    })
}

/// A policy document the settings take whole: a ClusterPolicy or Policy,
/// a MutatingPolicy or NamespacedMutatingPolicy, a MutatingAdmissionPolicy.
pub fn is_supported_policy(doc: &Value) -> bool {
    let api = doc["apiVersion"].as_str().unwrap_or_default();
    (api.starts_with("kyverno.io/") && matches!(kind_of(doc), "ClusterPolicy" | "Policy"))
        || (api.starts_with("policies.kyverno.io/")
            && matches!(kind_of(doc), "MutatingPolicy" | "NamespacedMutatingPolicy"))
        || (api.starts_with("admissionregistration.k8s.io/")
            && kind_of(doc) == "MutatingAdmissionPolicy")
}

/// Whether a PolicyException names `policy` among its policyRefs.
pub(super) fn names_policy(exception: &Value, policy: &Value) -> bool {
    exception["spec"]["policyRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["kind"] == policy["kind"] && r["name"] == policy["metadata"]["name"])
}

/// Policies that apply only in their own namespace.
pub fn is_namespaced_policy(doc: &Value) -> bool {
    matches!(kind_of(doc), "Policy" | "NamespacedMutatingPolicy")
}

pub(super) fn rule_of<'a>(policy: &'a Value, rule: &str) -> Option<&'a Value> {
    policy["spec"]["rules"]
        .as_array()?
        .iter()
        .find(|r| r["name"].as_str() == Some(rule))
}

fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s') || lower.ends_with('x') {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// The admission request the API server would send for creating `object`.
pub fn create_request(object: &Value, namespace: Option<&str>) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = kind_of(object);
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let mut request = json!({
        "uid": "kyverno-conformance",
        "kind": gvk,
        "requestKind": gvk,
        "resource": {"group": group, "version": version, "resource": plural(kind)},
        "name": name_of(object),
        "operation": "CREATE",
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": object,
        "oldObject": null,
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    });
    let namespace = namespace.unwrap_or_else(|| namespace_of(object));
    if !namespace.is_empty() {
        request["namespace"] = json!(namespace);
    }
    request
}

/// A request for an object of a subresource kind, as the API server sends
/// it: the parent's resource, the subresource, the object's kind.
pub fn subresource_request(request: &mut Value, subresources: &[(String, String, String)]) {
    let kind = request["kind"]["kind"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Some((_, parent, sub)) = subresources.iter().find(|(k, _, _)| *k == kind) {
        request["resource"]["resource"] = json!(parent);
        request["subResource"] = json!(sub);
        request["requestSubResource"] = json!(sub);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_name_the_resource_and_namespace() {
        let object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns"}});
        let request = create_request(&object, None);
        assert_eq!(request["resource"]["resource"], "deployments");
        assert_eq!(request["kind"]["group"], "apps");
        assert_eq!(request["namespace"], "ns");
        assert_eq!(plural("NetworkPolicy"), "networkpolicies");
        assert_eq!(plural("Ingress"), "ingresses");
    }
}
