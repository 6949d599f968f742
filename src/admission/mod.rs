//! Decoding the admission request and deciding what it is to this policy: a
//! Binding to a Node, a Pod created already placed on a Node, or something to
//! let through untouched. Only the fields needed are decoded; the object is
//! kept as the JSON received so unknown fields survive the mutation.

/// What no mutation may change, checked where every engine's result becomes
/// the answer.
pub mod identity;
/// The Binding or Pod as received, rewritten only where it changed.
pub mod object;
/// The commonest request recognised from its bytes, without decoding them.
pub mod pass_through;

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::admission::object::Object;
use crate::shared::json_fields::Key;
pub use crate::shared::request_facts::AdmissionRequest;

/// What `validate` receives from policy-server.
#[derive(Deserialize)]
pub struct ValidatePayload<'a> {
    #[serde(borrow)]
    pub request: AdmissionRequest<'a>,
    #[serde(default, borrow)]
    pub settings: Option<&'a RawValue>,
}

/// What classification reads of `kind` and `resource`, borrowed.
#[derive(Default, Deserialize)]
struct GroupAndName<'a> {
    #[serde(default, borrow)]
    group: Key<'a>,
    #[serde(default, borrow)]
    kind: Key<'a>,
    #[serde(default, borrow)]
    resource: Key<'a>,
}

/// The object to mutate, and the Node whose metadata it gets.
#[derive(Debug)]
pub enum Subject<'a> {
    /// `CREATE pods/binding`: the mutated Binding's annotations (and labels,
    /// with `PodTopologyLabelsAdmission`) are copied onto the Pod.
    Binding { node: String, object: Object<'a> },
    /// `CREATE pods` with `spec.nodeName`: such Pods never get a Binding.
    PlacedPod { node: String, object: Object<'a> },
    /// Nothing to do; `why` is said to the user when it is worth saying.
    PassThrough { why: Option<String> },
}

#[derive(Deserialize)]
struct PodPlacement {
    #[serde(default)]
    spec: Option<PodSpecPlacement>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodSpecPlacement {
    #[serde(default)]
    node_name: Option<String>,
}

/// `whole_object`: decode the whole object now (Kyverno rules will read it)
/// rather than only its metadata (the short form writes nothing else).
pub fn classify<'a>(request: &AdmissionRequest<'a>, whole_object: bool) -> Subject<'a> {
    if request.field::<Key>("operation").0 != "CREATE" {
        return Subject::PassThrough { why: None };
    }
    let resource: GroupAndName = request.field("resource");
    let kind: GroupAndName = request.field("kind");
    let sub_resource: Key = request.field("subResource");
    let (sub_resource, kind_name) = (&*sub_resource.0, &*kind.kind.0);
    let core_pods = resource.group.0.is_empty() && resource.resource.0 == "pods";
    let is_binding =
        core_pods && sub_resource == "binding" && kind.group.0.is_empty() && kind_name == "Binding";
    let is_pod =
        core_pods && sub_resource.is_empty() && kind.group.0.is_empty() && kind_name == "Pod";
    if !is_binding && !is_pod {
        return Subject::PassThrough { why: None };
    }
    let Some(raw) = request.raw("object").filter(|o| o.get() != "null") else {
        return pass_with(format!(
            "the {} request has no object to mutate",
            if is_binding { "pods/binding" } else { "pods" }
        ));
    };
    if is_binding {
        classify_binding(raw, whole_object)
    } else {
        classify_pod(raw, whole_object)
    }
}

fn pass_with(why: String) -> Subject<'static> {
    Subject::PassThrough { why: Some(why) }
}

fn classify_binding(raw: &RawValue, whole_object: bool) -> Subject<'_> {
    // Usually only `target` and `metadata` need decoding; anything odd
    // (duplicate keys, deep nesting) takes the whole-object path below.
    if let Some(object) = (!whole_object).then(|| Object::shallow(raw)).flatten()
        && let Some(target) = object
            .raw("target")
            .and_then(|t| serde_json::from_str::<BindingTarget>(t.get()).ok())
    {
        return match target_node(target.kind.as_deref(), target.name.as_deref()) {
            Ok(node) => Subject::Binding { node, object },
            Err(subject) => subject,
        };
    }
    let object: Value = match serde_json::from_str(raw.get()) {
        Ok(object) => object,
        Err(e) => return pass_with(format!("the Binding cannot be decoded: {e}")),
    };
    let Some(target) = object.get("target").filter(|t| t.is_object()) else {
        return pass_with("the Binding has no target, so there is no Node to read".to_string());
    };
    let kind = target.get("kind").and_then(Value::as_str);
    match target_node(kind, target.get("name").and_then(Value::as_str)) {
        Ok(node) => Subject::Binding {
            node,
            object: Object::Whole(object),
        },
        Err(subject) => subject,
    }
}

/// A Binding's target when it is an object whose `kind` and `name` are
/// strings (or absent); anything else takes the whole-object path.
#[derive(Deserialize)]
struct BindingTarget<'a> {
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
}

