//! Kyverno's autogen: a policy whose rules match only Pods also applies them
//! to the Pod templates of Pod controllers. Kyverno does it by generating
//! `autogen-<rule>` rules whose expressions read `request.object.spec.template`
//! where the original read `request.object`; here the same rule runs over a
//! view of the template (the controller's apiVersion and kind, the template's
//! metadata and spec), which is what the rewritten expressions and patches
//! see, and what it writes goes back into the template.

use serde_json::json;

use super::spec::{MatchSpec, ResourceDescription, RuleSpec};

/// Whether Kyverno would generate rules for this policy: every rule matches
/// (and excludes) by kind `Pod` only, never by name, label selector or
/// annotations, and at least one names Pods.
pub fn eligible(rules: &[RuleSpec]) -> bool {
    let mut names_pods = false;
    for rule in rules {
        // Kyverno generates nothing for a policy with a JSON Patch: its
        // paths are the Pod's, not the template's.
        if let Some(mutate) = rule.mutate.as_ref()
            && (mutate.patches_json6902.is_some()
                || mutate
                    .foreach
                    .iter()
                    .flatten()
                    .any(|foreach| foreach.patches_json6902.is_some()))
        {
            return false;
        }
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

/// The rule Kyverno generates for controllers, where it is not the rule
/// itself run over the template's view: a rule with a strategic merge patch
/// keeps only that patch; of each `foreach` entry Kyverno keeps the list,
/// context, preconditions and strategic merge patch, dropping a nested
/// `foreach` and `order`, and an entry with no patch of its own gets
/// `{spec: {template: null}}`, which removes the Pod template (here the
/// view's metadata and spec), so that the API server refuses the controller.
/// `None` when the rule itself is what Kyverno generates.
pub fn generated(rule: &RuleSpec) -> Option<RuleSpec> {
    let mutate = rule.mutate.as_ref()?;
    let entries = mutate.foreach.as_ref()?;
    let kept_whole = mutate.patch_strategic_merge.is_none()
        && entries.iter().all(|each| {
            each.foreach.is_none() && each.order.is_none() && each.patch_strategic_merge.is_some()
        });
    if kept_whole {
        return None;
    }
    let mut generated = rule.clone();
    let mutate = generated.mutate.as_mut()?;
    if mutate.patch_strategic_merge.is_some() {
        mutate.foreach = None;
    }
    for each in mutate.foreach.iter_mut().flatten() {
        each.foreach = None;
        each.order = None;
        if each.patch_strategic_merge.is_none() {
            each.patch_strategic_merge = Some(json!({"metadata": null, "spec": null}));
        }
    }
    Some(generated)
}

/// What [`generated`] changes, said at load: `None` when Kyverno's rule
/// for controllers is the rule itself.
pub fn generated_warning(rule: &RuleSpec) -> Option<&'static str> {
    let mutate = rule.mutate.as_ref()?;
    let entries = mutate.foreach.as_ref()?;
    if mutate.patch_strategic_merge.is_some() {
        return Some("keeps only its patchStrategicMerge: its foreach does not run on them");
    }
    if entries
        .iter()
        .any(|each| each.patch_strategic_merge.is_none())
    {
        return Some(
            "gives a foreach entry without a patchStrategicMerge of its own (a nested foreach) `{spec: {template: null}}`, which removes the Pod template, so the API server refuses them",
        );
    }
    if entries.iter().any(|each| each.foreach.is_some()) {
        return Some("drops nested foreach loops");
    }
    entries
        .iter()
        .any(|each| each.order.is_some())
        .then_some("drops the foreach order")
}

pub fn descriptions(spec: &MatchSpec) -> impl Iterator<Item = &ResourceDescription> {
    spec.any
        .iter()
        .chain(spec.all.iter())
        .flatten()
        .filter_map(|f| f.resources.as_deref())
        .chain(spec.resources.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

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
        assert!(!eligible(&[pod.clone(), binding]));
    }

    /// Kyverno's CanAutoGen: a JSON Patch anywhere in the policy, even in a
    /// foreach, and no rule of it is generated.
    #[test]
    fn a_json_patch_keeps_the_whole_policy_to_pods() {
        let patched = rule(
            json!({"name": "j", "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
            "mutate": {"patchesJson6902": "- {op: add, path: /metadata/labels/a, value: b}"}}),
        );
        assert!(!eligible(&[pod_rule(), patched]));
        let in_foreach = rule(
            json!({"name": "f", "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
            "mutate": {"foreach": [{"list": "request.object.spec.containers",
                "patchesJson6902": "- {op: add, path: /metadata/labels/a, value: b}"}]}}),
        );
        assert!(!eligible(&[in_foreach]));
        assert!(eligible(&[pod_rule()]));
    }

    /// Kyverno's generated rule keeps each foreach entry's own patch only.
    #[test]
    fn a_nested_foreach_is_generated_as_kyverno_generates_it() {
        assert!(generated(&pod_rule()).is_none());
        let nested = rule(
            json!({"name": "n", "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
            "mutate": {"foreach": [{"list": "request.object.spec.containers", "order": "Ascending",
                "foreach": [{"list": "element.env",
                    "patchStrategicMerge": {"metadata": {"annotations": {"a": "b"}}}}]}]}}),
        );
        let entries = generated(&nested)
            .and_then(|rule| rule.mutate)
            .and_then(|mutate| mutate.foreach)
            .unwrap();
        assert_eq!(entries.len(), 1);
        assert!(entries[0].foreach.is_none() && entries[0].order.is_none());
        assert_eq!(
            entries[0].patch_strategic_merge,
            Some(json!({"metadata": null, "spec": null}))
        );
        assert!(
            generated_warning(&nested)
                .unwrap()
                .contains("removes the Pod template")
        );
    }

    fn pod_rule() -> RuleSpec {
        rule(
            json!({"name": "p", "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
            "mutate": {"patchStrategicMerge": {"metadata": {"labels": {"a": "b"}}}}}),
        )
    }
}
