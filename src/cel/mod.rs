//! The CEL policy language: Kyverno's `MutatingPolicy` and
//! `NamespacedMutatingPolicy`, and Kubernetes' `MutatingAdmissionPolicy`.
//! [`CelPolicy::read`] checks a document at load (every expression parsed,
//! every unsupported feature named); [`engine`] runs it over a request as one
//! step of the pipeline.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::settings::{AUTOGEN_DEFAULT, Checks, FailurePolicy};

pub mod apply;
mod apply_schema;
mod autogen;
mod bound_pod;
mod comprehensions;
#[cfg(test)]
mod conformance;
#[cfg(test)]
mod conformance_authorizer;
mod declarations;
#[cfg(test)]
mod differential;
mod direct;
pub mod engine;
pub mod environment;
pub(crate) mod evaluation;
pub mod exception;
mod extension_macros;
mod json_patch_mutation;
pub mod libraries;
pub mod matching;
mod metadata_literals;
#[cfg(test)]
mod patch_conformance;
pub mod program;
mod request_types;
mod result_types;
pub mod spec;
#[cfg(test)]
mod spec_conformance;
mod subset_parser;
mod tables;
pub(crate) mod type_check;
pub mod values;

use spec::CelSpec;

/// The CEL document kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CelKind {
    MutatingPolicy,
    NamespacedMutatingPolicy,
    MutatingAdmissionPolicy,
}

impl CelKind {
    pub fn name(self) -> &'static str {
        match self {
            CelKind::MutatingPolicy => "MutatingPolicy",
            CelKind::NamespacedMutatingPolicy => "NamespacedMutatingPolicy",
            CelKind::MutatingAdmissionPolicy => "MutatingAdmissionPolicy",
        }
    }

    pub fn is_kyverno(self) -> bool {
        self != CelKind::MutatingAdmissionPolicy
    }
}

/// Where an expression sits in a policy's spec; written as its path there
/// (`mutations[0].applyConfiguration.expression`).
#[derive(Debug, Clone, Copy)]
pub enum Place {
    MatchCondition(usize),
    Variable(usize),
    /// The mutation's index and its field (`applyConfiguration`, `jsonPatch`).
    Mutation(usize, &'static str),
    AuditAnnotation(usize),
    TargetExpression,
    TargetCondition(usize),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::MatchCondition(i) => write!(f, "matchConditions[{i}].expression"),
            Place::Variable(i) => write!(f, "variables[{i}].expression"),
            Place::Mutation(i, field) => write!(f, "mutations[{i}].{field}.expression"),
            Place::AuditAnnotation(i) => write!(f, "auditAnnotations[{i}].valueExpression"),
            Place::TargetExpression => f.write_str("targetMatchConstraints.expression"),
            Place::TargetCondition(i) => write!(f, "targetMatchConditions[{i}].expression"),
        }
    }
}

/// A checked CEL policy document.
#[derive(Debug, Clone)]
pub struct CelPolicy {
    pub kind: CelKind,
    /// `metadata.name`, for messages.
    pub name: String,
    /// The document's path in the settings, for messages.
    pub at: String,
    pub spec: CelSpec,
    pub failure_policy: FailurePolicy,
    /// Whether the document or the settings gave `failurePolicy` (else
    /// `failure_policy` is the kinds' default, `Fail`).
    pub failure_policy_given: bool,
    /// A MutatingAdmissionPolicy's parameters, given inline.
    pub params: Option<Value>,
    /// A NamespacedMutatingPolicy applies only in its namespace.
    pub namespace: Option<String>,
    /// Pod mutations also run over these controllers' Pod templates.
    pub autogen: Vec<String>,
    /// The `PolicyException`s beside it in the settings that name it.
    pub exceptions: Vec<exception::CelException>,
    /// `evaluation.mutateExisting` on the Pod being bound (`bound_pod`).
    pub bound_pod: bool,
    /// What the `cel` crate's environment needs, read from the expressions'
    /// text the first time it is built: policies the direct evaluator runs
    /// whole never need it (see `direct`).
    derived: OnceCell<Derived>,
    /// Whether an expression names the time library: all that parsing an
    /// expression per request needs of [`Derived`] (reading the text for
    /// every library costs more than parsing the row's two expressions).
    uses_time: OnceCell<bool>,
}

#[derive(Debug, Clone)]
struct Derived {
    /// Struct types the mutations construct.
    struct_names: BTreeSet<String>,
    /// The libraries the expressions may call.
    libraries: environment::Libraries,
    /// The context identifiers named in the expressions' text.
    words: BTreeSet<String>,
}

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

