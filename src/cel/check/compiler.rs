//! The load-time compiler of CEL policy documents: every field checked, every
//! expression parsed and typed, unsupported features named with the field's
//! path, and the document turned into a [`CelPolicy`].

use std::cell::OnceCell;
use std::collections::BTreeMap;

use serde_json::Value;

use crate::cel::patch::patchers::{PatchKind, Patcher};
use ::cel::IdedExpr;
use ::cel::common::ast::{CallExpr, Expr};

use crate::cel::check::{
    constants, declarations, metadata_literals, result_types, type_check, typed_calls, types,
};
use crate::cel::libraries;
use crate::cel::policy::CelPolicy;
use crate::cel::policy::autogen;
use crate::cel::policy::targets;
use crate::cel::program::{self, Evaluators};
use crate::cel::spec::{self, CelKind, CelSpec, Place};
use crate::cel::syntax::ast::first_call;
use crate::shared::autogen::AUTOGEN_DEFAULT;
use crate::shared::policy_options::{Checks, FailurePolicy};

/// Libraries a Kubewarden policy cannot offer, or this version does not,
/// with why: found where an expression calls into them (`http.Get(...)`,
/// `hash.sha256(...)`).
const UNAVAILABLE: &[(&str, &str)] = &[
    (
        "x509",
        "Kyverno's x509 library is not supported by this version",
    ),
    (
        "http",
        "Kyverno's http library calls endpoints from the policy; a Kubewarden policy has no host capability for arbitrary HTTP",
    ),
    (
        "globalContext",
        "Kyverno's global context is a cache Kyverno keeps; Kubewarden has no counterpart",
    ),
];

/// The controllers Kyverno's CEL policies generate for by default (its
/// ClusterPolicy default adds ReplicationController).
const CEL_AUTOGEN_DEFAULT: [&str; 6] = [
    "DaemonSet",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "Job",
    "CronJob",
];

/// Kyverno's condition for generating a CEL policy's controller rules: one
/// resource rule, on core `v1` `pods` alone, without resource names,
/// exclusions or an object selector with terms.
fn can_autogen(constraints: Option<&spec::MatchResources>) -> bool {
    let Some(constraints) = constraints else {
        return false;
    };
    let selects_objects = constraints
        .object_selector
        .as_ref()
        .is_some_and(|s| !s.match_labels.is_empty() || !s.match_expressions.is_empty());
    let [rule] = constraints.resource_rules.as_slice() else {
        return false;
    };
    !selects_objects
        && constraints.exclude_resource_rules.is_empty()
        && rule.resource_names.is_empty()
        && rule.api_groups == [""]
        && rule.api_versions == ["v1"]
        && rule.resources == ["pods"]
}

/// `{document}.spec`, for messages.
struct SpecPath<'a>(&'a str);

impl std::fmt::Display for SpecPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.spec", self.0)
    }
}

/// Whether `api_version` is one the kind is published under.
pub fn check_api_version(kind: CelKind, api_version: &str, at: &str) -> Result<(), String> {
    let group_ok = match kind {
        CelKind::MutatingAdmissionPolicy => matches!(
            api_version,
            "admissionregistration.k8s.io/v1"
                | "admissionregistration.k8s.io/v1beta1"
                | "admissionregistration.k8s.io/v1alpha1"
        ),
        _ => matches!(
            api_version,
            "policies.kyverno.io/v1"
                | "policies.kyverno.io/v1beta1"
                | "policies.kyverno.io/v1alpha1"
        ),
    };
    if !group_ok {
        let expected = if kind.is_kyverno() {
            "policies.kyverno.io/v1 (or v1beta1, v1alpha1)"
        } else {
            "admissionregistration.k8s.io/v1 (or v1beta1, v1alpha1)"
        };
        return Err(format!(
            "{at}.apiVersion: {api_version:?}: a {} is {expected}",
            kind.name()
        ));
    }
    Ok(())
}

