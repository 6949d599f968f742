//! Running one CEL policy over a request: match (resource rules, selectors,
//! `matchConditions`), then each mutation in order over the object as the
//! mutations before it left it.
//!
//! Policy-server starts every evaluation afresh, so nothing here outlives
//! one request: expressions are parsed when first needed, and only those
//! the request reaches (a request the rules do not match parses none).

use std::cell::OnceCell;

use ::cel::Value as CelValue;
use serde_json::{Value, json};

use super::autogen::{template_pointer, template_view, write_back};
use super::evaluation::Evaluation;
use super::matching::{self, RequestInfo};
use super::values::{from_json, to_json};
use super::{CelPolicy, apply, bound_pod};
use crate::admission::AdmissionRequest;
use crate::cluster::CachedCluster;
use crate::settings::FailurePolicy;
use crate::shared::resources::ResourceKind;

/// What one evaluation of CEL policies shares.
pub struct CelRequest<'a> {
    pub info: &'a RequestInfo,
    pub admission: &'a AdmissionRequest<'a>,
    /// The admission request without `object` and `oldObject`, made the
    /// first time an expression reads `request`.
    pub request: &'a OnceCell<CelValue>,
    pub old_object: &'a OnceCell<CelValue>,
    pub kinds: &'a [ResourceKind],
    pub cluster: &'a CachedCluster<'a>,
}

