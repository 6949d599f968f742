//! Kyverno's autogen for CEL policies: a Pod policy over a Pod controller
//! (Deployment, Job, CronJob...) runs on the controller's Pod template,
//! seen and written back as Kyverno's rewrite of the expressions makes it.

use serde_json::{Value, json};

use super::matching;
use super::policy::CelPolicy;
use crate::request_facts::RequestFacts;

/// What a Pod policy sees of a controller: Kyverno rewrites its expressions
/// so that `object.spec` and `object.metadata.labels` / `.annotations` are
/// the Pod template's; the rest of `object.metadata` (name, namespace, ...)
/// stays the controller's.
pub(super) fn template_view(object: &Value, pointer: &str) -> Value {
    let mut view = crate::autogen::view(object, pointer);
    let mut metadata = object.get("metadata").cloned().unwrap_or_else(|| json!({}));
    if let Some(metadata) = metadata.as_object_mut() {
        for key in ["labels", "annotations"] {
            match view.pointer(&format!("/metadata/{key}")) {
                Some(value) => metadata.insert(key.to_string(), value.clone()),
                None => metadata.remove(key),
            };
        }
    }
    if let Some(view) = view.as_object_mut() {
        view.insert("metadata".to_string(), metadata);
    }
    view
}

/// The view's spec, labels and annotations back into the template; the rest
/// of its metadata into the controller's.
pub(super) fn write_back(object: &mut Value, pointer: &str, mut view: Value) {
    let mut template_metadata = object
        .pointer(pointer)
        .and_then(|t| t.get("metadata"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut controller_metadata = view
        .get_mut("metadata")
        .map(Value::take)
        .unwrap_or_else(|| json!({}));
    if let (Some(template), Some(controller)) = (
        template_metadata.as_object_mut(),
        controller_metadata.as_object_mut(),
    ) {
        for key in ["labels", "annotations"] {
            match controller.remove(key) {
                Some(value) => template.insert(key.to_string(), value),
                None => template.remove(key),
            };
        }
    }
    if let Some(view) = view.as_object_mut() {
        view.insert("metadata".to_string(), template_metadata);
    }
    crate::autogen::write_back(object, pointer, view);
    // The controller keeps its own labels and annotations.
    if let (Some(controller), Some(original)) = (
        controller_metadata.as_object_mut(),
        object.get("metadata").and_then(Value::as_object),
    ) {
        for key in ["labels", "annotations"] {
            if let Some(value) = original.get(key) {
                controller.insert(key.to_string(), value.clone());
            }
        }
    }
    if let Some(object) = object.as_object_mut() {
        object.insert("metadata".to_string(), controller_metadata);
    }
}

/// Where the Pod template is, when the policy's Pod mutations are also
/// generated for the request's controller kind.
pub(super) fn template_pointer(
    policy: &CelPolicy,
    info: &RequestFacts,
    constraints: &super::spec::MatchResources,
) -> Option<&'static str> {
    if policy.autogen.is_empty() || !info.sub_resource.is_empty() {
        return None;
    }
    let pods = info.for_pod_template();
    if !matching::rules_match(constraints, &pods) {
        return None;
    }
    let kind = crate::shared::resources::kind_of(&info.group, &info.resource, &[])?.0;
    crate::autogen::template_pointer(&kind, &policy.autogen)
}