/// Checks the document at `at` (`settings` or `settings.policies[i]`).
#[allow(clippy::too_many_arguments)]
pub fn compile(
    kind: CelKind,
    api_version: &str,
    name: Option<String>,
    namespace: Option<String>,
    mut spec: CelSpec,
    params: Option<Value>,
    at: &str,
    checks: Checks,
) -> Result<CelPolicy, String> {
    check_api_version(kind, api_version, at)?;
    // Written into a message only when there is one.
    let spec_at = SpecPath(at);
    if kind.is_kyverno() && spec.param_kind.is_some() {
        return Err(format!(
            "{spec_at}.paramKind: a Kyverno {} has no parameters (that is a MutatingAdmissionPolicy field)",
            kind.name()
        ));
    }
    if !kind.is_kyverno() {
        for (present, field) in [
            (spec.autogen.is_some(), "autogen"),
            (spec.evaluation.is_some(), "evaluation"),
            (
                spec.target_match_constraints.is_some(),
                "targetMatchConstraints",
            ),
            (
                !spec.target_match_conditions.is_empty(),
                "targetMatchConditions",
            ),
            (spec.webhook_configuration.is_some(), "webhookConfiguration"),
            (!spec.audit_annotations.is_empty(), "auditAnnotations"),
        ] {
            if present {
                return Err(format!(
                    "{spec_at}.{field}: a Kyverno MutatingPolicy field; a MutatingAdmissionPolicy has none"
                ));
            }
        }
    }
    for (i, annotation) in spec.audit_annotations.iter().enumerate() {
        // Kubernetes' rule for audit annotation keys: a qualified name
        // part, at most 63 bytes, unique in the policy.
        let key = annotation.key.as_str();
        let qualified = key.len() <= 63
            && key.starts_with(|c: char| c.is_ascii_alphanumeric())
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !qualified {
            return Err(format!(
                "{spec_at}.auditAnnotations[{i}].key: {key:?}: a key is letters, digits, '-', '_' and '.', starting with a letter or digit, at most 63 bytes"
            ));
        }
        if spec.audit_annotations.iter().take(i).any(|a| a.key == key) {
            return Err(format!(
                "{spec_at}.auditAnnotations[{i}].key: {key:?} is given twice"
            ));
        }
    }
    if params.is_some() && spec.param_kind.is_none() {
        return Err(format!(
            "{at}.params: the policy has no spec.paramKind, so nothing reads parameters"
        ));
    }
    let Some(constraints) = &spec.match_constraints else {
        return Err(format!(
            "{spec_at}.matchConstraints: required: it says which requests the policy mutates"
        ));
    };
    if constraints.expression.is_some() {
        return Err(format!(
            "{spec_at}.matchConstraints.expression: unknown field (an expression names targets in targetMatchConstraints)"
        ));
    }
    if constraints.resource_rules.is_empty() {
        return Err(format!(
            "{spec_at}.matchConstraints.resourceRules: required: with none, the policy matches nothing"
        ));
    }
    for (list, field) in [
        (&constraints.resource_rules, "resourceRules"),
        (&constraints.exclude_resource_rules, "excludeResourceRules"),
    ] {
        for (i, rule) in list.iter().enumerate() {
            for operation in &rule.operations {
                if !matches!(
                    operation.as_str(),
                    "CREATE" | "UPDATE" | "DELETE" | "CONNECT" | "*"
                ) {
                    return Err(format!(
                        "{spec_at}.matchConstraints.{field}[{i}].operations: {operation:?} is not an operation (CREATE, UPDATE, DELETE, CONNECT or *)"
                    ));
                }
                // Kubernetes' API refuses to store such a document
                // (`validateMutatingAdmissionPolicySpec`): refused here
                // too, so that what loads here also installs in a cluster.
                if kind == CelKind::MutatingAdmissionPolicy
                    && field == "resourceRules"
                    && operation == "DELETE"
                {
                    return Err(format!(
                        "{spec_at}.matchConstraints.{field}[{i}].operations: \"DELETE\": a MutatingAdmissionPolicy mutates CREATE, UPDATE and CONNECT requests (or *), as Kubernetes requires"
                    ));
                }
            }
            if let Some(scope) = &rule.scope
                && !matches!(scope.as_str(), "Cluster" | "Namespaced" | "*")
            {
                return Err(format!(
                    "{spec_at}.matchConstraints.{field}[{i}].scope: {scope:?}: expected Cluster, Namespaced or *"
                ));
            }
        }
    }
    if let Some(policy) = &constraints.match_policy
        && !matches!(policy.as_str(), "Exact" | "Equivalent")
    {
        return Err(format!(
            "{spec_at}.matchConstraints.matchPolicy: {policy:?}: expected Exact or Equivalent"
        ));
    }
    match &spec.reinvocation_policy {
        Some(policy) if !matches!(policy.as_str(), "Never" | "IfNeeded") => {
            return Err(format!(
                "{spec_at}.reinvocationPolicy: {policy:?}: expected Never or IfNeeded"
            ));
        }
        // Required by Kubernetes' API, as the DELETE operation above.
        None if kind == CelKind::MutatingAdmissionPolicy => {
            return Err(format!(
                "{spec_at}.reinvocationPolicy: required in a MutatingAdmissionPolicy (Never or IfNeeded), as Kubernetes requires it"
            ));
        }
        _ => {}
    }
    if kind == CelKind::MutatingAdmissionPolicy && spec.mutations.is_empty() {
        return Err(format!(
            "{spec_at}.mutations: required: a MutatingAdmissionPolicy has at least one mutation, as Kubernetes requires"
        ));
    }
    let bound_pod = targets::check(&spec);
    let has_targets = targets::names_targets(&spec);
    let mut autogen = Vec::new();
    let named = spec
        .autogen
        .as_ref()
        .and_then(|a| a.pod_controllers.as_ref())
        .and_then(|p| p.controllers.as_ref());
    // Kyverno generates for every controller unless the policy names
    // them (`[]`: none), and only for a policy on Pods alone.
    let default = || CEL_AUTOGEN_DEFAULT.iter().map(|k| k.to_string()).collect();
    let controllers: Vec<String> = named.cloned().unwrap_or_else(default);
    for (i, controller) in controllers.iter().enumerate() {
        // Kyverno's CEL policies name controllers by resource
        // (`deployments`); its ClusterPolicy annotation by kind.
        let singular = controller.strip_suffix('s').unwrap_or(controller);
        let name = AUTOGEN_DEFAULT
            .iter()
            .find(|kind| {
                controller.eq_ignore_ascii_case(kind) || singular.eq_ignore_ascii_case(kind)
            })
            .copied()
            .unwrap_or(controller.as_str());
        if !AUTOGEN_DEFAULT.contains(&name) {
            return Err(format!(
                "{spec_at}.autogen.podControllers.controllers[{i}]: {name:?} is not a Pod controller (one of {}, or their resources: deployments, cronjobs...)",
                AUTOGEN_DEFAULT.join(", ")
            ));
        }
        autogen.push(name.to_string());
    }
    if !kind.is_kyverno() || !can_autogen(spec.match_constraints.as_ref()) {
        autogen.clear();
    }
    let mut patchers = Vec::with_capacity(spec.mutations.len());
    // The mutations follow the conditions and variables in
    // `CelPolicy::sources`.
    let first_mutation = spec.match_conditions.len() + spec.variables.len();
    for (index, mutation) in std::mem::take(&mut spec.mutations).into_iter().enumerate() {
        let at = format_args!("{spec_at}.mutations[{index}]");
        let patcher = match (
            mutation.patch_type.as_str(),
            mutation.apply_configuration,
            mutation.json_patch,
        ) {
            ("ApplyConfiguration", Some(expression), None) => Patcher {
                index,
                kind: PatchKind::ApplyConfiguration,
                expression: expression.expression,
                program: first_mutation + index,
            },
            ("JSONPatch", None, Some(expression)) => Patcher {
                index,
                kind: PatchKind::JsonPatch,
                expression: expression.expression,
                program: first_mutation + index,
            },
            ("ApplyConfiguration", _, _) => {
                return Err(format!(
                    "{at}: patchType ApplyConfiguration needs applyConfiguration, and no jsonPatch"
                ));
            }
            ("JSONPatch", _, _) => {
                return Err(format!(
                    "{at}: patchType JSONPatch needs jsonPatch, and no applyConfiguration"
                ));
            }
            (other, _, _) => {
                return Err(format!(
                    "{at}.patchType: {other:?}: expected ApplyConfiguration or JSONPatch"
                ));
            }
        };
        patchers.push(patcher);
    }
    let policy = CelPolicy {
        kind,
        name: name.unwrap_or_default(),
        at: at.to_string(),
        failure_policy: spec.failure_policy.unwrap_or(FailurePolicy::Fail),
        failure_policy_given: spec.failure_policy.is_some(),
        spec,
        params,
        namespace,
        autogen,
        rewritten_for_template: false,
        patchers,
        exceptions: Vec::new(),
        bound_pod,
        evaluators: Evaluators::SHIPPED,
        has_targets,
        parsed: OnceCell::new(),
        retype: Some(typed_calls::retype),
    };
    if checks == Checks::Full {
        check_expressions(&policy)?;
    }
    Ok(policy)
}

