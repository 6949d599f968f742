//! Whole policy documents pasted as the settings: one Kyverno ClusterPolicy
//! or Policy in place of the settings, or several under `policies`. Each is
//! checked for its kind first (a document of another kind is refused by
//! kind, not by the first field this schema lacks), then read into a
//! [`Document`]: its rules and what governs them.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::{AUTOGEN_ANNOTATION, AUTOGEN_DEFAULT, Autogen, FailurePolicy};
use crate::rules::spec::RuleSpec;

/// A pasted policy document, as the items of `policies` are written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyDocument {
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub metadata: Option<PolicyMetadata>,
    #[serde(default)]
    pub spec: Option<PolicySpec>,
    // kubectl output carries it; nothing to honour.
    #[serde(default)]
    pub status: Option<IgnoredAny>,
}

/// The parts of a pasted policy's `metadata` that change what it does; the
/// rest (name, uid, managedFields...) is read past.
#[derive(Debug, Default, Deserialize)]
pub struct PolicyMetadata {
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// A namespaced `Policy` applies only in its namespace.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Kyverno's `ClusterPolicy.spec`, as far as admission mutation goes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicySpec {
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    #[serde(default)]
    pub apply_rules: Option<String>,
    // Accepted because Kyverno policies carry them; they concern Kyverno's
    // own webhooks, reports and background scans, not what a mutation writes.
    #[serde(default)]
    pub background: Option<IgnoredAny>,
    #[serde(default)]
    pub admission: Option<IgnoredAny>,
    #[serde(default)]
    pub validation_failure_action: Option<IgnoredAny>,
    #[serde(default)]
    pub validation_failure_action_overrides: Option<IgnoredAny>,
    #[serde(default)]
    pub emit_warning: Option<IgnoredAny>,
    #[serde(default)]
    pub schema_validation: Option<IgnoredAny>,
    #[serde(default)]
    pub use_server_side_apply: Option<IgnoredAny>,
    #[serde(default)]
    pub webhook_timeout_seconds: Option<IgnoredAny>,
    #[serde(default)]
    pub webhook_configuration: Option<IgnoredAny>,
    #[serde(default)]
    pub mutate_existing_on_policy_update: Option<IgnoredAny>,
    #[serde(default)]
    pub generate_existing: Option<IgnoredAny>,
    #[serde(default)]
    pub generate_existing_on_policy_update: Option<IgnoredAny>,
}

/// What a pasted policy document contributes.
pub struct Document {
    pub rules: Vec<RuleSpec>,
    pub failure_policy: Option<FailurePolicy>,
    pub autogen: Autogen,
    /// Set for a namespaced `Policy`: where its rules apply.
    pub namespace: Option<String>,
}

/// The fields that say what kind of document the settings are, or each
/// item of `policies` is: read first, so that a document of another kind is
/// refused by its kind.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentHeads {
    api_version: Option<String>,
    kind: Option<String>,
    policies: Option<Vec<DocumentHead>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DocumentHead {
    api_version: Option<String>,
    kind: Option<String>,
}

impl DocumentHeads {
    /// The first kind refusal among the documents the settings hold.
    pub fn check(&self) -> Result<(), String> {
        if self.api_version.is_some() || self.kind.is_some() {
            pasted_kind(
                "settings",
                self.api_version.as_deref(),
                self.kind.as_deref(),
            )?;
        }
        for (i, head) in self.policies.iter().flatten().enumerate() {
            pasted_kind(
                &format!("settings.policies[{i}]"),
                head.api_version.as_deref(),
                head.kind.as_deref(),
            )?;
        }
        Ok(())
    }
}

/// The policy documents that can be pasted whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PastedKind {
    ClusterPolicy,
    Policy,
}

/// Policy kinds users may paste that this version does not run, with their
/// API groups; refused by name rather than by the first field they have
/// that a ClusterPolicy lacks.
const OTHER_POLICY_KINDS: [(&str, &str); 5] = [
    ("MutatingPolicy", "policies.kyverno.io"),
    ("NamespacedMutatingPolicy", "policies.kyverno.io"),
    ("MutatingAdmissionPolicy", "admissionregistration.k8s.io"),
    ("ValidatingPolicy", "policies.kyverno.io"),
    ("ValidatingAdmissionPolicy", "admissionregistration.k8s.io"),
];

