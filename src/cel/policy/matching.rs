//! `matchConstraints`: which requests a CEL policy applies to, as
//! Kubernetes matches an admission webhook's or policy's rules.

use serde_json::Value;

use crate::cel::spec::{MatchResources, ResourceRule};
use crate::shared::label_selector::selector_matches;
use crate::shared::request_facts::RequestFacts;

/// Whether the resource rules select the request, without the selectors
/// (which need the object and, for namespaces, the host).
pub fn rules_match(constraints: &MatchResources, request: &RequestFacts) -> bool {
    constraints
        .resource_rules
        .iter()
        .any(|rule| rule_matches(rule, request))
        && !constraints
            .exclude_resource_rules
            .iter()
            .any(|rule| rule_matches(rule, request))
}

fn listed(values: &[String], value: &str) -> bool {
    values.iter().any(|v| v == "*" || v == value)
}

fn rule_matches(rule: &ResourceRule, request: &RequestFacts) -> bool {
    listed(&rule.operations, &request.operation)
        && listed(&rule.api_groups, &request.group)
        && listed(&rule.api_versions, &request.version)
        && rule
            .resources
            .iter()
            .any(|entry| resource_matches(entry, request))
        && (rule.resource_names.is_empty() || rule.resource_names.contains(&request.name))
        && match rule.scope.as_deref() {
            Some("Cluster") => request.namespace.is_empty(),
            Some("Namespaced") => !request.namespace.is_empty(),
            _ => true,
        }
}

/// `pods` (no subresource), `pods/binding`, `pods/*`, `*` (every resource,
/// no subresource), `*/*` (everything), `*/binding`.
fn resource_matches(entry: &str, request: &RequestFacts) -> bool {
    let (resource, sub) = match entry.split_once('/') {
        Some((resource, sub)) => (resource, Some(sub)),
        None => (entry, None),
    };
    (resource == "*" || resource == request.resource)
        && match sub {
            None => request.sub_resource.is_empty(),
            Some("*") => true,
            Some(sub) => sub == request.sub_resource,
        }
}

/// `objectSelector` over the object's labels (the old object's for a
/// DELETE, which has no new one).
pub fn object_selected(constraints: &MatchResources, object: Option<&Value>) -> bool {
    match &constraints.object_selector {
        None => true,
        Some(selector) => selector_matches(
            selector,
            object
                .and_then(|o| o.pointer("/metadata/labels"))
                .and_then(Value::as_object),
        ),
    }
}

/// `namespaceSelector` over the request's Namespace, read through the host
/// by the caller; cluster-scoped requests always pass it.
pub fn namespace_selected(constraints: &MatchResources, namespace: Option<&Value>) -> bool {
    match &constraints.namespace_selector {
        None => true,
        Some(selector) => selector_matches(
            selector,
            namespace
                .and_then(|o| o.pointer("/metadata/labels"))
                .and_then(Value::as_object),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(resource: &str, sub: &str, namespace: &str) -> RequestFacts {
        RequestFacts {
            operation: "CREATE".into(),
            group: String::new(),
            version: "v1".into(),
            resource: resource.into(),
            sub_resource: sub.into(),
            name: "p".into(),
            namespace: namespace.into(),
            ..Default::default()
        }
    }

    fn rule(resources: &[&str]) -> MatchResources {
        MatchResources {
            resource_rules: vec![ResourceRule {
                operations: vec!["CREATE".into()],
                api_groups: vec![String::new()],
                api_versions: vec!["v1".into()],
                resources: resources.iter().map(|r| r.to_string()).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn subresources_match_as_kubernetes_matches_them() {
        let binding = request("pods", "binding", "default");
        let pod = request("pods", "", "default");
        assert!(rules_match(&rule(&["pods/binding"]), &binding));
        assert!(!rules_match(&rule(&["pods/binding"]), &pod));
        assert!(!rules_match(&rule(&["pods"]), &binding));
        assert!(rules_match(&rule(&["pods"]), &pod));
        assert!(!rules_match(&rule(&["*"]), &binding));
        assert!(rules_match(&rule(&["*/*"]), &binding));
        assert!(rules_match(&rule(&["*/binding"]), &binding));
        assert!(rules_match(&rule(&["pods/*"]), &binding));
    }

    #[test]
    fn exclusions_scope_and_names_narrow_the_match() {
        let pod = request("pods", "", "default");
        let mut constraints = rule(&["pods"]);
        constraints.exclude_resource_rules = rule(&["pods"]).resource_rules;
        assert!(!rules_match(&constraints, &pod));
        let mut constraints = rule(&["pods"]);
        if let Some(r) = constraints.resource_rules.first_mut() {
            r.scope = Some("Cluster".into());
        }
        assert!(!rules_match(&constraints, &pod));
        let mut constraints = rule(&["pods"]);
        if let Some(r) = constraints.resource_rules.first_mut() {
            r.resource_names = vec!["other".into()];
        }
        assert!(!rules_match(&constraints, &pod));
    }
}
