//! What a Kyverno CEL policy's targets (`targetMatchConstraints`,
//! `evaluation.mutateExisting`) ask, decided at load: whether its target is
//! the Pod being bound, the one target an admission reaches ([`crate::cel::bound_pod`]
//! mutates it), and what of the rest is left to Kyverno's background
//! controller, for policy-server's log.

use ::cel::IdedExpr;
use ::cel::common::ast::{Expr, LiteralValue};

use crate::cel::policy::CelPolicy;
use crate::cel::program;
use crate::cel::spec::CelSpec;

const HONOURED: &str = "the one target an admission can reach is the Pod being bound: match only pods/binding, and name the Pod with targetMatchConstraints.expression: resource.get(\"v1\", \"pods\", object.metadata.namespace, object.metadata.name)";

/// Whether a target expression names the Pod being bound, read from its
/// tree: `resource.get("v1", "pods", NAMESPACE, NAME)` (or `Get`), where
/// over a Binding `object.metadata` and `request` carry the Pod's
/// namespace and name.
fn names_bound_pod(expression: &str) -> bool {
    let Ok(compiled) = program::compile(expression, "targetMatchConstraints.expression") else {
        return false;
    };
    let Expr::Call(call) = &compiled.expression.expr else {
        return false;
    };
    let on_resource = call
        .target
        .as_deref()
        .is_some_and(|target| matches!(&target.expr, Expr::Ident(name) if name == "resource"));
    let string = |expr: &IdedExpr, text: &str| matches!(&expr.expr, Expr::Literal(LiteralValue::String(s)) if s.inner() == text);
    let [version, resource, namespace, name] = call.args.as_slice() else {
        return false;
    };
    on_resource
        && matches!(call.func_name.as_str(), "get" | "Get")
        && string(version, "v1")
        && string(resource, "pods")
        && (path_is(namespace, &["object", "metadata", "namespace"])
            || path_is(namespace, &["request", "namespace"]))
        && (path_is(name, &["object", "metadata", "name"]) || path_is(name, &["request", "name"]))
}

/// Whether `expr` is the field path `path` (`object.metadata.name`).
fn path_is(expr: &IdedExpr, path: &[&str]) -> bool {
    match (&expr.expr, path.split_last()) {
        (Expr::Ident(name), Some((last, []))) => name == last,
        (Expr::Select(select), Some((last, rest))) => {
            !select.test && select.field == *last && path_is(&select.operand, rest)
        }
        _ => false,
    }
}

/// Whether `targetMatchConstraints` name targets (resource rules or an
/// expression): Kyverno's webhook then leaves the request alone.
pub(in crate::cel) fn names_targets(spec: &CelSpec) -> bool {
    spec.target_match_constraints.as_ref().is_some_and(|t| {
        !t.resource_rules.is_empty() || t.expression.as_deref().is_some_and(|e| !e.is_empty())
    })
}

fn mutate_existing(spec: &CelSpec) -> bool {
    spec.evaluation
        .as_ref()
        .and_then(|e| e.mutate_existing.as_ref())
        .and_then(|m| m.enabled)
        == Some(true)
}

/// Whether the policy is `mutateExisting` on the Pod being bound: it
/// matches only `pods/binding`, and its target is the bound Pod alone.
pub(in crate::cel) fn check(spec: &CelSpec) -> bool {
    let binding_only = spec.match_constraints.as_ref().is_some_and(|c| {
        !c.resource_rules.is_empty()
            && c.resource_rules.iter().all(|rule| {
                !rule.resources.is_empty() && rule.resources.iter().all(|r| r == "pods/binding")
            })
    });
    let Some(target) = spec.target_match_constraints.as_ref() else {
        return false;
    };
    let pods_only = target.resource_rules.iter().all(|rule| {
        rule.resources.iter().all(|r| r == "pods")
            && rule.api_groups.iter().all(|g| g.is_empty() || g == "*")
    });
    // The expression is parsed last, for a policy that passes the rest.
    mutate_existing(spec)
        && binding_only
        && pods_only
        && target.exclude_resource_rules.is_empty()
        && target.expression.as_deref().is_some_and(names_bound_pod)
}

/// For policy-server's log at load: what a Kyverno policy's `mutateExisting`
/// (or targets without it) does
/// here and what it leaves to Kyverno's background controller, naming the
/// field; `None` when nothing is left out (neither, or the bound Pod).
pub fn warning(policy: &CelPolicy) -> Option<String> {
    if policy.bound_pod || !policy.kind.is_kyverno() {
        return None;
    }
    let spec = &policy.spec;
    let (at, kind, name) = (&policy.at, policy.kind.name(), &policy.name);
    let targets = names_targets(spec);
    if !mutate_existing(spec) {
        return targets.then(|| format!(
            "{at}.spec.targetMatchConstraints: {kind} {name:?} has targets without evaluation.mutateExisting.enabled: it changes nothing, in Kyverno as here"
        ));
    }
    let here = if !policy.admission_enabled() {
        "evaluation.admission.enabled is false, so nothing runs here"
    } else if targets {
        "with targets, Kyverno's webhook leaves the object being admitted alone, and so does this policy"
    } else {
        "the object being admitted is mutated, as Kyverno's webhook mutates it"
    };
    let (background, hint) = match targets {
        true if policy.matches_bindings() => ("the targets", HONOURED),
        true => ("the targets", ""),
        false => ("other existing objects", ""),
    };
    let hint_at = if hint.is_empty() { "" } else { "; " };
    Some(format!(
        "{at}.spec.evaluation.mutateExisting.enabled: {kind} {name:?}: {here}; the background half, mutating {background}, needs Kyverno's background controller, which a Kubewarden policy has no counterpart of{hint_at}{hint}"
    ))
}

#[cfg(test)]
mod tests {
    use crate::cel::policy::targets::names_bound_pod;

    #[test]
    fn the_bound_pod_is_named_by_get_over_the_bindings_name() {
        for expression in [
            "resource.get(\"v1\", \"pods\", object.metadata.namespace, object.metadata.name)",
            "resource.Get('v1', 'pods', request.namespace, request.name)",
            " resource.get(\"v1\",\n \"pods\", object.metadata.namespace, request.name) ",
            "resource.get('v1', 'pods', // the Pod's\n object.metadata.namespace, request.name)",
        ] {
            assert!(names_bound_pod(expression), "{expression}");
        }
        for expression in [
            "resource.get(\"v1\", \"pods\", object.metadata.namespace, \"web-0\")",
            "resource.get(\"v1\", \"configmaps\", object.metadata.namespace, object.metadata.name)",
            "resource.list(\"v1\", \"pods\", object.metadata.namespace)",
            "resource.get(\"v1\", \"pods\", object.metadata.namespace, object.metadata.name).x",
        ] {
            assert!(!names_bound_pod(expression), "{expression}");
        }
    }
}
