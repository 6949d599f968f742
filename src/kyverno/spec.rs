//! The rule schema: Kyverno's `spec.rules` (kyverno.io/v1), as users paste it.
//! Fields an admission-only policy cannot honour are named here so that
//! loading can refuse them with the reason instead of "unknown field".

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::shared::label_selector::LabelSelector;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RuleSpec {
    pub name: String,
    #[serde(rename = "match")]
    pub match_: Option<Box<MatchSpec>>,
    #[serde(default)]
    pub exclude: Option<Box<MatchSpec>>,
    #[serde(default)]
    pub context: Vec<ContextEntry>,
    #[serde(default)]
    pub preconditions: Option<Conditions>,
    #[serde(default)]
    pub mutate: Option<Box<MutateSpec>>,
    // Accepted because Kyverno policies carry them; they change nothing at admission.
    #[serde(default)]
    pub skip_background_requests: Option<bool>,
    #[serde(default)]
    pub report_properties: Option<IgnoredAny>,
    // Refused, with the reason, when the rules are loaded.
    #[serde(default)]
    pub validate: Option<IgnoredAny>,
    #[serde(default)]
    pub generate: Option<IgnoredAny>,
    #[serde(default)]
    pub verify_images: Option<IgnoredAny>,
    #[serde(default)]
    pub image_extractors: Option<IgnoredAny>,
    #[serde(default)]
    pub cel_preconditions: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MatchSpec {
    #[serde(default)]
    pub any: Option<Vec<Filter>>,
    #[serde(default)]
    pub all: Option<Vec<Filter>>,
    // The older single-filter form.
    #[serde(default)]
    pub resources: Option<Box<ResourceDescription>>,
    #[serde(default)]
    pub subjects: Option<Vec<Subject>>,
    #[serde(default)]
    pub roles: Option<Vec<String>>,
    #[serde(default)]
    pub cluster_roles: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Filter {
    #[serde(default)]
    pub resources: Option<Box<ResourceDescription>>,
    #[serde(default)]
    pub subjects: Option<Vec<Subject>>,
    #[serde(default)]
    pub roles: Option<Vec<String>>,
    #[serde(default)]
    pub cluster_roles: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceDescription {
    #[serde(default)]
    pub kinds: Vec<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(default)]
    pub operations: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Subject {
    pub kind: String,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub api_group: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContextEntry {
    pub name: String,
    #[serde(default)]
    pub variable: Option<VariableSource>,
    #[serde(default)]
    pub api_call: Option<ApiCall>,
    #[serde(default)]
    pub config_map: Option<ConfigMapRef>,
    #[serde(default)]
    pub image_registry: Option<ImageRegistry>,
    #[serde(default)]
    pub global_reference: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VariableSource {
    #[serde(default)]
    pub value: Option<Value>,
    #[serde(default)]
    pub jmes_path: Option<String>,
    #[serde(default)]
    pub default: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiCall {
    #[serde(default)]
    pub url_path: Option<String>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub data: Option<IgnoredAny>,
    #[serde(default)]
    pub service: Option<IgnoredAny>,
    #[serde(default)]
    pub jmes_path: Option<String>,
    #[serde(default)]
    pub default: Option<Value>,
}

/// A context entry that asks a container registry about an image.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageRegistry {
    pub reference: String,
    #[serde(default)]
    pub jmes_path: Option<String>,
    /// Refused when set: policy-server reads registries with its own
    /// configuration and credentials.
    #[serde(default)]
    pub image_registry_credentials: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigMapRef {
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `preconditions`: either `{any, all}` or (older form) a plain list, which
/// means `all`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Conditions {
    Blocks(ConditionBlocks),
    List(Vec<Condition>),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConditionBlocks {
    #[serde(default)]
    pub any: Option<Vec<Condition>>,
    #[serde(default)]
    pub all: Option<Vec<Condition>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    pub key: Value,
    pub operator: String,
    #[serde(default)]
    pub value: Value,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MutateSpec {
    #[serde(default)]
    pub patch_strategic_merge: Option<Value>,
    #[serde(default, rename = "patchesJson6902")]
    pub patches_json6902: Option<String>,
    #[serde(default)]
    pub foreach: Option<Vec<ForeachSpec>>,
    #[serde(default)]
    pub targets: Option<Vec<TargetSpec>>,
    #[serde(default)]
    pub mutate_existing_on_policy_update: Option<IgnoredAny>,
}

/// A `mutate.targets` entry (Kyverno's "mutate existing"). The only one an
/// admission policy honours is the Pod being bound, see `kyverno::check`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TargetSpec {
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub uid: Option<IgnoredAny>,
    #[serde(default)]
    pub selector: Option<IgnoredAny>,
    #[serde(default)]
    pub context: Option<IgnoredAny>,
    #[serde(default)]
    pub preconditions: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ForeachSpec {
    pub list: String,
    #[serde(default)]
    pub context: Vec<ContextEntry>,
    #[serde(default)]
    pub preconditions: Option<Conditions>,
    #[serde(default)]
    pub patch_strategic_merge: Option<Value>,
    #[serde(default, rename = "patchesJson6902")]
    pub patches_json6902: Option<String>,
    #[serde(default)]
    pub order: Option<String>,
    /// Nested loops: `element` is the innermost element, `elementN` /
    /// `elementIndexN` the element of the loop at depth N (0 outermost).
    #[serde(default)]
    pub foreach: Option<Vec<ForeachSpec>>,
}
