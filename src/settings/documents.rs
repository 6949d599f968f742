//! Whole policy documents pasted as the settings: one Kyverno ClusterPolicy,
//! Policy, MutatingPolicy or NamespacedMutatingPolicy, or a Kubernetes
//! MutatingAdmissionPolicy, in place of the settings, or several under
//! `policies`. Each is checked for its kind first (a document of another
//! kind is refused by kind, not by the first field its schema lacks), then
//! its spec is read by that kind's schema into a [`Document`].

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::value::RawValue;

use crate::cel::policy::exception::{CelException, ExceptionSpec};
use crate::cel::{CelKind, CelPolicy};
use crate::kyverno::spec::RuleSpec;
use crate::shared::autogen::{AUTOGEN_ANNOTATION, AUTOGEN_DEFAULT, Autogen};
use crate::shared::policy_options::{Checks, FailurePolicy};

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
    /// Read by the schema of the document's kind.
    #[serde(default)]
    pub spec: Option<Box<RawValue>>,
    /// A MutatingAdmissionPolicy's parameters (its `paramKind` object),
    /// given inline: Kubewarden has no binding object to point at them.
    #[serde(default)]
    pub params: Option<serde_json::Value>,
    // kubectl output carries it; nothing to honour.
    #[serde(default)]
    pub status: Option<IgnoredAny>,
}

/// The parts of a pasted policy's `metadata` that change what it does; the
/// rest (uid, managedFields...) is read past.
#[derive(Debug, Default, Deserialize)]
pub struct PolicyMetadata {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// A namespaced `Policy` applies only in its namespace.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Kyverno's `ClusterPolicy.spec`, as far as admission mutation goes.
// The fields read past are there to be accepted, not read.
#[allow(dead_code)]
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
    /// Its `failurePolicy` wins over `spec.failurePolicy`, as in Kyverno.
    #[serde(default)]
    pub webhook_configuration: Option<WebhookConfiguration>,
    #[serde(default)]
    pub mutate_existing_on_policy_update: Option<IgnoredAny>,
    #[serde(default)]
    pub generate_existing: Option<IgnoredAny>,
    #[serde(default)]
    pub generate_existing_on_policy_update: Option<IgnoredAny>,
}

/// Kyverno's `spec.webhookConfiguration`: how Kyverno registers the
/// policy's webhook.
// `timeout_seconds` is there to be accepted, not read.
#[allow(dead_code)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WebhookConfiguration {
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    /// The ClusterAdmissionPolicy's `timeoutSeconds` is the webhook's here.
    #[serde(default)]
    pub timeout_seconds: Option<IgnoredAny>,
    /// Evaluated by the API server on Kyverno's webhook; refused here
    /// unless empty (see [`PolicyDocument::read`]).
    #[serde(default)]
    pub match_conditions: Option<Vec<serde_json::Value>>,
}

/// What a pasted policy document contributes.
pub enum Document {
    Kyverno(KyvernoDocument),
    Cel(Box<CelPolicy>),
    /// A `PolicyException` for the CEL policies beside it.
    Exception(Box<CelException>),
}

/// What a ClusterPolicy or Policy contributes.
pub struct KyvernoDocument {
    pub rules: Vec<RuleSpec>,
    /// `spec.webhookConfiguration.failurePolicy`, else `spec.failurePolicy`.
    pub failure_policy: Option<FailurePolicy>,
    /// `ClusterPolicy "name"` or `Policy "namespace/name"`, for messages.
    pub label: String,
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
    Cel(CelKind),
    Exception,
}

/// Policy kinds users may paste that this version does not run, with their
/// API groups; refused by name rather than by the first field they have
/// that a ClusterPolicy lacks.
const OTHER_POLICY_KINDS: [(&str, &str); 4] = [
    ("ValidatingPolicy", "policies.kyverno.io"),
    ("NamespacedValidatingPolicy", "policies.kyverno.io"),
    ("ValidatingAdmissionPolicy", "admissionregistration.k8s.io"),
    ("GeneratingPolicy", "policies.kyverno.io"),
];

