//! A CEL policy as compiled at load ([`super::compiler`]): the document's
//! spec, what the compiler decided (failure policy, autogen controllers, the
//! bound Pod as target, one patcher per mutation), and what the environment
//! needs, read from the parsed expressions the first time it is built.

use std::cell::OnceCell;
use std::collections::BTreeSet;

use serde_json::Value;

use super::environment;
use super::exception;
use super::matching;
use super::patchers::Patcher;
use super::program;
use super::spec::{CelKind, CelSpec, Place};
use crate::policy_options::FailurePolicy;

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
    /// One per mutation, in order (the document's `spec.mutations` is
    /// emptied into them).
    pub patchers: Vec<Patcher>,
    /// The `PolicyException`s beside it in the settings that name it.
    pub exceptions: Vec<exception::CelException>,
    /// `evaluation.mutateExisting` on the Pod being bound (`bound_pod`).
    pub bound_pod: bool,
    /// `targetMatchConstraints` name targets: Kyverno's webhook leaves the
    /// object being admitted alone.
    pub has_targets: bool,
    /// What the `cel` crate's environment needs, read from the expressions'
    /// text the first time it is built: policies the direct evaluator runs
    /// whole never need it (see `direct`).
    pub(super) derived: OnceCell<Derived>,
    /// Whether an expression names the time library: all that parsing an
    /// expression per request needs of [`Derived`] (reading the text for
    /// every library costs more than parsing the row's two expressions).
    pub(super) uses_time: OnceCell<bool>,
}

#[derive(Debug, Clone)]
pub(super) struct Derived {
    /// Struct types the mutations construct.
    struct_names: BTreeSet<String>,
    /// The libraries the expressions may call.
    libraries: environment::Libraries,
    /// The context identifiers named in the expressions' text.
    words: BTreeSet<String>,
}

impl CelPolicy {
    fn derived(&self) -> &Derived {
        self.derived.get_or_init(|| {
            let sources: Vec<&str> = self.sources().map(|(_, s)| s).collect();
            let mut struct_names = BTreeSet::new();
            for patcher in &self.patchers {
                program::struct_names(&patcher.expression, &mut struct_names);
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
        let mutations = self
            .patchers
            .iter()
            .map(|patcher| (patcher.place(), patcher.expression.as_str()));
        let audit = spec.audit_annotations.iter().enumerate();
        let target_conditions = spec.target_match_conditions.iter().enumerate();
        conditions
            .map(|(i, c)| (Place::MatchCondition(i), c.expression.as_str()))
            .chain(variables.map(|(i, v)| (Place::Variable(i), v.expression.as_str())))
            .chain(mutations)
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
        let binding = |name: &str| crate::request_facts::RequestFacts {
            operation: "CREATE".to_string(),
            group: String::new(),
            version: "v1".to_string(),
            resource: "pods".to_string(),
            sub_resource: "binding".to_string(),
            kind: "Pod".to_string(),
            name: name.to_string(),
            namespace: self
                .namespace
                .clone()
                .unwrap_or_else(|| "default".to_string()),
            ..Default::default()
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
        self.admission_enabled() && (self.bound_pod || !self.has_targets)
    }

    /// `targetMatchConstraints.expression`, where given.
    pub fn target_expression(&self) -> Option<&str> {
        self.spec
            .target_match_constraints
            .as_ref()
            .and_then(|t| t.expression.as_deref())
    }
}