/// The Node a Binding's target (`kind`, `name`) names, or what to do when it
/// does not name one.
fn target_node(kind: Option<&str>, name: Option<&str>) -> Result<String, Subject<'static>> {
    // The API server treats an empty target kind as Node.
    let kind = kind.unwrap_or("");
    if !kind.is_empty() && kind != "Node" {
        return Err(Subject::PassThrough { why: None });
    }
    match name {
        Some(name) if !name.is_empty() => Ok(name.to_string()),
        _ => Err(pass_with(
            "the Binding's target has no Node name".to_string(),
        )),
    }
}

fn classify_pod(raw: &RawValue, whole_object: bool) -> Subject<'_> {
    // Most Pods are not placed yet: find out from `spec.nodeName` alone
    // before paying for a full decode of the Pod.
    let node = match serde_json::from_str::<PodPlacement>(raw.get()) {
        Ok(placement) => placement.spec.and_then(|s| s.node_name).unwrap_or_default(),
        Err(e) => return pass_with(format!("the Pod cannot be decoded: {e}")),
    };
    if node.is_empty() {
        return Subject::PassThrough { why: None };
    }
    if let Some(object) = (!whole_object).then(|| Object::shallow(raw)).flatten() {
        return Subject::PlacedPod { node, object };
    }
    match serde_json::from_str(raw.get()) {
        Ok(object) => Subject::PlacedPod {
            node,
            object: Object::Whole(object),
        },
        Err(e) => pass_with(format!("the Pod cannot be decoded: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify_json(request: &str) -> Subject<'_> {
        let request: AdmissionRequest = serde_json::from_str(request).unwrap();
        let subject = classify(&request, false);
        // Decoding the whole object decides the same way.
        let decision = |s: &Subject| match s {
            Subject::Binding { node, .. } => format!("binding to {node}"),
            Subject::PlacedPod { node, .. } => format!("pod on {node}"),
            Subject::PassThrough { why } => format!("pass: {why:?}"),
        };
        assert_eq!(decision(&subject), decision(&classify(&request, true)));
        subject
    }

    fn binding_request(object: &str) -> String {
        format!(
            r#"{{"operation":"CREATE","kind":{{"group":"","version":"v1","kind":"Binding"}},
               "resource":{{"group":"","version":"v1","resource":"pods"}},"subResource":"binding","object":{object}}}"#
        )
    }

    #[test]
    fn binding_to_a_node() {
        match classify_json(&binding_request(
            r#"{"metadata":{"name":"p"},"target":{"kind":"Node","name":"n1"}}"#,
        )) {
            Subject::Binding { node, .. } => assert_eq!(node, "n1"),
            other => panic!("{other:?}"),
        }
        // An empty kind means Node to the API server.
        assert!(matches!(
            classify_json(&binding_request(r#"{"target":{"name":"n1"}}"#)),
            Subject::Binding { .. }
        ));
    }

    #[test]
    fn bindings_without_a_node_pass_with_a_reason() {
        let why = |s: Subject| match s {
            Subject::PassThrough { why } => why,
            other => panic!("{other:?}"),
        };
        assert!(
            why(classify_json(&binding_request(r#"{"metadata":{}}"#)))
                .unwrap()
                .contains("no target")
        );
        assert!(
            why(classify_json(&binding_request(
                r#"{"target":{"kind":"Node","name":""}}"#
            )))
            .unwrap()
            .contains("no Node name")
        );
        assert!(
            why(classify_json(&binding_request(
                r#"{"target":{"kind":"Other","name":"x"}}"#
            )))
            .is_none()
        );
        let no_object = r#"{"operation":"CREATE","kind":{"kind":"Binding"},"resource":{"resource":"pods"},"subResource":"binding"}"#;
        assert!(why(classify_json(no_object)).unwrap().contains("no object"));
    }

    #[test]
    fn pods() {
        let pod = |spec: &str| {
            format!(
                r#"{{"operation":"CREATE","kind":{{"kind":"Pod"}},"resource":{{"resource":"pods"}},"object":{{"metadata":{{"name":"p"}},"spec":{spec}}}}}"#
            )
        };
        assert!(
            matches!(classify_json(&pod(r#"{"nodeName":"n2"}"#)), Subject::PlacedPod { node, .. } if node == "n2")
        );
        assert!(matches!(
            classify_json(&pod(r#"{"containers":[]}"#)),
            Subject::PassThrough { why: None }
        ));
        assert!(matches!(
            classify_json(&pod(r#"{"nodeName":""}"#)),
            Subject::PassThrough { why: None }
        ));
    }

    #[test]
    fn other_requests_pass_silently() {
        let update = r#"{"operation":"UPDATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"},"object":{"spec":{"nodeName":"n"}}}"#;
        assert!(matches!(
            classify_json(update),
            Subject::PassThrough { why: None }
        ));
        let deploy = r#"{"operation":"CREATE","kind":{"group":"apps","kind":"Deployment"},"resource":{"group":"apps","resource":"deployments"},"object":{}}"#;
        assert!(matches!(
            classify_json(deploy),
            Subject::PassThrough { why: None }
        ));
        let status = r#"{"operation":"CREATE","kind":{"kind":"Pod"},"resource":{"resource":"pods"},"subResource":"status","object":{}}"#;
        assert!(matches!(
            classify_json(status),
            Subject::PassThrough { why: None }
        ));
    }
}
