//! A CEL policy as compiled at load ([`crate::cel::check::compiler`]): the document's
//! spec, what the compiler decided (failure policy, autogen controllers, the
//! bound Pod as target, one patcher per mutation), and, once a request needs
//! them, its expressions parsed and what the environment needs of them.

pub(crate) mod autogen;
pub mod exception;
pub mod matching;
pub mod targets;

use std::cell::OnceCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use serde_json::Value;

use crate::cel::patch::patchers::Patcher;
use crate::cel::program::library_use::Libraries;
use crate::cel::program::metering::{self, Interpreter};
use crate::cel::program::names::Names;
use crate::cel::program::{self, Compiled, Evaluators};
use crate::cel::spec::{CelKind, CelSpec, Place};
use crate::shared::policy_options::FailurePolicy;

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
    /// Pod mutations also run over these controllers (Kyverno's autogen,
    /// [`crate::cel::policy::autogen`]).
    pub autogen: Vec<String>,
    /// This is Kyverno's autogen rewrite of a Pod policy, run over a
    /// controller: its apply configurations' type names are checked when
    /// they run, as Kyverno checks them (the document's own were at load).
    pub rewritten_for_template: bool,
    /// One per mutation, in order (the document's `spec.mutations` is
    /// emptied into them).
    pub patchers: Vec<Patcher>,
    /// The `PolicyException`s beside it in the settings that name it.
    pub exceptions: Vec<exception::CelException>,
    /// `evaluation.mutateExisting` on the Pod being bound (`bound_pod`).
    pub bound_pod: bool,
    /// The parser and evaluator its expressions run with.
    pub evaluators: Evaluators,
    /// `targetMatchConstraints` name targets: Kyverno's webhook leaves the
    /// object being admitted alone.
    pub has_targets: bool,
    /// Every expression parsed, readied to run, and what the `cel` crate's
    /// environment needs, read from the trees: made when an evaluation first
    /// needs an expression (a request the rules do not match parses none).
    pub(in crate::cel) parsed: OnceCell<Parsed>,
    /// Renames the calls whose meaning depends on the types the load-time
    /// check works out, in the parsed expressions, before they are readied
    /// ([`crate::cel::check::typed_calls`], a layer above this one, sets it).
    pub(in crate::cel) retype: Option<Retype>,
}

/// See [`CelPolicy::retype`]: the policy, and its expressions parsed, in
/// the order of [`CelPolicy::sources`].
pub(in crate::cel) type Retype = fn(&CelPolicy, &mut [Result<Compiled, String>]);

#[derive(Debug, Clone)]
pub(in crate::cel) struct Parsed {
    /// Each expression of [`CelPolicy::sources`], in order, or why it does
    /// not compile.
    expressions: Vec<Result<Rc<Compiled>, String>>,
    /// What all of them name: the libraries they may call, the context
    /// they read, the struct types they construct.
    names: Names,
}

/// An expression's path in the settings, written only into a message.
struct PathOf<'p>(&'p CelPolicy, Place);

impl std::fmt::Display for PathOf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.spec.{}", self.0.at, self.1)
    }
}

impl CelPolicy {
    fn parsed(&self) -> &Parsed {
        self.parsed.get_or_init(|| {
            let mut names = Names::default();
            let mut compiled: Vec<_> = self
                .sources()
                .map(|(place, source)| {
                    program::compile_at(source, &PathOf(self, place), self.evaluators)
                })
                .collect();
            for expression in compiled.iter().flatten() {
                names.extend(&expression.names);
            }
            let count_every_cost = self.evaluators.count_every_cost;
            let overloads_matter = compiled
                .iter()
                .flatten()
                .any(|c| metering::overload_matters(&c.expression, count_every_cost));
            if (names.typed_list_calls || overloads_matter)
                && let Some(retype) = self.retype
            {
                retype(self, &mut compiled);
            }
            let expressions = compiled
                .into_iter()
                .map(|expression| {
                    expression.map(|mut expression| {
                        expression.cost_bound = names.libraries.prepare_counting(
                            &mut expression.expression,
                            count_every_cost,
                            self.interpreter(),
                            &expression.open_overloads,
                        );
                        Rc::new(expression)
                    })
                })
                .collect();
            Parsed { expressions, names }
        })
    }

