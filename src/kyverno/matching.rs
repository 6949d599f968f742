//! `match` and `exclude`: which requests a rule applies to.

use serde_json::Value;

use super::spec::{Filter, MatchSpec, ResourceDescription, RuleSpec, Subject};
use crate::host::cluster::{CachedCluster, Read};
use crate::shared::glob::wildcard;
use crate::shared::label_selector::selector_matches;
use crate::shared::request_facts::RequestFacts;

impl RequestFacts {
    /// The name `names` match: the object's as the rules before left it,
    /// else the request's.
    fn name_in<'a>(&'a self, object: &'a Value) -> &'a str {
        object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(&self.name)
    }
}

/// Whether a `match` or `exclude` block selects the request.
pub fn matches(
    spec: &MatchSpec,
    facts: &RequestFacts,
    object: &Value,
    cluster: &CachedCluster,
) -> Result<bool, String> {
    if let Some(any) = &spec.any {
        for filter in any {
            if filter_matches(filter, facts, object, cluster)? {
                return Ok(true);
            }
        }
        return Ok(false);
    }
    if let Some(all) = &spec.all {
        for filter in all {
            if !filter_matches(filter, facts, object, cluster)? {
                return Ok(false);
            }
        }
        return Ok(!all.is_empty());
    }
    // The older single-filter form.
    Parts::of(
        &spec.resources,
        &spec.subjects,
        &spec.roles,
        &spec.cluster_roles,
    )
    .hold(facts, object, cluster)
}

fn filter_matches(
    filter: &Filter,
    facts: &RequestFacts,
    object: &Value,
    cluster: &CachedCluster,
) -> Result<bool, String> {
    Parts::of(
        &filter.resources,
        &filter.subjects,
        &filter.roles,
        &filter.cluster_roles,
    )
    .hold(facts, object, cluster)
}

/// The parts of one filter; each one given must hold.
struct Parts<'s> {
    resources: Option<&'s ResourceDescription>,
    subjects: Option<&'s [Subject]>,
    roles: Option<&'s [String]>,
    cluster_roles: Option<&'s [String]>,
}

