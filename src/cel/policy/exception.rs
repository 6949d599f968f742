//! Kyverno's `PolicyException` (`policies.kyverno.io`): the CEL policies it
//! names leave alone the requests its `matchConditions` all hold for.

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::cel::program;
use crate::cel::spec::NamedExpression;

/// `PolicyException.spec`, as far as mutation goes.
// The fields read past are there to be accepted, not read.
#[allow(dead_code)]
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExceptionSpec {
    #[serde(default)]
    pub policy_refs: Vec<PolicyRef>,
    #[serde(default)]
    pub match_conditions: Vec<NamedExpression>,
    /// A time after which the exception no longer applies: refused at load
    /// (the policy does not read the clock).
    #[serde(default)]
    pub expires_at: Option<String>,
    /// An exception with `images` or `allowedValues` does not exempt: the
    /// policy runs, and reads them as `exceptions.allowedImages` and
    /// `exceptions.allowedValues`.
    #[serde(default)]
    pub allowed_values: Vec<String>,
    #[serde(default)]
    pub images: Vec<String>,
    // For Kyverno's reports: nothing a mutation reads.
    #[serde(default)]
    pub evaluation_mode: Option<IgnoredAny>,
    #[serde(default)]
    pub properties: Option<IgnoredAny>,
    #[serde(default)]
    pub report_result: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRef {
    pub name: String,
    pub kind: String,
}

/// A checked exception.
#[derive(Debug, Clone)]
pub struct CelException {
    pub name: String,
    /// The document's path in the settings, for messages.
    pub at: String,
    pub spec: ExceptionSpec,
}

impl CelException {
    /// Refuses, by its group, a PolicyException this version cannot run.
    pub fn check_api_version(api_version: &str, at: &str) -> Result<(), String> {
        if !matches!(
            api_version,
            "policies.kyverno.io/v1"
                | "policies.kyverno.io/v1beta1"
                | "policies.kyverno.io/v1alpha1"
        ) {
            return Err(format!(
                "{at}.apiVersion: {api_version:?}: a PolicyException for CEL policies is policies.kyverno.io/v1 (or v1beta1, v1alpha1); Kyverno's kyverno.io PolicyException (for ClusterPolicy rules) is not supported"
            ));
        }
        Ok(())
    }

    pub fn read(
        name: Option<String>,
        spec: ExceptionSpec,
        at: &str,
    ) -> Result<CelException, String> {
        if spec.expires_at.is_some() {
            return Err(format!(
                "{at}.spec.expiresAt: not supported: this policy does not read the clock; remove the exception when it is due to expire"
            ));
        }
        if spec.policy_refs.is_empty() {
            return Err(format!(
                "{at}.spec.policyRefs: empty; an exception names the policies it applies to"
            ));
        }
        for (i, condition) in spec.match_conditions.iter().enumerate() {
            let expression = format!("{at}.spec.matchConditions[{i}].expression");
            let compiled = program::compile(&condition.expression, &expression)?;
            if compiled.identifiers.contains("variables") {
                return Err(format!(
                    "{expression}: an exception's conditions see object, oldObject, request and namespaceObject, not a policy's variables"
                ));
            }
        }
        Ok(CelException {
            name: name.unwrap_or_default(),
            at: at.to_string(),
            spec,
        })
    }

    /// Whether it names the policy of this kind and name.
    pub fn applies_to(&self, kind: &str, name: &str) -> bool {
        self.spec
            .policy_refs
            .iter()
            .any(|r| r.kind == kind && r.name == name)
    }
}
