//! The CEL policy documents as users write them: Kyverno's `MutatingPolicy`
//! and `NamespacedMutatingPolicy` (`policies.kyverno.io`) and Kubernetes'
//! `MutatingAdmissionPolicy` (`admissionregistration.k8s.io`). One schema
//! serves the three: Kyverno's is a superset of Kubernetes', and what one
//! kind lacks is refused for it in [`super::check`].

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::shared::label_selector::LabelSelector;
use crate::shared::policy_options::FailurePolicy;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CelSpec {
    #[serde(default)]
    pub match_constraints: Option<MatchResources>,
    /// Both Kyverno and Kubernetes default it to `Fail`.
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    #[serde(default)]
    pub match_conditions: Vec<NamedExpression>,
    #[serde(default)]
    pub variables: Vec<NamedExpression>,
    #[serde(default)]
    pub mutations: Vec<Mutation>,
    /// `Never` or `IfNeeded`; a Kubewarden webhook is called once either way.
    #[serde(default)]
    pub reinvocation_policy: Option<String>,
    /// MutatingAdmissionPolicy only: the kind of its parameters, which the
    /// settings give inline as `params`.
    #[serde(default)]
    pub param_kind: Option<ParamKind>,
    // Kyverno's MutatingPolicy only, from here on.
    #[serde(default)]
    pub autogen: Option<CelAutogen>,
    #[serde(default)]
    pub evaluation: Option<Evaluation>,
    /// Kyverno's `auditAnnotations`: each value expression's string goes
    /// into the answer's audit annotations as `<policy>/<key>`.
    #[serde(default)]
    pub audit_annotations: Vec<AuditAnnotation>,
    /// With `evaluation.mutateExisting`: which existing objects the
    /// mutations change (see `cel::bound_pod`).
    #[serde(default)]
    pub target_match_constraints: Option<MatchResources>,
    /// With `evaluation.mutateExisting`: the conditions a target must meet,
    /// evaluated with `object` the target.
    #[serde(default)]
    pub target_match_conditions: Vec<NamedExpression>,
    /// Kyverno's own webhook's timeout: the ClusterAdmissionPolicy's
    /// `timeoutSeconds` is what bounds this one.
    #[serde(default)]
    pub webhook_configuration: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AuditAnnotation {
    pub key: String,
    pub value_expression: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MatchResources {
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(default)]
    pub object_selector: Option<LabelSelector>,
    #[serde(default)]
    pub resource_rules: Vec<ResourceRule>,
    #[serde(default)]
    pub exclude_resource_rules: Vec<ResourceRule>,
    /// `Exact` or `Equivalent` (the default).
    #[serde(default)]
    pub match_policy: Option<String>,
    /// Kyverno's `targetMatchConstraints` only: the expression naming the
    /// targets. One type for both keeps the module small; `matchConstraints`
    /// refuses it at load as the unknown field it is there.
    #[serde(default)]
    pub expression: Option<String>,
}

/// Kubernetes' `NamedRuleWithOperations`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceRule {
    #[serde(default)]
    pub resource_names: Vec<String>,
    #[serde(default)]
    pub operations: Vec<String>,
    #[serde(default)]
    pub api_groups: Vec<String>,
    #[serde(default)]
    pub api_versions: Vec<String>,
    #[serde(default)]
    pub resources: Vec<String>,
    /// `Cluster`, `Namespaced` or `*` (the default).
    #[serde(default)]
    pub scope: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedExpression {
    pub name: String,
    pub expression: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Mutation {
    pub patch_type: String,
    #[serde(default)]
    pub apply_configuration: Option<Expression>,
    #[serde(default)]
    pub json_patch: Option<Expression>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expression {
    pub expression: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ParamKind {
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CelAutogen {
    #[serde(default)]
    pub pod_controllers: Option<PodControllers>,
    /// Kyverno's generation of a MutatingAdmissionPolicy from this one: a
    /// matter of where Kyverno runs it, not of what it writes.
    #[serde(default)]
    pub mutating_admission_policy: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodControllers {
    /// Absent: every controller Kyverno generates for; `[]`: none.
    #[serde(default)]
    pub controllers: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Evaluation {
    #[serde(default)]
    pub admission: Option<Enabled>,
    #[serde(default)]
    pub mutate_existing: Option<Enabled>,
    // Background scans, reports and how Kyverno applies: nothing an
    // admission answer carries.
    #[serde(default)]
    pub background: Option<IgnoredAny>,
    #[serde(default)]
    pub mode: Option<IgnoredAny>,
    #[serde(default)]
    pub skip_background_requests: Option<IgnoredAny>,
    /// Lets an apply configuration replace atomic lists, maps and structs
    /// whole, which Kubernetes' merge refuses (Kyverno's MutatingPolicy).
    #[serde(default)]
    pub use_server_side_apply: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Enabled {
    #[serde(default)]
    pub enabled: Option<bool>,
}

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
