//! The files a Kyverno CLI test names, as read: the test itself
//! (`kyverno-test.yaml`: policies, resources, expected results) and its values
//! file (per-rule and global values, Namespace labels, subresource kinds).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
pub(super) struct TestFile {
    #[serde(default)]
    pub(super) policies: Vec<String>,
    /// Kyverno `PolicyException` files.
    #[serde(default)]
    pub(super) exceptions: Vec<String>,
    #[serde(default)]
    pub(super) resources: Vec<String>,
    /// Objects already in the cluster, for the policy's reads: plain
    /// resource files or `ClusterResource` documents (`spec.resources`
    /// inline, `spec.crds` naming CRD files).
    #[serde(default, rename = "clusterResources")]
    pub(super) cluster_resources: Vec<String>,
    /// A `Context` document: `spec.images` stand for the registry.
    #[serde(default)]
    pub(super) context: Option<String>,
    #[serde(default)]
    pub(super) variables: Option<String>,
    #[serde(default)]
    pub(super) results: Vec<TestResult>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TestResult {
    pub(super) policy: String,
    #[serde(default)]
    pub(super) rule: String,
    #[serde(default)]
    pub(super) resources: Vec<String>,
    #[serde(default)]
    pub(super) resource: Option<String>,
    #[serde(default)]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) patched_resource: Option<String>,
    #[serde(default)]
    pub(super) patched_resources: Option<String>,
    #[serde(default)]
    pub(super) result: String,
    #[serde(default)]
    pub(super) is_mutating_policy: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Values {
    #[serde(default)]
    pub(super) policies: Vec<PolicyValues>,
    #[serde(default)]
    pub(super) global_values: BTreeMap<String, Value>,
    #[serde(default)]
    pub(super) namespace_selector: Vec<NamespaceLabels>,
    /// Kinds that are subresources of another (a Binding is `pods/binding`).
    #[serde(default)]
    pub(super) subresources: Vec<Subresource>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Subresource {
    pub(super) parent_resource: ResourceName,
    pub(super) subresource: SubresourceName,
}

#[derive(Debug, Deserialize)]
pub(super) struct ResourceName {
    pub(super) name: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct SubresourceName {
    pub(super) kind: String,
    pub(super) name: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct PolicyValues {
    pub(super) name: String,
    #[serde(default)]
    pub(super) rules: Vec<RuleValues>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RuleValues {
    pub(super) name: String,
    #[serde(default)]
    pub(super) values: BTreeMap<String, Value>,
}

#[derive(Debug, Deserialize)]
pub(super) struct NamespaceLabels {
    pub(super) name: String,
    #[serde(default)]
    pub(super) labels: BTreeMap<String, String>,
}