    /// The policy's expression `source`, parsed and readied to run; `None`
    /// when `source` is not one of the policy's own (an exception's).
    pub fn compiled(&self, source: &str) -> Option<Result<Rc<Compiled>, String>> {
        let parsed = self.parsed();
        self.sources()
            .zip(&parsed.expressions)
            .find(|((_, own), _)| *own == source)
            .map(|(_, compiled)| compiled.clone())
    }

    /// The program of the policy's expression at `position` in
    /// [`CelPolicy::sources`] (a patcher's `program`).
    pub fn program(&self, position: usize) -> Option<Result<Rc<Compiled>, String>> {
        self.parsed().expressions.get(position).cloned()
    }

    /// Readies a parsed expression that is not the policy's own (an
    /// exception's) to run with the policy's libraries.
    /// Gives the most it can cost where its cost is not counted as it runs.
    pub fn prepare(&self, expression: &mut ::cel::common::ast::IdedExpr) -> Option<u64> {
        self.parsed().names.libraries.prepare_counting(
            expression,
            self.evaluators.count_every_cost,
            self.interpreter(),
            &BTreeSet::new(),
        )
    }

    /// Whose cel-go runs the policy's expressions where it is deployed.
    fn interpreter(&self) -> Interpreter {
        if self.kind.is_kyverno() {
            Interpreter::Kyverno
        } else {
            Interpreter::Kubernetes
        }
    }

    /// Struct types the expressions construct (the crate knows only these).
    pub fn struct_names(&self) -> &BTreeSet<String> {
        &self.parsed().names.structs
    }

    /// The libraries the expressions may call.
    pub fn libraries(&self) -> Libraries {
        self.parsed().names.libraries
    }

    /// Whether an expression names this context identifier (`request`,
    /// `oldObject`, `params`, `namespaceObject`).
    pub fn mentions(&self, identifier: &str) -> bool {
        self.parsed().names.reads(identifier)
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
        let binding = |name: &str| crate::shared::request_facts::RequestFacts {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::testing::fake_cluster::run;

    /// Issue 36: the struct types an expression constructs come from its
    /// tree, so a comment between a type's name and its `{` (valid CEL: the
    /// lexer drops it) changes nothing, on the direct path and the crate's.
    #[test]
    fn a_comment_inside_a_construction_changes_nothing() {
        for expression in [
            "Object{metadata: Object.metadata{labels: {'a': ['b'].map(x, x)[0]}}}",
            "Object{metadata: Object.metadata // the Pod's\n{labels: {'a': ['b'].map(x, x)[0]}}}",
            "Object{metadata: Object.metadata // the Pod's\n{labels: {'a': 'b'}}}",
        ] {
            let policy = json!({"apiVersion": "policies.kyverno.io/v1", "kind": "MutatingPolicy",
                "metadata": {"name": "c"},
                "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["pods"]}]},
                "mutations": [{"patchType": "ApplyConfiguration",
                    "applyConfiguration": {"expression": expression}}]}});
            let response = run("pod-with-node-name.json", policy);
            assert!(response.accepted, "{expression}: {:?}", response.message);
            let labels = response
                .mutated_object
                .as_ref()
                .and_then(|pod| pod.pointer("/metadata/labels/a"))
                .cloned();
            assert_eq!(labels, Some(json!("b")), "{expression}");
        }
    }

    /// Issue 44: a patcher holds where its program is, found by position,
    /// not by its text: the mutations after two conditions and a variable,
    /// two of them with the same text.
    #[test]
    fn a_patcher_finds_its_own_program() {
        let document = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicy", "metadata": {"name": "p"},
            "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["pods"]}]},
            "matchConditions": [{"name": "a", "expression": "true"}, {"name": "b", "expression": "1 == 1"}],
            "variables": [{"name": "v", "expression": "'x'"}],
            "mutations": [
                {"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}},
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{}"}}],
            "reinvocationPolicy": "Never"}});
        let raw = serde_json::to_vec(&document).unwrap();
        let plan = crate::settings::load(&raw).unwrap();
        let policy = plan
            .rule_groups
            .iter()
            .find_map(|g| g.cel.as_deref())
            .unwrap();
        let sources: Vec<&str> = policy.sources().map(|(_, source)| source).collect();
        let programs: Vec<usize> = policy.patchers.iter().map(|p| p.program).collect();
        assert_eq!(programs, [3, 4, 5]);
        for patcher in &policy.patchers {
            assert_eq!(sources[patcher.program], patcher.expression);
            assert!(policy.program(patcher.program).unwrap().is_ok());
        }
        assert!(policy.program(6).is_none());
    }
}
