//! Host capability answers, and the record of what the policy asked.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use serde_json::{Map, Value};

/// One host call as the policy made it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCall {
    pub binding: String,
    pub namespace: String,
    pub operation: String,
    pub payload: Value,
}

impl HostCall {
    pub fn new(binding: &str, namespace: &str, operation: &str, payload: &[u8]) -> HostCall {
        HostCall {
            binding: binding.to_string(),
            namespace: namespace.to_string(),
            operation: operation.to_string(),
            payload: serde_json::from_slice(payload).unwrap_or(Value::Null),
        }
    }
}

/// Answers the policy's host calls with the raw payload the policy sent.
/// `Err` is what the host reports as an error (the policy sees
/// `Callback evaluation failure: <message>`).
pub trait Capabilities: Send + Sync {
    fn answer(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, String>;
}

impl<T: Capabilities + ?Sized> Capabilities for std::sync::Arc<T> {
    fn answer(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, String> {
        (**self).answer(binding, namespace, operation, payload)
    }
}

/// Answers `kubernetes/get_resource` for Nodes (and any other object) from
/// memory, pruned by the request's field masks as policy-server does. Pruned
/// answers are kept, so a benchmark times the policy, not this host.
#[derive(Default)]
pub struct InMemoryCluster {
    objects: BTreeMap<(String, String, Option<String>, String), Value>,
    /// A registry for `oci/v1/*`: reference → `{digest, manifest, config}`.
    images: BTreeMap<String, Value>,
    answers: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    pub calls: Mutex<usize>,
    /// `kubernetes/can_i` rules: (user, verb, resource) allowed; any other
    /// check is denied.
    allowed: Vec<(String, String, String)>,
}

impl InMemoryCluster {
    pub fn with(mut self, object: Value) -> Self {
        self.insert(object);
        self
    }

    /// Adds (or replaces) an object.
    pub fn insert(&mut self, object: Value) {
        let api_version = object["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let namespace = object["metadata"]["namespace"].as_str().map(str::to_string);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        self.objects
            .insert((api_version, kind, namespace, name), object);
    }

    /// Lets `user` do `verb` on `resource` (`*`: any) through `can_i`.
    pub fn allow(mut self, user: &str, verb: &str, resource: &str) -> Self {
        self.allowed
            .push((user.to_string(), verb.to_string(), resource.to_string()));
        self
    }

    /// `kubernetes/can_i`: a SubjectAccessReviewStatus from the rules.
    fn answer_can_i(&self, call: &HostCall) -> Result<Vec<u8>, String> {
        let review = &call.payload["subject_access_review"];
        let attributes = &review["resource_attributes"];
        let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let asked = (
            field(&review["user"]),
            field(&attributes["verb"]),
            field(&attributes["resource"]),
        );
        let allowed = self.allowed.iter().any(|(user, verb, resource)| {
            *user == asked.0
                && (*verb == asked.1 || verb == "*")
                && (*resource == asked.2 || resource == "*")
        });
        let status = if allowed {
            serde_json::json!({"allowed": true, "reason": "allowed by the test's rules"})
        } else {
            serde_json::json!({"allowed": false})
        };
        serde_json::to_vec(&status).map_err(|e| e.to_string())
    }

    /// `list_resources_by_namespace` / `list_resources_all`: the objects of
    /// the `api_version` and `kind` (in the namespace), those a
    /// `label_selector` of `key=value`, `key!=value`, `key` and `!key` terms
    /// selects, as a list `{apiVersion, kind: <Kind>List, metadata, items}`,
    /// each item pruned by the field masks.
    fn answer_list(&self, call: &HostCall) -> Result<Vec<u8>, String> {
        let p = &call.payload;
        let (api_version, kind) = (
            p["api_version"].as_str().unwrap_or_default(),
            p["kind"].as_str().unwrap_or_default(),
        );
        let namespace = p["namespace"].as_str();
        let selector = p["label_selector"].as_str().unwrap_or_default();
        if p["field_selector"].as_str().is_some_and(|f| !f.is_empty()) {
            return Err("field selectors are not simulated".to_string());
        }
        let masks = field_masks(p);
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|((v, k, ns, _), _)| {
                v == api_version && k == kind && (namespace.is_none() || ns.as_deref() == namespace)
            })
            .filter(|(_, object)| selects(selector, &object["metadata"]["labels"]))
            .map(|(_, object)| apply_field_masks(object, masks.as_ref()))
            .collect();
        let list = serde_json::json!({
            "apiVersion": api_version,
            "kind": format!("{kind}List"),
            "metadata": {"resourceVersion": "1"},
            "items": items,
        });
        serde_json::to_vec(&list).map_err(|e| e.to_string())
    }