impl CelRequest<'_> {
    /// Kubernetes leaves `object` and `oldObject` out of `request` (they
    /// are variables of their own); Kyverno's CEL policies see them in it.
    pub(super) fn request(&self, with_objects: bool) -> CelValue {
        let build = || {
            let mut fields = serde_json::Map::new();
            for (name, value) in &self.admission.fields {
                let name: &str = name;
                if !with_objects && (name == "object" || name == "oldObject") {
                    continue;
                }
                if let Ok(value) = serde_json::from_str::<Value>(value.get()) {
                    fields.insert(name.to_string(), value);
                }
            }
            from_json(&Value::Object(fields))
        };
        if with_objects {
            build()
        } else {
            self.request.get_or_init(build).clone()
        }
    }

    pub(super) fn old_object(&self) -> CelValue {
        self.old_object
            .get_or_init(|| {
                self.admission
                    .raw("oldObject")
                    .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
                    .map(|old| from_json(&old))
                    .unwrap_or(CelValue::Null)
            })
            .clone()
    }
}

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
    // Kyverno's webhook runs no policy with admission off, nor one whose
    // targetMatchConstraints name targets (its background controller's).
    if !policy.runs_on_admission() {
        return Ok(CelResult::Skipped);
    }
    if let Some(namespace) = &policy.namespace
        && *namespace != request.info.namespace
    {
        return Ok(CelResult::Skipped);
    }
    let Some(constraints) = &policy.spec.match_constraints else {
        return Ok(CelResult::Skipped);
    };
    // Autogen: a Pod policy over a controller runs on its Pod template.
    let template = template_pointer(policy, request.info, constraints);
    let pod_info;
    let info = match template {
        Some(_) => {
            pod_info = RequestInfo {
                group: String::new(),
                version: "v1".to_string(),
                resource: "pods".to_string(),
                ..request.info.clone()
            };
            &pod_info
        }
        None => request.info,
    };
    if !matching::rules_match(constraints, info) {
        return Ok(CelResult::Skipped);
    }
    let subject = match template {
        Some(pointer) => template_view(object, pointer),
        None => object.clone(),
    };
    if !matching::object_selected(constraints, Some(&subject)) {
        return Ok(CelResult::Skipped);
    }
    let mut evaluation = Evaluation::new(policy, request, subject);
    if constraints.namespace_selector.is_some() && !request.info.namespace.is_empty() {
        let namespace = evaluation.namespace()?;
        if !matching::namespace_selected(constraints, Some(&namespace)) {
            return Ok(CelResult::Skipped);
        }
    }
    // Kyverno checks a target's exceptions over the target (`bound_pod`).
    if !policy.bound_pod && !check_exceptions(policy, &mut evaluation)? {
        return Ok(CelResult::Skipped);
    }
    // Paths in the settings are for messages: made only when one is needed.
    for (i, condition) in policy.spec.match_conditions.iter().enumerate() {
        let at = || format!("{}.spec.matchConditions[{i}]", policy.at);
        if !condition_holds(&mut evaluation, &condition.expression, at)
            .map_err(|why| format!("matchConditions[{i}] ({:?}): {why}", condition.name))?
        {
            return Ok(CelResult::Skipped);
        }
    }
    #[cfg(test)]
    if let Some(value) = super::differential::probe(&mut evaluation) {
        return value;
    }
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
    let schema = match template {
        Some(_) => apply::schema_of("v1", "Pod"),
        None => {
            let field = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or_default();
            apply::schema_of(field("apiVersion"), field("kind"))
        }
    };
    let (current, skipped) = mutate(policy, &mut evaluation, schema)?;
    let mutated = match template {
        Some(pointer) => {
            let mut whole = object.clone();
            write_back(&mut whole, pointer, current);
            whole
        }
        None => current,
    };
    Ok(CelResult::Mutated {
        object: mutated,
        audit,
        warnings: skipped,
    })
}

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
        && policy.spec.mutations.len() > 1;
    let mut skipped = Vec::new();
    for (i, mutation) in policy.spec.mutations.iter().enumerate() {
        let patch = match (&mutation.apply_configuration, &mutation.json_patch) {
            (Some(e), _) => Patch::ApplyConfiguration(&e.expression),
            (None, Some(e)) => Patch::JsonPatch(&e.expression),
            (None, None) => continue,
        };
        let before = keep_going.then(|| evaluation.object().clone());
        let more = i + 1 < policy.spec.mutations.len();
        match mutate_once(policy, evaluation, i, patch, patching) {
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

/// A mutation's patch: its kind and expression.
#[derive(Clone, Copy)]
enum Patch<'a> {
    ApplyConfiguration(&'a str),
    JsonPatch(&'a str),
}

/// What every mutation of a policy is applied with: the object's type (for
/// apply configurations), the type JSON patches are checked against, and
/// whether atomic lists and maps are set whole (server-side apply).
#[derive(Clone, Copy)]
struct Patching {
    schema: Option<apply::SchemaType>,
    typed: Option<apply::SchemaType>,
    atomics: bool,
}

/// One mutation over the evaluation's object: the object it leaves.
fn mutate_once<'a>(
    policy: &'a CelPolicy,
    evaluation: &mut Evaluation<'a>,
    i: usize,
    patch: Patch<'a>,
    patching: Patching,
) -> Result<Value, String> {
    let (field, expression) = match patch {
        Patch::ApplyConfiguration(e) => ("applyConfiguration", e),
        Patch::JsonPatch(e) => ("jsonPatch", e),
    };
    let at = || format!("{}.spec.mutations[{i}].{field}.expression", policy.at);
    evaluation.in_mutation = true;
    let result = evaluation.evaluate(expression, at);
    evaluation.in_mutation = false;
    let result = match result? {
        Evaluated::Json(result) => result,
        Evaluated::Cel(result) => {
            to_json(&result).map_err(|why| format!("mutations[{i}]: {why}"))?
        }
    };
    let mut current = evaluation.take_object();
    // What the object's labels and annotations were, to check what this
    // mutation writes there as the short form's keys are checked.
    let before = crate::mutation::metadata_maps(&current).map(Option::<&Value>::cloned);
    match patch {
        Patch::ApplyConfiguration(_) => {
            if !result.is_object() {
                return Err(format!(
                    "mutations[{i}]: an apply configuration must be an object (Object{{...}}), not {result}"
                ));
            }
            apply::merge(&mut current, &result, patching.schema, patching.atomics)
                .map_err(|why| format!("mutations[{i}]: error applying patch: {why}"))?;
        }
        Patch::JsonPatch(_) => {
            let patch: json_patch::Patch = serde_json::from_value(result).map_err(|why| {
                format!("mutations[{i}]: not a list of JSONPatch operations: {why}")
            })?;
            super::json_patch_mutation::apply(&mut current, patch.0, patching.typed)
                .map_err(|why| format!("mutations[{i}]: {why}"))?;
        }
    }
    // A key or label value the API server would refuse is an error, which
    // failurePolicy judges, as Kubernetes would refuse the object.
    if let Some(problem) =
        crate::mutation::first_metadata_problem(before.each_ref().map(Option::as_ref), &current)
    {
        return Err(format!("mutations[{i}]: {problem}"));
    }
    Ok(current)
}

/// An evaluation error in words: a library function's own message, after
/// the function's name.
pub(super) fn describe(error: &::cel::ExecutionError) -> String {
    match error {
        ::cel::ExecutionError::FunctionError { function, message } => {
            format!("{function}: {message}")
        }
        other => other.to_string(),
    }
}

/// What an expression gave: JSON from the direct evaluator, or a value of
/// the `cel` crate.
pub(super) enum Evaluated {
    Json(Value),
    Cel(CelValue),
}
