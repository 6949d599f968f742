//! Dispatching one CEL policy's parts over an evaluation, in Kubernetes' and
//! Kyverno's order: exceptions, conditions, then each mutation's patcher
//! over the object as the one before left it.

use ::cel::Value as CelValue;
use serde_json::{Value, json};

use crate::cel::check::result_types;
use crate::cel::eval::evaluation::Evaluation;
use crate::cel::eval::request::Evaluated;
use crate::cel::libraries::values::to_json;
use crate::cel::patch::apply;
use crate::cel::patch::patchers::{Patcher, Patching};
use crate::cel::policy::CelPolicy;
use crate::shared::policy_options::FailurePolicy;

/// Kyverno checks exceptions first: `false` where one that holds exempts
/// the object; one that only lists images or values hands them to the
/// policy (`exceptions`).
pub(super) fn check_exceptions<'a>(
    policy: &'a CelPolicy,
    evaluation: &mut Evaluation<'a>,
) -> Result<bool, String> {
    let mut allowed_images = Vec::new();
    let mut allowed_values = Vec::new();
    for exception in &policy.exceptions {
        if evaluation.exception_holds(exception)? {
            let spec = &exception.spec;
            if spec.images.is_empty() && spec.allowed_values.is_empty() {
                return Ok(false);
            }
            allowed_images.extend(spec.images.iter().cloned());
            allowed_values.extend(spec.allowed_values.iter().cloned());
        }
    }
    if policy.kind.is_kyverno() {
        evaluation.exceptions = Some(json!({
            "allowedImages": allowed_images, "allowedValues": allowed_values,
        }));
    }
    Ok(true)
}

/// Whether a condition holds; `Err` for an error or a value that is not a
/// bool (named as the crate types it).
pub(super) fn condition_holds<'a>(
    evaluation: &mut Evaluation<'a>,
    source: &'a str,
    at: impl Fn() -> String + Copy,
) -> Result<bool, String> {
    let value = match evaluation.evaluate(source, at)? {
        Evaluated::Json(Value::Bool(b)) => CelValue::Bool(b),
        Evaluated::Json(_) => evaluation.evaluate_with_crate(source, at)?,
        Evaluated::Cel(value) => value,
    };
    match value {
        CelValue::Bool(b) => Ok(b),
        other => Err(format!("gives {}, not a bool", other.type_of())),
    }
}

/// Runs the policy's mutations in order over the evaluation's object, each
/// over the object as the one before left it; gives the object at the end,
/// and the mutations a MutatingAdmissionPolicy with failurePolicy Ignore
/// went on without.
///
/// `schema` is the object's type, for apply configurations: the Pod's for a
/// Pod template seen through autogen.
pub(super) fn mutate<'a>(
    policy: &'a CelPolicy,
    evaluation: &mut Evaluation<'a>,
    schema: Option<apply::SchemaType>,
) -> Result<(Value, Vec<String>), String> {
    let patching = Patching {
        schema,
        // Kubernetes decodes a JSON-patched object into its Go type, strictly;
        // Kyverno keeps objects unstructured, so its patches go unchecked.
        typed: schema.filter(|_| !policy.kind.is_kyverno()),
        atomics: policy
            .spec
            .evaluation
            .as_ref()
            .and_then(|e| e.use_server_side_apply)
            .unwrap_or(false),
    };
    // Kubernetes' dispatcher records a failed mutation and runs the next
    // on the object as it was; with failurePolicy Ignore what the others
    // did is kept. Kyverno's engine fails the policy as a whole.
    let keep_going = !policy.kind.is_kyverno()
        && policy.failure_policy == FailurePolicy::Ignore
        && policy.patchers.len() > 1;
    let mut skipped = Vec::new();
    for (n, patcher) in policy.patchers.iter().enumerate() {
        let i = patcher.index;
        let before = keep_going.then(|| evaluation.object().clone());
        let more = n + 1 < policy.patchers.len();
        match mutate_once(policy, evaluation, patcher, patching) {
            Ok(current) => evaluation.set_object(current, more)?,
            Err(why) => match before {
                Some(before) => {
                    skipped.push(format!(
                        "{} {:?} mutations[{i}] not applied: {why}",
                        policy.kind.name(),
                        policy.name
                    ));
                    evaluation.set_object(before, more)?;
                }
                None => return Err(why),
            },
        }
    }
    Ok((evaluation.take_object(), skipped))
}

/// One mutation over the evaluation's object: the object it leaves.
fn mutate_once<'a>(
    policy: &'a CelPolicy,
    evaluation: &mut Evaluation<'a>,
    patcher: &'a Patcher,
    patching: Patching,
) -> Result<Value, String> {
    let i = patcher.index;
    let at = || policy.path(patcher.place());
    // Kyverno's rewrite can leave a nested construction's type name off
    // its new path; Kyverno's type check then fails the mutation.
    if policy.rewritten_for_template
        && let Some(Ok(compiled)) = policy.program(patcher.program)
        && let Some(why) = result_types::misnamed(patcher.place(), &compiled.expression)
    {
        return Err(format!("mutations[{i}]: {why}"));
    }
    evaluation.in_mutation = true;
    let result = evaluation.evaluate_program(patcher.program, at);
    evaluation.in_mutation = false;
    let result = match result? {
        Evaluated::Json(result) => result,
        Evaluated::Cel(result) => {
            to_json(&result).map_err(|why| format!("mutations[{i}]: {why}"))?
        }
    };
    let mut current = evaluation.take_object();
    patcher.apply(&mut current, result, patching)?;
    Ok(current)
}