    /// An image the registry knows: `{digest, manifest, config}`.
    pub fn insert_image(&mut self, reference: &str, image: Value) {
        self.images.insert(reference.to_string(), image);
    }

    /// `oci/v1/manifest_digest` and `oci/v1/oci_manifest_config`, as
    /// policy-server shapes them.
    fn answer_oci(&self, call: &HostCall) -> Result<Vec<u8>, String> {
        let reference = call.payload.as_str().unwrap_or_default();
        let image = self
            .images
            .get(reference)
            .ok_or_else(|| format!("{reference}: manifest unknown"))?;
        let answer = match call.operation.as_str() {
            "v1/manifest_digest" => serde_json::json!({"digest": image["digest"]}),
            "v1/oci_manifest_config" => image.clone(),
            other => return Err(format!("unsupported host call kubewarden/oci/{other}")),
        };
        serde_json::to_vec(&answer).map_err(|e| e.to_string())
    }
}

impl Capabilities for InMemoryCluster {
    fn answer(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, String> {
        if let Ok(mut calls) = self.calls.lock() {
            *calls += 1;
        }
        if let Some(answer) = self
            .answers
            .lock()
            .ok()
            .and_then(|a| a.get(payload).cloned())
        {
            return Ok(answer);
        }
        let call = HostCall::new(binding, namespace, operation, payload);
        if (call.binding.as_str(), call.namespace.as_str()) == ("kubewarden", "oci") {
            return self.answer_oci(&call);
        }
        if call.operation == "can_i" {
            return self.answer_can_i(&call);
        }
        if matches!(
            call.operation.as_str(),
            "list_resources_by_namespace" | "list_resources_all"
        ) && call.namespace == "kubernetes"
        {
            return self.answer_list(&call);
        }
        if (
            call.binding.as_str(),
            call.namespace.as_str(),
            call.operation.as_str(),
        ) != ("kubewarden", "kubernetes", "get_resource")
        {
            return Err(format!(
                "unsupported host call {}/{}/{}",
                call.binding, call.namespace, call.operation
            ));
        }
        let p = &call.payload;
        let key = (
            p["api_version"].as_str().unwrap_or_default().to_string(),
            p["kind"].as_str().unwrap_or_default().to_string(),
            p["namespace"].as_str().map(str::to_string),
            p["name"].as_str().unwrap_or_default().to_string(),
        );
        let object = self.objects.get(&key).ok_or_else(|| {
            format!(
                "Cannot find {}/{} named '{}' inside of namespace '{}'",
                key.0,
                key.1,
                key.3,
                key.2.as_deref().unwrap_or("None")
            )
        })?;
        let answer = masked_answer(object, p)?;
        if let Ok(mut answers) = self.answers.lock() {
            answers.insert(payload.to_vec(), answer.clone());
        }
        Ok(answer)
    }
}

/// Whether `labels` satisfy a label selector of comma-separated equality
/// and existence terms (an empty selector selects everything).
fn selects(selector: &str, labels: &Value) -> bool {
    selector
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .all(|term| {
            let label = |key: &str| labels[key.trim()].as_str();
            if let Some((key, value)) = term.split_once("!=") {
                label(key) != Some(value.trim())
            } else if let Some((key, value)) = term.split_once('=') {
                label(key.trim_end_matches('=')) == Some(value.trim_start_matches('=').trim())
            } else if let Some(key) = term.strip_prefix('!') {
                label(key).is_none()
            } else {
                label(term).is_some()
            }
        })
}

/// An object as policy-server answers it: pruned by the request's field
/// masks, encoded.
pub fn masked_answer(object: &Value, request: &Value) -> Result<Vec<u8>, String> {
    let pruned = apply_field_masks(object, field_masks(request).as_ref());
    serde_json::to_vec(&pruned).map_err(|e| e.to_string())
}

pub fn field_masks(payload: &Value) -> Option<BTreeSet<String>> {
    let masks: BTreeSet<String> = payload
        .get("field_masks")?
        .as_array()?
        .iter()
        .filter_map(|m| m.as_str().map(str::to_string))
        .collect();
    (!masks.is_empty()).then_some(masks)
}

/// Keeps only the masked paths (dot notation, arrays traversed implicitly);
/// no masks keeps everything.
pub fn apply_field_masks(value: &Value, masks: Option<&BTreeSet<String>>) -> Value {
    let Some(masks) = masks else {
        return value.clone();
    };
    let paths: Vec<Vec<&str>> = masks.iter().map(|m| m.split('.').collect()).collect();
    prune(value, &paths.iter().map(Vec::as_slice).collect::<Vec<_>>())
}

/// Kubewarden 1.35's pruning (`field_mask::prune_in_place`): the masks form a
/// tree, and a node with no children keeps everything below it, so
/// `metadata` beside `metadata.labels` keeps only the labels.
fn prune(value: &Value, paths: &[&[&str]]) -> Value {
    if paths.iter().all(|p| p.is_empty()) {
        return value.clone();
    }
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, child) in map {
                let rest: Vec<&[&str]> = paths
                    .iter()
                    .filter_map(|p| p.split_first())
                    .filter(|(first, _)| **first == key.as_str())
                    .map(|(_, rest)| rest)
                    .collect();
                if !rest.is_empty() {
                    out.insert(key.clone(), prune(child, &rest));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| prune(i, paths)).collect()),
        other => other.clone(),
    }
}

/// The `contextAwareResources` a policy was granted, checked before any
/// Kubernetes host call is answered, with policy-server's words.
pub struct Granted<C> {
    resources: Vec<(String, String)>,
    pub inner: C,
}

impl<C> Granted<C> {
    pub fn new(resources: Vec<(String, String)>, inner: C) -> Granted<C> {
        Granted { resources, inner }
    }
}

impl<C: Capabilities> Capabilities for Granted<C> {
    fn answer(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, String> {
        let reads_objects = matches!(
            operation,
            "get_resource" | "list_resources_by_namespace" | "list_resources_all"
        );
        if namespace == "kubernetes" && reads_objects {
            let call = HostCall::new(binding, namespace, operation, payload);
            let api_version = call.payload["api_version"].as_str().unwrap_or_default();
            let kind = call.payload["kind"].as_str().unwrap_or_default();
            if !self
                .resources
                .iter()
                .any(|(v, k)| v == api_version && k == kind)
            {
                return Err(format!(
                    "Policy has not been granted access to Kubernetes {api_version}/{kind} resources. The violation has been reported."
                ));
            }
        }
        self.inner.answer(binding, namespace, operation, payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_prune_to_the_listed_paths() {
        let node = json!({"kind":"Node","metadata":{"name":"n","labels":{"a":"1"},"annotations":{"b":"2"}},"status":{}});
        let masks: BTreeSet<String> = ["metadata.labels".to_string()].into();
        assert_eq!(
            apply_field_masks(&node, Some(&masks)),
            json!({"metadata":{"labels":{"a":"1"}}})
        );
        let list =
            json!({"spec":{"containers":[{"name":"a","image":"x"},{"name":"b","image":"y"}]}});
        let masks: BTreeSet<String> = ["spec.containers.image".to_string()].into();
        assert_eq!(
            apply_field_masks(&list, Some(&masks)),
            json!({"spec":{"containers":[{"image":"x"},{"image":"y"}]}})
        );
        let masks: BTreeSet<String> =
            ["metadata".to_string(), "metadata.labels".to_string()].into();
        assert_eq!(
            apply_field_masks(&node, Some(&masks)),
            json!({"metadata":{"labels":{"a":"1"}}})
        );
    }
}
