//! Autogen, as both of Kyverno's languages do it: a policy on Pods also runs
//! on the Pod templates of Pod controllers. The rule or policy runs over a
//! view of the template (the controller's apiVersion and kind, the
//! template's metadata and spec), and what it writes goes back into the
//! template. Which documents qualify is each language's own rule
//! (`kyverno::autogen`, `cel::compiler`).

use serde_json::{Map, Value};

/// Where the Pod template sits in a controller of this kind, when the policy
/// generates rules for it.
pub fn template_pointer(kind: &str, controllers: &[String]) -> Option<&'static str> {
    if !controllers.iter().any(|c| c == kind) {
        return None;
    }
    match kind {
        "CronJob" => Some("/spec/jobTemplate/spec/template"),
        "DaemonSet"
        | "Deployment"
        | "Job"
        | "StatefulSet"
        | "ReplicaSet"
        | "ReplicationController" => Some("/spec/template"),
        _ => None,
    }
}

/// The rule's view of the template.
pub fn view(object: &Value, pointer: &str) -> Value {
    let template = object.pointer(pointer);
    let mut view = Map::new();
    for key in ["apiVersion", "kind"] {
        if let Some(value) = object.get(key) {
            view.insert(key.to_string(), value.clone());
        }
    }
    for key in ["metadata", "spec"] {
        if let Some(value) = template.and_then(|t| t.get(key)) {
            view.insert(key.to_string(), value.clone());
        }
    }
    Value::Object(view)
}

/// Puts the view's metadata and spec back into the template.
pub fn write_back(object: &mut Value, pointer: &str, view: Value) {
    let Value::Object(mut view) = view else {
        return;
    };
    let mut node = object;
    for step in pointer.split('/').skip(1) {
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        let Some(map) = node.as_object_mut() else {
            return;
        };
        node = map.entry(step.to_string()).or_insert(Value::Null);
    }
    if !node.is_object() {
        *node = Value::Object(Map::new());
    }
    let Some(template) = node.as_object_mut() else {
        return;
    };
    for key in ["metadata", "spec"] {
        match view.remove(key) {
            Some(value) => template.insert(key.to_string(), value),
            None => template.remove(key),
        };
    }
}

/// Kyverno's autogen: a rule that matches only Pods also applies to the Pod
/// templates of these controllers (CronJob's one level deeper).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Autogen {
    pub controllers: Vec<String>,
}

/// The controllers Kyverno generates Pod rules for by default.
pub const AUTOGEN_DEFAULT: [&str; 7] = [
    "DaemonSet",
    "Deployment",
    "Job",
    "StatefulSet",
    "ReplicaSet",
    "ReplicationController",
    "CronJob",
];

impl Default for Autogen {
    fn default() -> Self {
        Autogen {
            controllers: AUTOGEN_DEFAULT.iter().map(|c| c.to_string()).collect(),
        }
    }
}

/// The annotation by which a Kyverno policy chooses which Pod controllers its
/// Pod rules are generated for.
pub const AUTOGEN_ANNOTATION: &str = "pod-policies.kyverno.io/autogen-controllers";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_view_round_trips_into_the_template() {
        let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 1, "template": {"metadata": {"labels": {"a": "1"}}, "spec": {"containers": []}}}});
        let mut pod = view(&deployment, "/spec/template");
        assert_eq!(pod["kind"], "Deployment");
        assert_eq!(pod["metadata"], json!({"labels": {"a": "1"}}));
        pod["metadata"]["annotations"] = json!({"x": "y"});
        write_back(&mut deployment, "/spec/template", pod);
        assert_eq!(
            deployment["spec"]["template"]["metadata"]["annotations"]["x"],
            "y"
        );
        assert_eq!(deployment["spec"]["replicas"], 1);
        assert_eq!(deployment["metadata"], json!({"name": "d"}));
        assert_eq!(
            template_pointer("CronJob", &["CronJob".to_string()]),
            Some("/spec/jobTemplate/spec/template")
        );
        assert_eq!(
            template_pointer("Deployment", &["CronJob".to_string()]),
            None
        );
    }
}
