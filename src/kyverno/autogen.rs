//! Kyverno's autogen: a policy whose rules match only Pods also applies them
//! to the Pod templates of Pod controllers. Kyverno does it by generating
//! `autogen-<rule>` rules whose expressions read `request.object.spec.template`
//! where the original read `request.object`; here the same rule runs over a
//! view of the template (the controller's apiVersion and kind, the template's
//! metadata and spec), which is what the rewritten expressions and patches
//! see, and what it writes goes back into the template.

use serde_json::{Map, Value};

use super::spec::{MatchSpec, ResourceDescription, RuleSpec};

/// Whether Kyverno would generate rules for this policy: every rule matches
/// (and excludes) by kind `Pod` only, never by name, label selector or
/// annotations, and at least one names Pods.
pub fn eligible(rules: &[RuleSpec]) -> bool {
    let mut names_pods = false;
    for rule in rules {
        for spec in [rule.match_.as_deref(), rule.exclude.as_deref()]
            .into_iter()
            .flatten()
        {
            for resources in descriptions(spec) {
                if resources.name.is_some()
                    || !resources.names.is_empty()
                    || resources.selector.is_some()
                    || !resources.annotations.is_empty()
                    || resources.kinds.iter().any(|k| k != "Pod")
                {
                    return false;
                }
                names_pods |= !resources.kinds.is_empty();
            }
        }
    }
    names_pods
}

pub fn descriptions(spec: &MatchSpec) -> impl Iterator<Item = &ResourceDescription> {
    spec.any
        .iter()
        .chain(spec.all.iter())
        .flatten()
        .filter_map(|f| f.resources.as_deref())
        .chain(spec.resources.as_deref())
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(value: Value) -> RuleSpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn only_pod_only_policies_are_generated() {
        let pod = rule(json!({"name": "a", "match": {"any": [{"resources": {"kinds": ["Pod"]}}]}}));
        assert!(eligible(std::slice::from_ref(&pod)));
        let named = rule(
            json!({"name": "b", "match": {"any": [{"resources": {"kinds": ["Pod"], "names": ["x"]}}]}}),
        );
        assert!(!eligible(&[pod.clone(), named]));
        let binding = rule(
            json!({"name": "c", "match": {"any": [{"resources": {"kinds": ["Pod/binding"]}}]}}),
        );
        assert!(!eligible(&[pod, binding]));
    }

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