/// What the settings take when pasted whole, for messages.
const PASTABLE: &str = "a Kyverno ClusterPolicy or Policy (kyverno.io/v1), its spec.rules as `rules`, or the short form (`copy`)";

/// Which pasted document `apiVersion` and `kind` describe, or why it cannot
/// be pasted; `at` is the document's path.
fn pasted_kind(
    at: &str,
    api_version: Option<&str>,
    kind: Option<&str>,
) -> Result<PastedKind, String> {
    let pasted = match kind {
        Some("ClusterPolicy") => PastedKind::ClusterPolicy,
        Some("Policy") => PastedKind::Policy,
        Some("ClusterAdmissionPolicy" | "AdmissionPolicy") => {
            return Err(format!(
                "{at}.kind: a Kubewarden policy: these settings are what goes inside one (its spec.settings), not the policy itself; they take {PASTABLE}"
            ));
        }
        Some(other) => {
            let known = OTHER_POLICY_KINDS.iter().find(|(name, _)| *name == other);
            let why = match known {
                Some((name, group)) if name.starts_with("Validating") => {
                    format!("{name} ({group}) validates; this policy mutates, and takes {PASTABLE}")
                }
                Some((name, group)) => format!(
                    "{name} ({group}) is not supported by this version of the policy; it takes {PASTABLE}"
                ),
                None => {
                    format!("{other:?} is not a policy this policy can run; it takes {PASTABLE}")
                }
            };
            return Err(format!("{at}.kind: {why}"));
        }
        None => {
            return Err(format!(
                "{at}.kind: missing; a pasted policy document needs its kind (ClusterPolicy or Policy); the settings take {PASTABLE}"
            ));
        }
    };
    let kind = kind.unwrap_or_default();
    match api_version {
        Some("kyverno.io/v1" | "kyverno.io/v2beta1") => Ok(pasted),
        Some(other) => Err(format!(
            "{at}.apiVersion: {other:?}: a pasted Kyverno {kind} must be kyverno.io/v1 (or kyverno.io/v2beta1)"
        )),
        None => Err(format!(
            "{at}.apiVersion: missing; a pasted Kyverno {kind} needs apiVersion: kyverno.io/v1"
        )),
    }
}

impl PolicyDocument {
    /// Checks the document found at `at` and takes what it says.
    pub fn read(self, at: &str) -> Result<Document, String> {
        let mut document = Document {
            rules: Vec::new(),
            failure_policy: None,
            autogen: Autogen::default(),
            namespace: None,
        };
        if pasted_kind(at, self.api_version.as_deref(), self.kind.as_deref())? == PastedKind::Policy
        {
            // Kyverno applies a Policy only to requests in its own namespace;
            // one written without a namespace lands, like any namespaced
            // object applied so, in `default`.
            let namespace = self
                .metadata
                .as_ref()
                .and_then(|m| m.namespace.clone())
                .unwrap_or_else(|| "default".to_string());
            if let Err(why) = crate::k8s_names::check_dns_label(&namespace) {
                return Err(format!(
                    "{at}.metadata.namespace: {namespace:?} {why}: a namespaced Policy applies only in its namespace"
                ));
            }
            document.namespace = Some(namespace);
        }
        let Some(spec) = self.spec else {
            return Err(format!("{at}.spec: a pasted policy needs its spec"));
        };
        if let Some(apply) = spec.apply_rules.as_deref()
            && apply != "All"
        {
            return Err(format!(
                "{at}.spec.applyRules: {apply:?} is not supported: every matching rule is applied (`All`)"
            ));
        }
        document.rules = spec.rules;
        document.failure_policy = spec.failure_policy;
        if let Some(value) = self
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.get(AUTOGEN_ANNOTATION))
        {
            let value = value.trim();
            let mut controllers = Vec::new();
            if value != "none" {
                for name in value.split(',').map(str::trim) {
                    if !AUTOGEN_DEFAULT.contains(&name) {
                        return Err(format!(
                            "{at}.metadata.annotations.{AUTOGEN_ANNOTATION}: {name:?} is not a Pod controller Kyverno generates rules for (one of {}, or none)",
                            AUTOGEN_DEFAULT.join(", ")
                        ));
                    }
                    controllers.push(name.to_string());
                }
            }
            document.autogen = Autogen { controllers };
        }
        Ok(document)
    }
}