/// What the settings take when pasted whole, for messages.
const PASTABLE: &str = "a Kyverno ClusterPolicy or Policy (kyverno.io/v1), a Kyverno MutatingPolicy or NamespacedMutatingPolicy (policies.kyverno.io/v1), a MutatingAdmissionPolicy (admissionregistration.k8s.io/v1), spec.rules as `rules`, or the short form (`copy`)";

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
        // Their apiVersion is checked with the document.
        Some("MutatingPolicy") => return Ok(PastedKind::Cel(CelKind::MutatingPolicy)),
        Some("NamespacedMutatingPolicy") => {
            return Ok(PastedKind::Cel(CelKind::NamespacedMutatingPolicy));
        }
        Some("MutatingAdmissionPolicy") => {
            return Ok(PastedKind::Cel(CelKind::MutatingAdmissionPolicy));
        }
        Some("PolicyException") => return Ok(PastedKind::Exception),
        Some("ClusterAdmissionPolicy" | "AdmissionPolicy") => {
            return Err(format!(
                "{at}.kind: a Kubewarden policy: these settings are what goes inside one (its spec.settings), not the policy itself; they take {PASTABLE}"
            ));
        }
        Some(other) => {
            let known = OTHER_POLICY_KINDS.iter().find(|(name, _)| *name == other);
            let why = match known {
                Some((name, group)) if name.contains("Validating") => {
                    format!("{name} ({group}) validates; this policy mutates, and takes {PASTABLE}")
                }
                Some((name, group)) => format!(
                    "{name} ({group}) generates resources; this policy mutates, and takes {PASTABLE}"
                ),
                None => {
                    format!("{other:?} is not a policy this policy can run; it takes {PASTABLE}")
                }
            };
            return Err(format!("{at}.kind: {why}"));
        }
        None => {
            return Err(format!(
                "{at}.kind: missing; a pasted policy document needs its kind; the settings take {PASTABLE}"
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

/// Reads a document's spec by its kind's schema, naming the path of a
/// field that does not fit (`settings.policies[1].spec.mutations[0].x`).
fn read_spec<T: DeserializeOwned + Default>(
    spec: Option<&RawValue>,
    at: &str,
) -> Result<T, String> {
    let Some(spec) = spec else {
        return Err(format!("{at}.spec: a pasted policy needs its spec"));
    };
    // From bytes, as `settings::parse` reads: one reader type means one copy
    // of each schema's deserializer in the module.
    if let Ok(read) = serde_json::from_slice::<T>(spec.get().as_bytes()) {
        return Ok(read);
    }
    let mut de = serde_json::Deserializer::from_slice(spec.get().as_bytes());
    serde_path_to_error::deserialize::<_, T>(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = without_position(&err.into_inner());
        if path == "." {
            format!("{at}.spec: {inner}")
        } else {
            format!("{at}.spec.{path}: {inner}")
        }
    })
}

impl PolicyDocument {
    /// Checks the document found at `at` and takes what it says.
    pub fn read(self, at: &str, checks: Checks) -> Result<Document, String> {
        let kind = pasted_kind(at, self.api_version.as_deref(), self.kind.as_deref())?;
        if kind == PastedKind::Exception {
            if self.params.is_some() {
                return Err(format!(
                    "{at}.params: a PolicyException takes no parameters"
                ));
            }
            CelException::check_api_version(self.api_version.as_deref().unwrap_or_default(), at)?;
            let spec: ExceptionSpec = read_spec(self.spec.as_deref(), at)?;
            return CelException::read(self.metadata.and_then(|m| m.name), spec, at)
                .map(|exception| Document::Exception(Box::new(exception)));
        }
        if let PastedKind::Cel(cel_kind) = kind {
            crate::cel::check_api_version(
                cel_kind,
                self.api_version.as_deref().unwrap_or_default(),
                at,
            )?;
            let spec = read_spec(self.spec.as_deref(), at)?;
            let metadata = self.metadata.unwrap_or_default();
            let namespace = match cel_kind {
                CelKind::NamespacedMutatingPolicy => Some(namespace_of(&metadata, at)?),
                _ => None,
            };
            return crate::cel::compile(
                cel_kind,
                self.api_version.as_deref().unwrap_or_default(),
                metadata.name,
                namespace,
                spec,
                self.params,
                at,
                checks,
            )
            .map(|policy| Document::Cel(Box::new(policy)));
        }
        if self.params.is_some() {
            return Err(format!(
                "{at}.params: only a MutatingAdmissionPolicy with a spec.paramKind takes parameters"
            ));
        }
        let name = self
            .metadata
            .as_ref()
            .and_then(|m| m.name.as_deref())
            .unwrap_or_default();
        let mut document = KyvernoDocument {
            rules: Vec::new(),
            failure_policy: None,
            label: format!("ClusterPolicy {name:?}"),
            autogen: Autogen::default(),
            namespace: None,
        };
        if kind == PastedKind::Policy {
            let namespace = namespace_of(
                self.metadata.as_ref().unwrap_or(&PolicyMetadata::default()),
                at,
            )?;
            document.label = format!("Policy \"{namespace}/{name}\"");
            document.namespace = Some(namespace);
        }
        let spec: PolicySpec = read_spec(self.spec.as_deref(), at)?;
        let webhook = spec.webhook_configuration.unwrap_or_default();
        if webhook
            .match_conditions
            .as_ref()
            .is_some_and(|c| !c.is_empty())
        {
            return Err(format!(
                "{at}.spec.webhookConfiguration.matchConditions: the API server evaluates these on Kyverno's webhook, and this policy's webhook is the ClusterAdmissionPolicy's: move them to its spec.matchConditions, where they decide the same way"
            ));
        }
        if let Some(apply) = spec.apply_rules.as_deref()
            && apply != "All"
        {
            return Err(format!(
                "{at}.spec.applyRules: {apply:?} is not supported: every matching rule is applied (`All`)"
            ));
        }
        document.rules = spec.rules;
        // Kyverno's order (GetFailurePolicy): the webhook configuration's,
        // then the spec's.
        document.failure_policy = webhook.failure_policy.or(spec.failure_policy);
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
        Ok(Document::Kyverno(document))
    }
}

/// A namespaced policy's namespace. Kyverno applies a Policy (and a
/// NamespacedMutatingPolicy) only to requests in its own namespace; one
/// written without a namespace lands, like any namespaced object applied so,
/// in `default`.
fn namespace_of(metadata: &PolicyMetadata, at: &str) -> Result<String, String> {
    let namespace = metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_string());
    crate::shared::k8s_names::check_dns_label(&namespace).map_err(|why| {
        format!(
            "{at}.metadata.namespace: {namespace:?} {why}: a namespaced policy applies only in its namespace"
        )
    })?;
    Ok(namespace)
}

/// serde_json ends messages with "at line L column C"; settings reach the
/// policy re-encoded from YAML, so the position points nowhere useful.
pub(super) fn without_position(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.rfind(" at line ") {
        Some(cut) if err.line() > 0 => text.get(..cut).unwrap_or(&text).to_string(),
        _ => text,
    }
}
