//! Running one CEL policy over a request: match (resource rules, selectors,
//! `matchConditions`), then each mutation in order over the object as the
//! mutations before it left it.
//!
//! Policy-server starts every evaluation afresh, so nothing here outlives
//! one request: expressions are parsed when first needed, and only those
//! the request reaches (a request the rules do not match parses none).

use ::cel::Value as CelValue;
use serde_json::Value;

use super::dispatcher::{check_exceptions, condition_holds, mutate};
use crate::cel::eval::evaluation::Evaluation;
use crate::cel::eval::request::{CelRequest, Evaluated};
use crate::cel::policy::CelPolicy;
use crate::cel::policy::autogen::{self, Template, template_for};
use crate::cel::policy::matching;
use crate::cel::{bound_pod, patch::apply};

pub enum CelResult {
    /// The policy does not apply to this request.
    Skipped,
    /// The object as the mutations left it, and the policy's audit
    /// annotations (`<policy>/<key>`, value).
    Mutated {
        object: Value,
        audit: Vec<(String, String)>,
        /// What the policy could not do and let pass (the Pod being bound
        /// left as it is).
        warnings: Vec<String>,
    },
}

/// Runs `policy` over `object`; `Err` is a failure `failurePolicy` judges.
pub fn run(policy: &CelPolicy, object: &Value, request: &CelRequest) -> Result<CelResult, String> {
    let Some(template) = applies(policy, object, request) else {
        return Ok(CelResult::Skipped);
    };
    // Autogen: over a Pod controller, Kyverno runs its rewrite of a Pod
    // policy.
    let rewritten;
    let policy = match template {
        Some(template) => {
            rewritten = autogen::rewritten(policy, template);
            &rewritten
        }
        None => policy,
    };
    let mut evaluation = Evaluation::new(policy, request, object.clone());
    if !admitted(policy, request, &mut evaluation)? {
        return Ok(CelResult::Skipped);
    }
    mutate_admitted(policy, object, request, evaluation)
}

/// Whether the policy runs on this request by what is known without
/// evaluating anything (admission on, namespace, resource rules, object
/// selector): `None` if not, else the Pod template it runs over when this
/// is Kyverno's autogen over a Pod controller.
pub(crate) fn applies(
    policy: &CelPolicy,
    object: &Value,
    request: &CelRequest,
) -> Option<Option<Template>> {
    // Kyverno's webhook runs no policy with admission off, nor one whose
    // targetMatchConstraints name targets (its background controller's).
    if !policy.runs_on_admission() {
        return None;
    }
    if let Some(namespace) = &policy.namespace
        && *namespace != request.facts.namespace
    {
        return None;
    }
    let constraints = policy.spec.match_constraints.as_ref()?;
    // Over a Pod controller, matched as the Pod policy would match the
    // template.
    let template = template_for(policy, request.facts);
    let pod_info;
    let info = match template {
        Some(_) => {
            pod_info = request.facts.for_pod_template();
            &pod_info
        }
        None => request.facts,
    };
    if !matching::rules_match(constraints, info)
        || !matching::object_selected(constraints, Some(object))
    {
        return None;
    }
    Some(template)
}

/// Whether the policy, already found to apply ([`applies`]), admits the
/// request to its mutations: the namespace selector, its exceptions and its
/// `matchConditions`, evaluated in `evaluation`.
pub(crate) fn admitted<'a>(
    policy: &'a CelPolicy,
    request: &CelRequest,
    evaluation: &mut Evaluation<'a>,
) -> Result<bool, String> {
    let Some(constraints) = &policy.spec.match_constraints else {
        return Ok(false);
    };
    if constraints.namespace_selector.is_some() && !request.facts.namespace.is_empty() {
        let namespace = evaluation.namespace()?;
        if !matching::namespace_selected(constraints, Some(&namespace)) {
            return Ok(false);
        }
    }
    // Kyverno checks a target's exceptions over the target (`bound_pod`).
    if !policy.bound_pod && !check_exceptions(policy, evaluation)? {
        return Ok(false);
    }
    // Paths in the settings are for messages: made only when one is needed.
    for (i, condition) in policy.spec.match_conditions.iter().enumerate() {
        let at = || format!("{}.spec.matchConditions[{i}]", policy.at);
        let holds = condition_holds(evaluation, &condition.expression, at);
        let holds = evaluation.condition_within_budget().and(holds);
        if !holds.map_err(|why| format!("matchConditions[{i}] ({:?}): {why}", condition.name))? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The mutations of a policy that admitted the request, and its audit
/// annotations.
fn mutate_admitted<'a>(
    policy: &'a CelPolicy,
    object: &Value,
    request: &CelRequest,
    mut evaluation: Evaluation<'a>,
) -> Result<CelResult, String> {
    // Kyverno's webhook leaves a policy with targetMatchConstraints to its
    // background controller: only the Pod being bound is mutated.
    if policy.bound_pod {
        let (object, warning) = bound_pod::mutate_target(policy, request, evaluation.take_object());
        return Ok(CelResult::Mutated {
            object,
            audit: Vec::new(),
            warnings: warning.into_iter().collect(),
        });
    }
    // Kyverno's auditAnnotations, over the object as received: a string
    // is written, null leaves the key out, anything else is an error.
    let mut audit = Vec::new();
    for (i, annotation) in policy.spec.audit_annotations.iter().enumerate() {
        let at = || format!("{}.spec.auditAnnotations[{i}].valueExpression", policy.at);
        let value = match evaluation.evaluate(&annotation.value_expression, at)? {
            Evaluated::Json(Value::String(s)) => Some(s),
            Evaluated::Json(Value::Null) => None,
            Evaluated::Cel(CelValue::String(s)) => Some(s.to_string()),
            Evaluated::Cel(CelValue::Null) => None,
            _ => {
                return Err(format!(
                    "auditAnnotations[{i}] ({:?}): gives neither a string nor null",
                    annotation.key
                ));
            }
        };
        if let Some(value) = value {
            audit.push((format!("{}/{}", policy.name, annotation.key), value));
        }
    }
    let field = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or_default();
    let schema = apply::schema_of(field("apiVersion"), field("kind"));
    let (mutated, skipped) = mutate(policy, &mut evaluation, schema)?;
    Ok(CelResult::Mutated {
        object: mutated,
        audit,
        warnings: skipped,
    })
}