impl<'s> Parts<'s> {
    fn of(
        resources: &'s Option<Box<ResourceDescription>>,
        subjects: &'s Option<Vec<Subject>>,
        roles: &'s Option<Vec<String>>,
        cluster_roles: &'s Option<Vec<String>>,
    ) -> Parts<'s> {
        Parts {
            resources: resources.as_deref(),
            subjects: subjects.as_deref(),
            roles: roles.as_deref(),
            cluster_roles: cluster_roles.as_deref(),
        }
    }

    fn hold(
        &self,
        facts: &RequestFacts,
        object: &Value,
        cluster: &CachedCluster,
    ) -> Result<bool, String> {
        if let Some(resources) = self.resources
            && !resources_match(resources, facts, object, cluster)?
        {
            return Ok(false);
        }
        if let Some(subjects) = self.subjects
            && !subjects.iter().any(|s| subject_matches(s, facts))
        {
            return Ok(false);
        }
        let wants_roles = self.roles.is_some_and(|r| !r.is_empty())
            || self.cluster_roles.is_some_and(|r| !r.is_empty());
        if wants_roles {
            let held = requester_roles(facts, cluster)?;
            let any_of = |wanted: Option<&[String]>, held: &[String]| {
                wanted.is_none_or(|w| w.is_empty() || w.iter().any(|r| held.contains(r)))
            };
            if !any_of(self.roles, &held.roles) || !any_of(self.cluster_roles, &held.cluster_roles)
            {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The requester's Roles (`namespace:name`) and ClusterRoles, from the
/// RoleBindings and ClusterRoleBindings that name them, as Kyverno works
/// them out. Read through the host once per evaluation.
#[derive(Debug, Default, PartialEq)]
pub struct HeldRoles {
    pub roles: Vec<String>,
    pub cluster_roles: Vec<String>,
}

pub fn requester_roles(facts: &RequestFacts, cluster: &CachedCluster) -> Result<HeldRoles, String> {
    let list = |kind: &str| {
        cluster
            .read_var(&Read::List {
                api_version: "rbac.authorization.k8s.io/v1".into(),
                kind: kind.into(),
                namespace: None,
                label_selector: None,
                field_selector: None,
            })
            .map(|answer| crate::kyverno::jmes_values::to_value(&answer))
            .map_err(|e| format!("cannot work out the requester's roles: listing {kind}s: {e}"))
    };
    let mut held = HeldRoles::default();
    for (kind, namespaced) in [("RoleBinding", true), ("ClusterRoleBinding", false)] {
        let answer = list(kind)?;
        for binding in answer
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let binds_requester = binding
                .get("subjects")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|subject| binding_subject_is(subject, facts));
            if !binds_requester {
                continue;
            }
            let role_kind = binding.pointer("/roleRef/kind").and_then(Value::as_str);
            let role_name = binding
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let namespace = binding
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            let (list, name) = match role_kind {
                Some("Role") if namespaced => (&mut held.roles, format!("{namespace}:{role_name}")),
                Some("ClusterRole") => (&mut held.cluster_roles, role_name.to_string()),
                _ => continue,
            };
            if !list.contains(&name) {
                list.push(name);
            }
        }
    }
    Ok(held)
}

/// An RBAC binding subject (`User`, `Group`, `ServiceAccount`) that is the requester.
fn binding_subject_is(subject: &Value, facts: &RequestFacts) -> bool {
    let field = |name: &str| subject.get(name).and_then(Value::as_str).unwrap_or("");
    is_requester(
        field("kind"),
        field("name"),
        field("namespace"),
        facts,
        |name, actual| name == actual,
    )
}

fn resources_match(
    r: &ResourceDescription,
    facts: &RequestFacts,
    object: &Value,
    cluster: &CachedCluster,
) -> Result<bool, String> {
    if !r.kinds.is_empty() && !r.kinds.iter().any(|k| kind_matches(k, facts)) {
        return Ok(false);
    }
    let names: Vec<&String> = r.names.iter().chain(r.name.iter()).collect();
    if !names.is_empty() && !names.iter().any(|n| wildcard(n, facts.name_in(object))) {
        return Ok(false);
    }
    if !r.namespaces.is_empty() && !r.namespaces.iter().any(|n| wildcard(n, &facts.namespace)) {
        return Ok(false);
    }
    if !r.operations.is_empty() && !r.operations.contains(&facts.operation) {
        return Ok(false);
    }
    let metadata_map = |field: &str| {
        object
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
    };
    if !r.annotations.is_empty() {
        let annotations = metadata_map("annotations");
        let all = r.annotations.iter().all(|(k, v)| {
            annotations.is_some_and(|a| {
                a.iter().any(|(ak, av)| {
                    wildcard(k, ak) && av.as_str().is_some_and(|av| wildcard(v, av))
                })
            })
        });
        if !all {
            return Ok(false);
        }
    }
    if let Some(selector) = &r.selector
        && !selector_matches(selector, metadata_map("labels"))
    {
        return Ok(false);
    }
    if let Some(selector) = &r.namespace_selector {
        if facts.namespace.is_empty() {
            return Ok(false);
        }
        // Only the labels are matched: the plan asks for at least them
        // (`PolicyPlan::namespace_masks`).
        let namespace = cluster.read_var(&cluster.namespace_read(&facts.namespace))?;
        let labels = namespace
            .as_object()
            .and_then(|n| n.get("metadata"))
            .and_then(|m| m.as_object())
            .and_then(|m| m.get("labels"))
            .map(|l| crate::kyverno::jmes_values::to_value(l));
        let labels = labels.as_ref().and_then(Value::as_object);
        if !selector_matches(selector, labels) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn is_version(segment: &str) -> bool {
    if segment == "*" {
        return true;
    }
    let Some(rest) = segment.strip_prefix('v') else {
        return false;
    };
    let digits = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    if digits.len() == rest.len() {
        return false;
    }
    let tail = digits
        .strip_prefix("alpha")
        .or_else(|| digits.strip_prefix("beta"))
        .unwrap_or(digits);
    tail.chars().all(|c| c.is_ascii_digit()) && (tail.is_empty() || digits != tail)
}

/// Kyverno's kind forms: `Kind`, `Version/Kind`, `Group/Version/Kind`,
/// `Kind/subresource`, `Version/Kind/subresource`, `Group/Version/Kind/subresource`,
/// `*`, `*/*`.
pub fn kind_matches(pattern: &str, facts: &RequestFacts) -> bool {
    kind_pattern_matches(
        pattern,
        &facts.group,
        &facts.version,
        &facts.kind,
        &facts.sub_resource,
    )
}

/// Whether a rule may match `CREATE pods/binding`: one of its `match`
/// filters names a kind that matches a Pod's binding subresource. (Whether
/// the rest of the filter holds is known only per request.)
pub fn may_match_bindings(rule: &RuleSpec) -> bool {
    let Some(spec) = rule.match_.as_deref() else {
        return false;
    };
    super::autogen::descriptions(spec)
        .flat_map(|resources| &resources.kinds)
        .any(|kind| kind_pattern_matches(kind, "", "v1", "Pod", "binding"))
}

fn kind_pattern_matches(
    pattern: &str,
    request_group: &str,
    request_version: &str,
    request_kind: &str,
    request_sub_resource: &str,
) -> bool {
    if pattern == "*/*" {
        return true;
    }
    let parts: Vec<&str> = pattern.split('/').collect();
    let (group, version, kind, sub) = match parts.as_slice() {
        [kind] => (None, None, *kind, None),
        [first, second] if is_version(first) => (None, Some(*first), *second, None),
        [kind, sub] => (None, None, *kind, Some(*sub)),
        [version, kind, sub] if is_version(version) => (None, Some(*version), *kind, Some(*sub)),
        [group, version, kind] => (Some(*group), Some(*version), *kind, None),
        [group, version, kind, sub] => (Some(*group), Some(*version), *kind, Some(*sub)),
        _ => return false,
    };
    group.is_none_or(|g| wildcard(g, request_group))
        && version.is_none_or(|v| wildcard(v, request_version))
        && wildcard(kind, request_kind)
        && match sub {
            None => request_sub_resource.is_empty(),
            Some(sub) => wildcard(sub, request_sub_resource),
        }
}

fn subject_matches(subject: &Subject, facts: &RequestFacts) -> bool {
    is_requester(
        &subject.kind,
        &subject.name,
        subject.namespace.as_deref().unwrap_or(""),
        facts,
        wildcard,
    )
}

/// Whether a subject (`User`, `Group`, `ServiceAccount`) is the requester:
/// users and groups compared by `same`, a ServiceAccount by its exact
/// `system:serviceaccount:NAMESPACE:NAME` user name.
fn is_requester(
    kind: &str,
    name: &str,
    namespace: &str,
    facts: &RequestFacts,
    same: impl Fn(&str, &str) -> bool,
) -> bool {
    match kind {
        "User" => same(name, &facts.user().username),
        "Group" => facts.user().groups.iter().any(|g| same(name, g)),
        "ServiceAccount" => {
            facts.user().username == format!("system:serviceaccount:{namespace}:{name}")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::request_facts::AdmissionRequest;
    use serde_json::json;

    fn facts(request: Value) -> RequestFacts {
        let text = request.to_string();
        let request: AdmissionRequest = serde_json::from_str(&text).unwrap();
        RequestFacts::from_request(&request, &[])
    }

    fn binding() -> RequestFacts {
        facts(
            json!({"operation":"CREATE","kind":{"group":"","version":"v1","kind":"Binding"},
            "resource":{"group":"","version":"v1","resource":"pods"},"subResource":"binding",
            "namespace":"default","object":{"metadata":{"name":"busybox"}},
            "userInfo":{"username":"system:kube-scheduler","groups":["system:authenticated"]}}),
        )
    }

    fn deployment() -> RequestFacts {
        facts(
            json!({"operation":"UPDATE","kind":{"group":"apps","version":"v1","kind":"Deployment"},
            "resource":{"group":"apps","version":"v1","resource":"deployments"},"namespace":"web",
            "object":{"metadata":{"name":"web-1"}},
            "userInfo":{"username":"system:serviceaccount:ci:deployer","groups":[]}}),
        )
    }

    #[test]
    fn kind_forms() {
        let b = binding();
        assert_eq!(b.kind, "Pod");
        assert!(kind_matches("Pod/binding", &b));
        assert!(
            !kind_matches("Pod", &b),
            "a bare kind does not match a subresource"
        );
        assert!(!kind_matches("Binding", &b), "Binding is not Pod/binding");
        assert!(kind_matches("*/*", &b));
        assert!(!kind_matches("*", &b));
        let d = deployment();
        for yes in [
            "Deployment",
            "v1/Deployment",
            "apps/v1/Deployment",
            "apps/*/Deployment",
            "*",
            "Deploy*",
        ] {
            assert!(kind_matches(yes, &d), "{yes}");
        }
        for no in [
            "Pod",
            "v2/Deployment",
            "batch/v1/Deployment",
            "Deployment/scale",
        ] {
            assert!(!kind_matches(no, &d), "{no}");
        }
    }

    #[test]
    fn versions_are_told_from_kinds() {
        for v in ["v1", "v2beta1", "v1alpha3", "*"] {
            assert!(is_version(v), "{v}");
        }
        for k in ["Pod", "vanilla", "v", "v1x"] {
            assert!(!is_version(k), "{k}");
        }
    }

    #[test]
    fn subjects() {
        let d = deployment();
        let sa = Subject {
            kind: "ServiceAccount".into(),
            name: "deployer".into(),
            namespace: Some("ci".into()),
            api_group: None,
        };
        assert!(subject_matches(&sa, &d));
        let user = Subject {
            kind: "User".into(),
            name: "system:kube-*".into(),
            namespace: None,
            api_group: None,
        };
        assert!(subject_matches(&user, &binding()));
        let group = Subject {
            kind: "Group".into(),
            name: "system:authenticated".into(),
            namespace: None,
            api_group: None,
        };
        assert!(subject_matches(&group, &binding()) && !subject_matches(&group, &d));
    }
}