/// What Kyverno's autogen rewrite of a Pod policy ([`autogen`]) does not
/// survive: Kyverno's webhook then fails those controllers' requests, and
/// so does this policy; said when the policy is loaded.
pub fn autogen_warning(policy: &CelPolicy) -> Option<String> {
    if !policy.runs_on_admission() {
        return None;
    }
    let mut failing = Vec::new();
    let mut first = None;
    for template in [autogen::Template::Spec, autogen::Template::JobTemplate] {
        let controllers: Vec<&str> = policy
            .autogen
            .iter()
            .map(String::as_str)
            .filter(|kind| autogen::Template::of(kind) == template)
            .collect();
        if controllers.is_empty() {
            continue;
        }
        if let Err(why) = check_expressions(&autogen::rewritten(policy, template)) {
            failing.extend(controllers);
            first.get_or_insert(why);
        }
    }
    let why = first?;
    Some(format!(
        "{}: Kyverno's autogen runs this Pod policy on {} with its expressions rewritten for the Pod template, and the rewrite does not hold: {why}; on them Kyverno fails the policy when that expression runs, and so does this policy (failurePolicy decides); name the controllers the policy suits in spec.autogen.podControllers.controllers ([] for none)",
        policy.at,
        failing.join(", ")
    ))
}

/// Parses every expression; refuses what cannot run here.
fn check_expressions(policy: &CelPolicy) -> Result<(), String> {
    let declared: Vec<&str> = policy
        .spec
        .variables
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    for (i, variable) in policy.spec.variables.iter().enumerate() {
        if declared.iter().take(i).any(|name| *name == variable.name) {
            return Err(format!(
                "{}.spec.variables[{i}].name: {:?} is declared twice",
                policy.at, variable.name
            ));
        }
    }
    // Built at the first expression: an environment with every library.
    let mut functions = None;
    let mut variable_types = BTreeMap::new();
    for (place, source) in policy.sources() {
        let at = policy.path(place);
        let compiled = program::compile(source, &at)?;
        if compiled
            .variables
            .iter()
            .any(|name| !declared.contains(&name.as_str()))
            && let Some(why) =
                declarations::undeclared_variable(source, &compiled.expression, &declared)
        {
            return Err(format!("{at}: {why}"));
        }
        for (library, why) in UNAVAILABLE {
            // `http.Get(...)`, or a global `http(...)`.
            let calls = first_call(&compiled.expression, &|call| {
                calls_on(call, library) || (call.target.is_none() && call.func_name == *library)
            });
            if calls.is_some() {
                return Err(format!("{at}: uses `{library}`: {why}"));
            }
        }
        if let Some(why) = libraries::authorizer::unsupported(&compiled.expression) {
            return Err(format!("{at}: {why}; this is not supported"));
        }
        // `image.GetMetadata(...)` is Kyverno's imagedata library, its one
        // function; the image library's functions are `image(...)` and members.
        if let Some(call) = call_on_other_than(
            &compiled.expression,
            "image",
            &["GetMetadata", "getMetadata"],
        ) {
            return Err(format!(
                "{at}: uses `image.{call}`: Kyverno's imagedata library has `image.GetMetadata` only"
            ));
        }
        // Of Kyverno's resource library, reads only.
        if let Some(call) = call_on_other_than(
            &compiled.expression,
            "resource",
            &["Get", "get", "List", "list"],
        ) {
            return Err(format!(
                "{at}: uses `resource.{call}`: of Kyverno's resource library, this version runs Get and List (reads through Kubewarden's host capabilities)"
            ));
        }
        if compiled.identifiers.contains("params") && policy.spec.param_kind.is_none() {
            return Err(format!(
                "{at}: reads `params`, but the policy has no spec.paramKind"
            ));
        }
        if let Some(why) =
            declarations::undeclared(source, &compiled.expression, policy.kind.is_kyverno())
        {
            return Err(format!("{at}: {why}"));
        }
        if !policy.kind.is_kyverno()
            && let Some(why) =
                declarations::undeclared_macro_namespace(source, &compiled.names.macro_namespaces)
        {
            return Err(format!("{at}: {why}"));
        }
        if !policy.kind.is_kyverno()
            && !matches!(place, Place::Mutation(..))
            && let Some(why) =
                declarations::patch_name_outside_mutations(source, &compiled.expression)
        {
            return Err(format!("{at}: {why}"));
        }
        let functions = functions.get_or_insert_with(type_check::FunctionNames::new);
        let ty = type_check::check(
            source,
            &compiled.expression,
            &variable_types,
            functions,
            policy.kind.is_kyverno(),
        )
        .map_err(|why| format!("{at}: {why}"))?;
        if let Some(why) = result_types::mismatch(place, &ty)
            .or_else(|| result_types::misnamed(place, &compiled.expression))
        {
            return Err(format!("{at}: {why}"));
        }
        if let Some(why) =
            constants::refused(source, &compiled.expression, compiled.names.libraries)
        {
            return Err(format!("{at}: {why}"));
        }
        if let Place::Mutation(..) = place
            && let Some(why) = metadata_literals::refused(source, &compiled.expression)
        {
            return Err(format!("{at}: {why}"));
        }
        if let Place::Variable(i) = place
            && let Some(variable) = policy.spec.variables.get(i)
        {
            // The `cel` crate's values have no type values: one kept in the
            // variables reads back as its name (`variables.t == int` would
            // be false), so it is refused rather than answered otherwise.
            if ty.holds_type_value() {
                return Err(format!(
                    "{at}: gives {ty}, which holds a type value; a variable cannot keep one in this policy's evaluator (compare types in the expression that computes them)"
                ));
            }
            variable_types.insert(
                variable.name.clone(),
                types::declared_variable(ty, policy.kind.is_kyverno()),
            );
        }
    }
    Ok(())
}

/// Whether `call` is made on the identifier `library` (`image.f(...)`): a
/// field named like the library (`c.image`) or a name in a string is no call.
fn calls_on(call: &CallExpr, library: &str) -> bool {
    call.target
        .as_deref()
        .is_some_and(|target| matches!(&target.expr, Expr::Ident(name) if name == library))
}

/// The first function called on the identifier `library` that is not one
/// of `allowed`.
fn call_on_other_than(expr: &IdedExpr, library: &str, allowed: &[&str]) -> Option<String> {
    first_call(expr, &|call| {
        calls_on(call, library) && !allowed.contains(&call.func_name.as_str())
    })
    .map(|call| call.func_name.clone())
}