impl CelPolicy {
    /// Checks the document at `at` (`settings` or `settings.policies[i]`).
    #[allow(clippy::too_many_arguments)]
    pub fn read(
        kind: CelKind,
        api_version: &str,
        name: Option<String>,
        namespace: Option<String>,
        spec: CelSpec,
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
        let bound_pod = bound_pod::check(&spec);
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
        for (i, mutation) in spec.mutations.iter().enumerate() {
            let at = format_args!("{spec_at}.mutations[{i}]");
            match (
                mutation.patch_type.as_str(),
                &mutation.apply_configuration,
                &mutation.json_patch,
            ) {
                ("ApplyConfiguration", Some(_), None) | ("JSONPatch", None, Some(_)) => {}
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
            exceptions: Vec::new(),
            bound_pod,
            derived: OnceCell::new(),
            uses_time: OnceCell::new(),
        };
        if checks == Checks::Full {
            policy.check_expressions()?;
        }
        Ok(policy)
    }

    fn derived(&self) -> &Derived {
        self.derived.get_or_init(|| {
            let sources: Vec<&str> = self.sources().map(|(_, s)| s).collect();
            let mut struct_names = BTreeSet::new();
            for mutation in &self.spec.mutations {
                for expression in [&mutation.apply_configuration, &mutation.json_patch]
                    .into_iter()
                    .flatten()
                {
                    program::struct_names(&expression.expression, &mut struct_names);
                }
            }
            let words = sources
                .iter()
                .flat_map(|source| environment::identifiers(source))
                .filter(|word| {
                    matches!(
                        *word,
                        "request" | "oldObject" | "params" | "namespaceObject" | "exceptions"
                    )
                })
                .map(str::to_string)
                .collect();
            Derived {
                struct_names,
                libraries: environment::Libraries::for_sources(sources.iter().copied()),
                words,
            }
        })
    }

    /// Readies a parsed expression as [`environment::Libraries::prepare`]
    /// would with [`CelPolicy::libraries`], reading the expressions' text
    /// only for the time library.
    pub fn prepare(&self, expression: &mut ::cel::common::ast::IdedExpr) {
        let uses_time = *self.uses_time.get_or_init(|| {
            self.sources()
                .any(|(_, source)| environment::identifiers(source).any(environment::names_time))
        });
        environment::prepare(expression, uses_time);
    }

    /// Struct types the mutations construct (the crate knows only these).
    pub fn struct_names(&self) -> &BTreeSet<String> {
        &self.derived().struct_names
    }

    /// The libraries the expressions may call.
    pub fn libraries(&self) -> environment::Libraries {
        self.derived().libraries
    }

    /// Whether an expression's text names this context identifier
    /// (`request`, `oldObject`, `params`, `namespaceObject`).
    pub fn mentions(&self, identifier: &str) -> bool {
        self.derived().words.contains(identifier)
    }

    /// Every expression with its path in the settings, in evaluation order.
    pub fn expressions(&self) -> Vec<(String, &str)> {
        self.sources()
            .map(|(place, source)| (self.path(place), source))
            .collect()
    }

    /// The settings path of the expression at `place`.
    pub fn path(&self, place: Place) -> String {
        format!("{}.spec.{place}", self.at)
    }

    /// Every expression in evaluation order, with where it sits: at request
    /// time its path is made ([`CelPolicy::path`]) only for a message.
    pub fn sources(&self) -> impl Iterator<Item = (Place, &str)> {
        let spec = &self.spec;
        let conditions = spec.match_conditions.iter().enumerate();
        let variables = spec.variables.iter().enumerate();
        let mutations = spec.mutations.iter().enumerate().filter_map(|(i, m)| {
            match (&m.apply_configuration, &m.json_patch) {
                (Some(e), _) => Some((Place::Mutation(i, "applyConfiguration"), e)),
                (None, Some(e)) => Some((Place::Mutation(i, "jsonPatch"), e)),
                (None, None) => None,
            }
        });
        let audit = spec.audit_annotations.iter().enumerate();
        let target_conditions = spec.target_match_conditions.iter().enumerate();
        conditions
            .map(|(i, c)| (Place::MatchCondition(i), c.expression.as_str()))
            .chain(variables.map(|(i, v)| (Place::Variable(i), v.expression.as_str())))
            .chain(mutations.map(|(place, e)| (place, e.expression.as_str())))
            .chain(audit.map(|(i, a)| (Place::AuditAnnotation(i), a.value_expression.as_str())))
            .chain(
                self.target_expression()
                    .map(|source| (Place::TargetExpression, source)),
            )
            .chain(
                target_conditions.map(|(i, c)| (Place::TargetCondition(i), c.expression.as_str())),
            )
    }

    /// Whether `matchConstraints` select the scheduler's `CREATE
    /// pods/binding` (resource names aside: a policy for some Pods stalls
    /// their scheduling as well).
    pub fn matches_bindings(&self) -> bool {
        let Some(constraints) = &self.spec.match_constraints else {
            return false;
        };
        let binding = |name: &str| matching::RequestInfo {
            operation: "CREATE".to_string(),
            group: String::new(),
            version: "v1".to_string(),
            resource: "pods".to_string(),
            sub_resource: "binding".to_string(),
            name: name.to_string(),
            namespace: self
                .namespace
                .clone()
                .unwrap_or_else(|| "default".to_string()),
        };
        constraints.resource_rules.iter().any(|rule| {
            let names = rule.resource_names.first().map_or("", String::as_str);
            matching::rules_match(constraints, &binding(names))
        })
    }

    /// `evaluation.admission.enabled`, true unless false, as Kyverno reads it.
    pub fn admission_enabled(&self) -> bool {
        self.spec
            .evaluation
            .as_ref()
            .and_then(|e| e.admission.as_ref())
            .and_then(|a| a.enabled)
            != Some(false)
    }

    /// Whether the policy runs over the object being admitted, as Kyverno's
    /// webhook runs it: admission on, and no targets (but the bound Pod's).
    pub fn runs_on_admission(&self) -> bool {
        self.admission_enabled() && (self.bound_pod || !bound_pod::names_targets(&self.spec))
    }

    /// What of `evaluation.mutateExisting` does not run here, for
    /// policy-server's log at load (`bound_pod`).
    pub fn mutate_existing_warning(&self) -> Option<String> {
        bound_pod::warning(self)
    }

    /// `targetMatchConstraints.expression`, where given.
    pub fn target_expression(&self) -> Option<&str> {
        self.spec
            .target_match_constraints
            .as_ref()
            .and_then(|t| t.expression.as_deref())
    }

    /// Parses every expression; refuses what cannot run here.
    fn check_expressions(&self) -> Result<(), String> {
        let declared: Vec<&str> = self
            .spec
            .variables
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        for (i, variable) in self.spec.variables.iter().enumerate() {
            if declared.iter().take(i).any(|name| *name == variable.name) {
                return Err(format!(
                    "{}.spec.variables[{i}].name: {:?} is declared twice",
                    self.at, variable.name
                ));
            }
        }
        // Built at the first expression: an environment with every library.
        let mut functions = None;
        let mut variable_types = BTreeMap::new();
        for (place, source) in self.sources() {
            let at = self.path(place);
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
                if compiled.libraries.contains(*library) {
                    return Err(format!("{at}: uses `{library}`: {why}"));
                }
            }
            if let Some(why) = libraries::authorizer::unsupported(&compiled.expression) {
                return Err(format!("{at}: {why}; this is not supported"));
            }
            if compiled.libraries.contains("image")
                && let Some(call) = source.match_indices("image.").find_map(|(at, _)| {
                    // `image.f(...)`, not a field's `c.image.startsWith(...)`.
                    if !libraries::starts_name(source, at) {
                        return None;
                    }
                    let rest = source.get(at + "image.".len()..)?;
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric())
                        .collect();
                    let called = rest
                        .get(name.len()..)
                        .is_some_and(|after| after.trim_start().starts_with('('));
                    (called && name != "GetMetadata" && name != "getMetadata").then_some(name)
                })
            {
                // `image.GetMetadata(...)` is Kyverno's imagedata library,
                // its one function; the image library's functions are
                // `image(...)` and members.
                return Err(format!(
                    "{at}: uses `image.{call}`: Kyverno's imagedata library has `image.GetMetadata` only"
                ));
            }
            if compiled.libraries.contains("resource") {
                // Of Kyverno's resource library, reads only.
                if let Some(call) = source.split("resource.").skip(1).find(|rest| {
                    !["Get(", "get(", "List(", "list("]
                        .iter()
                        .any(|f| rest.starts_with(f))
                }) {
                    let name: String = call
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric())
                        .collect();
                    return Err(format!(
                        "{at}: uses `resource.{name}`: of Kyverno's resource library, this version runs Get and List (reads through Kubewarden's host capabilities)"
                    ));
                }
            }
            if compiled.identifiers.contains("params") && self.spec.param_kind.is_none() {
                return Err(format!(
                    "{at}: reads `params`, but the policy has no spec.paramKind"
                ));
            }
            if let Some(why) =
                declarations::undeclared(source, &compiled.expression, self.kind.is_kyverno())
            {
                return Err(format!("{at}: {why}"));
            }
            let functions = functions.get_or_insert_with(type_check::FunctionNames::new);
            let ty = type_check::check(
                source,
                &compiled.expression,
                &variable_types,
                functions,
                self.kind.is_kyverno(),
            )
            .map_err(|why| format!("{at}: {why}"))?;
            if let Some(why) = result_types::mismatch(place, &ty)
                .or_else(|| result_types::misnamed(place, &compiled.expression))
            {
                return Err(format!("{at}: {why}"));
            }
            if let Place::Mutation(..) = place
                && let Some(why) = metadata_literals::refused(source, &compiled.expression)
            {
                return Err(format!("{at}: {why}"));
            }
            if let Place::Variable(i) = place
                && let Some(variable) = self.spec.variables.get(i)
            {
                variable_types.insert(variable.name.clone(), ty);
            }
        }
        Ok(())
    }
}
