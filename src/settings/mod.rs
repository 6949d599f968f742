//! Settings: the serde schema users write, its defaults, and validation into a
//! [`PolicyPlan`] the engine runs. Everything that can be wrong with settings is
//! found here, at load time, with the field path in the message.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::glob::KeyPattern;
use crate::k8s_names::{check_label_value, check_qualified_name};
use crate::kyverno::spec::RuleSpec;
use crate::shared::resources::ResourceKind;

mod copy;
mod documents;
use copy::{check_conflicts, default_rule};
use documents::{Document, DocumentHeads, PolicyDocument, PolicyMetadata};

use crate::cel::CelPolicy;

/// The settings document (`ClusterAdmissionPolicy.spec.settings`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Settings {
    /// What to copy. Absent: the Node's zone and region labels become Pod
    /// annotations. An empty list copies nothing.
    #[serde(default)]
    pub copy: Option<Vec<CopyEntry>>,
    /// What to do when the Node (or anything a rule reads) cannot be read.
    /// Absent: `spec.failurePolicy` of a pasted policy document, else `Ignore`.
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    /// What to do when a Pod created with `spec.nodeName` already carries a key
    /// this policy manages, with a value the Node does not back.
    #[serde(default)]
    pub on_preset_keys: PresetKeys,
    /// Kyverno's `spec.rules`, pasted as they are.
    #[serde(default)]
    pub rules: Option<Vec<RuleSpec>>,
    /// Resources outside the core and common groups that rules read with
    /// `apiCall` or match as `Kind/subresource`.
    #[serde(default)]
    pub resource_kinds: Vec<ResourceKind>,
    // A whole Kyverno ClusterPolicy/Policy document may be pasted as the
    // settings instead of bare `rules`: these are its top-level fields.
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub metadata: Option<PolicyMetadata>,
    #[serde(default)]
    pub spec: Option<Box<serde_json::value::RawValue>>,
    /// A pasted MutatingAdmissionPolicy's parameters.
    #[serde(default)]
    pub params: Option<serde_json::Value>,
    /// Several whole policy documents, applied in order: each sees the
    /// object as the ones before it left it.
    #[serde(default)]
    pub policies: Option<Vec<PolicyDocument>>,
    // kubectl output carries it; nothing to honour.
    #[serde(default)]
    pub status: Option<IgnoredAny>,
}

/// The annotation by which a Kyverno policy chooses which Pod controllers its
/// Pod rules are generated for.
pub const AUTOGEN_ANNOTATION: &str = "pod-policies.kyverno.io/autogen-controllers";

/// At most this many `copy` entries: one evaluation's work stays bounded.
pub const MAX_COPY_ENTRIES: usize = 500;

/// One short-form entry: copy a Node label or annotation (an exact key or a
/// glob) onto the Pod.
#[derive(Debug, Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    rename_all = "camelCase",
    expecting = "a copy entry, a map such as `{label: topology.kubernetes.io/zone}` or `{annotation: example.com/rack}`"
)]
pub struct CopyEntry {
    /// Node label key or glob to read. Exactly one of `label` / `annotation`.
    pub label: Option<String>,
    /// Node annotation key or glob to read.
    pub annotation: Option<String>,
    /// Where the value goes on the Pod.
    #[serde(default)]
    pub to: Destination,
    /// New key for the value (exact `label`/`annotation` only).
    pub rename: Option<String>,
    /// Prefix put in front of every produced key.
    pub add_prefix: Option<String>,
    /// Replace the leading `from` of every produced key by `to`.
    pub replace_prefix: Option<ReplacePrefix>,
    /// Value to write when the Node lacks the key (exact keys only). Without it
    /// the key is skipped.
    pub default: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplacePrefix {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum Destination {
    #[default]
    Annotations,
    /// Pod labels. On a Binding they reach the Pod only where the
    /// `PodTopologyLabelsAdmission` feature gate is on (beta and on by default
    /// from Kubernetes 1.35); on older clusters they are silently dropped.
    Labels,
    Both,
}

impl TryFrom<String> for Destination {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        match value.as_str() {
            "annotations" | "annotation" => Ok(Destination::Annotations),
            "labels" | "label" => Ok(Destination::Labels),
            "both" => Ok(Destination::Both),
            _ => Err(format!(
                "unknown value {value:?}: expected `annotations`, `labels` or `both`"
            )),
        }
    }
}

impl Destination {
    pub fn annotations(self) -> bool {
        matches!(self, Destination::Annotations | Destination::Both)
    }
    pub fn labels(self) -> bool {
        matches!(self, Destination::Labels | Destination::Both)
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum FailurePolicy {
    /// Accept the request unchanged, with a warning naming the Node and cause.
    #[default]
    Ignore,
    /// Reject the request with that message.
    Fail,
}

impl TryFrom<String> for FailurePolicy {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        match value.as_str() {
            "Ignore" => Ok(FailurePolicy::Ignore),
            "Fail" => Ok(FailurePolicy::Fail),
            _ => Err(format!(
                "unknown value {value:?}: expected `Ignore` or `Fail`"
            )),
        }
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum PresetKeys {
    /// Overwrite them with the Node's values (or remove them when the Node has
    /// no value for them).
    #[default]
    Overwrite,
    /// Reject the Pod, naming the keys.
    Reject,
}

impl TryFrom<String> for PresetKeys {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        match value.as_str() {
            "Overwrite" => Ok(PresetKeys::Overwrite),
            "Reject" => Ok(PresetKeys::Reject),
            _ => Err(format!(
                "unknown value {value:?}: expected `Overwrite` or `Reject`"
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Label,
    Annotation,
}

impl Source {
    pub fn noun(self) -> &'static str {
        match self {
            Source::Label => "label",
            Source::Annotation => "annotation",
        }
    }
}

/// How a Node key becomes a Pod key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Naming {
    Same,
    Rename(String),
    AddPrefix(String),
    ReplacePrefix { from: String, to: String },
}

impl Naming {
    /// The Pod key for a Node key. `ReplacePrefix` leaves keys that do not
    /// start with `from` as they are.
    pub fn apply(&self, node_key: &str) -> String {
        match self {
            Naming::Same => node_key.to_string(),
            Naming::Rename(key) => key.clone(),
            Naming::AddPrefix(prefix) => format!("{prefix}{node_key}"),
            Naming::ReplacePrefix { from, to } => match node_key.strip_prefix(from.as_str()) {
                Some(rest) => format!("{to}{rest}"),
                None => node_key.to_string(),
            },
        }
    }
}

/// Where a rule came from: `settings.copy[i]`, or the built-in default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Copy(usize),
    Default,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Copy(i) => write!(f, "copy[{i}]"),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// A validated entry.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyRule {
    /// Where the rule came from, for messages.
    pub origin: Origin,
    pub source: Source,
    pub selector: KeyPattern,
    pub destination: Destination,
    pub naming: Naming,
    /// The pattern Pod keys produced by this rule follow (the selector with
    /// the naming applied). Used to decide which Pod keys the rule manages.
    pub target: KeyPattern,
    pub default: Option<String>,
}

impl CopyRule {
    /// Whether this rule may write `pod_key` when it falls under a prefix
    /// Kubernetes reserves: only when the settings name that prefix literally.
    pub fn names_prefix_of(&self, pod_key: &str) -> bool {
        match pod_key.split_once('/') {
            Some((prefix, _)) => self
                .target
                .literal_prefix()
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/')),
            None => true,
        }
    }
}

/// Validated settings, ready for the engine.
#[derive(Debug, Clone)]
pub struct PolicyPlan {
    /// The short form's entries (or the built-in default).
    pub copy: Vec<CopyRule>,
    /// Kyverno rules, run after the short form.
    pub rules: Vec<RuleSpec>,
    pub resource_kinds: Vec<ResourceKind>,
    pub failure_policy: FailurePolicy,
    pub on_preset_keys: PresetKeys,
    /// What governs each run of `rules`: one group for bare `rules` or a
    /// pasted policy, one per document of `policies`, in order.
    pub rule_groups: Vec<RuleGroup>,
}

/// Rules that came from one policy, and what governs them.
#[derive(Debug, Clone)]
pub struct RuleGroup {
    /// How many of the plan's `rules`, following the groups before.
    pub count: usize,
    pub failure_policy: FailurePolicy,
    /// Which Pod controllers its Pod rules are also generated for.
    pub autogen: Autogen,
    /// A namespaced `Policy`'s namespace: its rules see only requests in it
    /// (cluster-scoped objects have none, so they are never matched).
    pub namespace: Option<String>,
    /// A CEL policy document, which this group is instead of rules.
    pub cel: Option<Box<CelPolicy>>,
}

impl PolicyPlan {
    /// Each rule with the group it belongs to, in order.
    pub fn grouped_rules(&self) -> impl Iterator<Item = (&RuleSpec, &RuleGroup)> {
        self.rule_groups
            .iter()
            .flat_map(|group| std::iter::repeat_n(group, group.count))
            .zip(&self.rules)
            .map(|(group, rule)| (rule, group))
    }
}

/// Kyverno's autogen: a rule that matches only Pods also applies to the Pod
/// templates of these controllers (CronJob's one level deeper).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Autogen {
    pub controllers: Vec<String>,
}

/// The controllers Kyverno generates Pod rules for by default.
pub const AUTOGEN_DEFAULT: [&str; 7] = [
    "DaemonSet",
    "Deployment",
    "Job",
    "StatefulSet",
    "ReplicaSet",
    "ReplicationController",
    "CronJob",
];

impl Default for Autogen {
    fn default() -> Self {
        Autogen {
            controllers: AUTOGEN_DEFAULT.iter().map(|c| c.to_string()).collect(),
        }
    }
}

impl PolicyPlan {
    pub fn reads(&self, source: Source) -> bool {
        self.copy.iter().any(|r| r.source == source)
    }

    /// What is worth saying about settings that load but may not do what
    /// they seem to: logged when the policy is loaded.
    pub fn load_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.copy.is_empty()
            && self.rules.is_empty()
            && self.rule_groups.iter().all(|group| group.cel.is_none())
        {
            warnings.push("settings: these settings copy nothing and run no rules, so the policy changes nothing (an empty `copy` or `rules` list means nothing; leave both out for the zone and region default)".to_string());
        }
        for policy in self
            .rule_groups
            .iter()
            .filter_map(|group| group.cel.as_deref())
        {
            // Kyverno's and Kubernetes' default for these kinds is Fail: on
            // bindings, a Node that cannot be read then stops scheduling. (A
            // mutateExisting policy on the Pod being bound reads the Pod and
            // the Node in its run over the Pod, whose failures leave the
            // Binding as it is; one that does not run at admission fails
            // nothing.)
            if !policy.failure_policy_given
                && !policy.bound_pod
                && policy.runs_on_admission()
                && policy.matches_bindings()
            {
                warnings.push(format!(
                    "{}.spec.failurePolicy: {} {:?} matches pods/binding and sets no failurePolicy, so it gets Fail, the default of its kind: a Node that cannot be read (or any other error) rejects the Binding, the scheduler retries, and Pods stay pending; set `failurePolicy: Ignore` to schedule them without the metadata, or `failurePolicy: Fail` to keep this",
                    policy.at,
                    policy.kind.name(),
                    policy.name,
                ));
            }
            warnings.extend(policy.mutate_existing_warning());
        }
        for rule in &self.copy {
            // Keys under kubernetes.io/ and k8s.io/ are written only by an
            // entry that spells that prefix out; a glob that does not can
            // still meet them on a Node, and leaves them out.
            if !rule.selector.is_exact() && !rule.target.literal_prefix().contains('/') {
                let field = rule.source.noun();
                warnings.push(format!(
                    "settings.{}.{field}: glob {:?} leaves out the Node {field}s it matches under prefixes Kubernetes reserves (kubernetes.io/, k8s.io/: for example topology.kubernetes.io/zone); to copy those, add an entry that spells the prefix out, such as {{{field}: \"topology.kubernetes.io/*\"}}",
                    rule.origin,
                    rule.selector.as_str(),
                ));
            }
        }
        warnings
    }
}

/// The group a CEL policy document makes; `given`, the document's or the
/// settings' `failurePolicy`, else the kinds' default, `Fail`.
fn cel_group(mut policy: Box<CelPolicy>, given: Option<FailurePolicy>) -> RuleGroup {
    let failure_policy = given.unwrap_or(FailurePolicy::Fail);
    policy.failure_policy = failure_policy;
    policy.failure_policy_given = given.is_some();
    RuleGroup {
        count: 0,
        failure_policy,
        autogen: Autogen {
            controllers: Vec::new(),
        },
        namespace: policy.namespace.clone(),
        cel: Some(policy),
    }
}

/// The Node labels copied when the settings ask for nothing.
pub const DEFAULT_LABELS: [&str; 2] = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// Parses settings JSON, naming the path of any field that does not fit the
/// schema (`copy[1].lable: unknown field ...`).
pub fn parse(raw: &[u8]) -> Result<Settings, String> {
    if raw.iter().all(|b| b.is_ascii_whitespace()) || raw == b"null" {
        return Ok(Settings::default());
    }
    // serde would read a JSON array as a struct's fields in order; settings
    // are only ever a map.
    if raw.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err("settings: must be a JSON object of setting names and values".to_string());
    }
    // Hot path (every evaluation re-reads the settings): plain serde. Only a
    // failure pays for a second, path-tracking pass to name the field.
    if let Ok(settings) = serde_json::from_slice::<Settings>(raw) {
        return Ok(settings);
    }
    // A document of another kind fails on its first field this schema lacks;
    // name the kind instead, which is what is wrong.
    if let Ok(heads) = serde_json::from_slice::<DocumentHeads>(raw) {
        heads.check()?;
    }
    let mut de = serde_json::Deserializer::from_slice(raw);
    let settings: Settings = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = without_position(&err.into_inner());
        if path == "." {
            format!("settings: {inner}")
        } else {
            format!("settings.{path}: {inner}")
        }
    })?;
    de.end()
        .map_err(|err| format!("settings: {}", without_position(&err)))?;
    Ok(settings)
}

/// serde_json ends messages with "at line L column C"; settings reach the
/// policy re-encoded from YAML, so the position points nowhere useful.
fn without_position(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.rfind(" at line ") {
        Some(cut) if err.line() > 0 => text.get(..cut).unwrap_or(&text).to_string(),
        _ => text,
    }
}

/// How much checking [`Settings::compile`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checks {
    /// Everything: what `validate_settings` runs when policy-server loads the
    /// policy.
    Full,
    /// The structure only, for `validate` on every request. policy-server
    /// refuses to run a policy whose settings failed `validate_settings`, so
    /// the character-level key checks and conflict search would only repeat
    /// themselves on every scheduled Pod; every key and value produced is
    /// still checked before it is written.
    Structural,
}

/// Parses and fully validates: `validate_settings`.
pub fn load(raw: &[u8]) -> Result<PolicyPlan, String> {
    let plan = parse(raw)?.compile(Checks::Full)?;
    if !plan.rules.is_empty() {
        // What the rules' templates read, checked on the settings as written.
        let settings: serde_json::Value = serde_json::from_slice(raw)
            .map_err(|e| format!("settings: {}", without_position(&e)))?;
        crate::kyverno::variable_names::check(&settings)?;
    }
    Ok(plan)
}

/// Parses for an evaluation: `validate`.
pub fn load_for_request(raw: &[u8]) -> Result<PolicyPlan, String> {
    parse(raw)?.compile(Checks::Structural)
}

/// Whether settings, as policy-server sends them, may hold Kyverno rules or
/// CEL mutations. Settings with neither leave every request but bindings and
/// placed Pods alone, so `validate` need not parse them for the others.
/// (policy-server re-encodes settings, so a key is never escaped.)
pub fn may_have_rules(raw: &str) -> bool {
    raw.contains("\"rules\"") || raw.contains("\"mutations\"")
}

/// Gives each CEL policy the exceptions that name it; an exception naming
/// no policy of the settings is refused (a typo would exempt nothing).
fn attach_exceptions(
    exceptions: Vec<crate::cel::exception::CelException>,
    sources: &mut [(String, Vec<RuleSpec>, RuleGroup)],
) -> Result<(), String> {
    for exception in exceptions {
        for (j, reference) in exception.spec.policy_refs.iter().enumerate() {
            let named = sources.iter().any(|(_, _, group)| {
                group.cel.as_ref().is_some_and(|policy| {
                    policy.kind.name() == reference.kind && policy.name == reference.name
                })
            });
            if !named {
                return Err(format!(
                    "{}.spec.policyRefs[{j}]: no {} named {:?} among settings.policies",
                    exception.at, reference.kind, reference.name
                ));
            }
        }
        for (_, _, group) in sources.iter_mut() {
            if let Some(policy) = group.cel.as_mut()
                && exception.applies_to(policy.kind.name(), &policy.name)
            {
                policy.exceptions.push(exception.clone());
            }
        }
    }
    Ok(())
}

impl Settings {
    pub fn compile(mut self, checks: Checks) -> Result<PolicyPlan, String> {
        let pasted = self.pasted_document(checks)?;
        // The zone/region default is for settings that ask for nothing: an
        // explicit `rules` list (or a pasted policy), even an empty one, says
        // what to do, as `copy: []` does.
        let rules_given = self.rules.is_some() || pasted.is_some() || self.policies.is_some();
        // Each source of rules, with the path its rules are named by.
        let mut sources: Vec<(String, Vec<RuleSpec>, RuleGroup)> = Vec::new();
        // What the short form's step follows: the settings' failurePolicy, or
        // a pasted policy's when the settings are one (documents under
        // `policies` each keep theirs to their own rules).
        let mut failure_policy = self.failure_policy.unwrap_or_default();
        match (self.rules.take(), pasted, self.policies.take()) {
            (None, None, None) => {}
            (Some(rules), None, None) => sources.push((
                "settings.rules".to_string(),
                rules,
                RuleGroup {
                    count: 0,
                    failure_policy,
                    autogen: Autogen::default(),
                    namespace: None,
                    cel: None,
                },
            )),
            (None, Some(Document::Cel(policy)), None) => {
                let given = match (self.failure_policy, policy.spec.failure_policy) {
                    (Some(a), Some(b)) if a != b => {
                        return Err("settings.failurePolicy: contradicts the pasted policy's spec.failurePolicy; keep one".to_string());
                    }
                    (settings, document) => settings.or(document),
                };
                // Kyverno's and Kubernetes' default for these kinds.
                failure_policy = given.unwrap_or(FailurePolicy::Fail);
                sources.push((String::new(), Vec::new(), cel_group(policy, given)));
            }
            (None, Some(Document::Exception(_)), None) => {
                return Err("settings.kind: a PolicyException on its own exempts nothing; put it under `policies`, beside the policies it names".to_string());
            }
            (None, Some(Document::Kyverno(document)), None) => {
                failure_policy = match (self.failure_policy, document.failure_policy) {
                    (Some(a), Some(b)) if a != b => {
                        return Err("settings.failurePolicy: contradicts the pasted policy's spec.failurePolicy; keep one".to_string());
                    }
                    (Some(policy), _) | (None, Some(policy)) => policy,
                    (None, None) => FailurePolicy::default(),
                };
                sources.push((
                    "settings.spec.rules".to_string(),
                    document.rules,
                    RuleGroup {
                        count: 0,
                        failure_policy,
                        autogen: document.autogen,
                        namespace: document.namespace,
                        cel: None,
                    },
                ));
            }
            (None, None, Some(documents)) => {
                let mut exceptions = Vec::new();
                for (i, document) in documents.into_iter().enumerate() {
                    let at = format!("settings.policies[{i}]");
                    let document = match document.read(&at, checks)? {
                        Document::Exception(exception) => {
                            exceptions.push(*exception);
                            continue;
                        }
                        Document::Cel(policy) => {
                            let given = policy.spec.failure_policy.or(self.failure_policy);
                            sources.push((String::new(), Vec::new(), cel_group(policy, given)));
                            continue;
                        }
                        Document::Kyverno(document) => document,
                    };
                    // A document's own failurePolicy wins; the settings'
                    // applies to those that have none.
                    let group_failure_policy = document.failure_policy.unwrap_or(failure_policy);
                    sources.push((
                        format!("{at}.spec.rules"),
                        document.rules,
                        RuleGroup {
                            count: 0,
                            failure_policy: group_failure_policy,
                            autogen: document.autogen,
                            namespace: document.namespace,
                            cel: None,
                        },
                    ));
                }
                attach_exceptions(exceptions, &mut sources)?;
            }
            _ => {
                return Err(
                    "settings: `rules`, a pasted policy and `policies` are alternatives; keep one"
                        .to_string(),
                );
            }
        }
        let total: usize = sources.iter().map(|source| source.1.len()).sum();
        if total > crate::kyverno::MAX_RULES {
            return Err(format!(
                "settings: {total} rules in all; at most {} are allowed",
                crate::kyverno::MAX_RULES
            ));
        }
        let mut rules = Vec::with_capacity(total);
        let mut rule_groups = Vec::with_capacity(sources.len());
        for (at, group_rules, mut group) in sources {
            if checks == Checks::Full && group.cel.is_none() {
                crate::kyverno::check(&group_rules, &self.resource_kinds, &at)?;
            }
            if !crate::kyverno::autogen::eligible(&group_rules) {
                group.autogen.controllers.clear();
            }
            group.count = group_rules.len();
            rule_groups.push(group);
            rules.extend(group_rules);
        }
        if let Some(entries) = &self.copy
            && entries.len() > MAX_COPY_ENTRIES
        {
            return Err(format!(
                "settings.copy: {} entries; at most {MAX_COPY_ENTRIES} are allowed, so that one evaluation's work stays bounded",
                entries.len()
            ));
        }
        let copy = match self.copy {
            // The built-in default is for settings that ask for nothing: a
            // pasted Kyverno policy acts through its rules alone.
            None if rules_given => Vec::new(),
            None => DEFAULT_LABELS
                .iter()
                .map(|key| default_rule(key, checks))
                .collect::<Result<Vec<_>, _>>()?,
            Some(entries) => entries
                .into_iter()
                .enumerate()
                .map(|(i, entry)| entry.compile(Origin::Copy(i), checks))
                .collect::<Result<Vec<_>, _>>()?,
        };
        if checks == Checks::Full {
            check_conflicts(&copy)?;
        }
        Ok(PolicyPlan {
            copy,
            rules,
            resource_kinds: self.resource_kinds,
            failure_policy,
            on_preset_keys: self.on_preset_keys,
            rule_groups,
        })
    }

    /// The settings themselves as a pasted policy document, when they are one.
    fn pasted_document(&mut self, checks: Checks) -> Result<Option<Document>, String> {
        let pasted = self.spec.is_some() || self.kind.is_some() || self.api_version.is_some();
        if !pasted {
            if self.params.is_some() {
                return Err("settings.params: only a pasted MutatingAdmissionPolicy with a spec.paramKind takes parameters".to_string());
            }
            if self.metadata.is_some() {
                return Err("settings.metadata: only a whole policy document (apiVersion, kind, metadata, spec) has metadata".to_string());
            }
            return Ok(None);
        }
        let document = PolicyDocument {
            api_version: self.api_version.take(),
            kind: self.kind.take(),
            metadata: self.metadata.take(),
            spec: self.spec.take(),
            params: self.params.take(),
            status: None,
        };
        document.read("settings", checks).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(s: &str) -> Result<PolicyPlan, String> {
        load(s.as_bytes())
    }

    #[test]
    fn empty_settings_copy_zone_and_region_labels_to_annotations() {
        for raw in ["{}", "", "null"] {
            let plan = load_str(raw).unwrap();
            let keys: Vec<_> = plan.copy.iter().map(|r| r.selector.as_str()).collect();
            assert_eq!(keys, DEFAULT_LABELS);
            assert!(
                plan.copy
                    .iter()
                    .all(|r| r.destination == Destination::Annotations
                        && r.source == Source::Label
                        && r.naming == Naming::Same)
            );
            assert_eq!(plan.failure_policy, FailurePolicy::Ignore);
        }
    }

    #[test]
    fn request_time_loading_builds_the_same_plan() {
        let raw = br#"{"copy":[
            {"label":"node.kubernetes.io/instance-type","rename":"example.com/instance-type","default":"unknown","to":"both"},
            {"annotation":"rack.example.com/*","replacePrefix":{"from":"rack.example.com/","to":"node.example.com/"}},
            {"label":"zone*","addPrefix":"node-"},{"label":"a?b"}]}"#;
        assert_eq!(load(raw).unwrap().copy, load_for_request(raw).unwrap().copy);
        assert_eq!(
            load(b"{}").unwrap().copy,
            load_for_request(b"{}").unwrap().copy
        );
        // Structure is still checked on every request.
        assert!(load_for_request(br#"{"copy":[{"label":"a/*","rename":"b"}]}"#).is_err());
    }

    #[test]
    fn kyverno_rules_and_huge_lists_are_refused_with_the_reason() {
        let msg = refused(
            r#"{"rules":[{"name":"x","match":{"any":[{"resources":{"kinds":["Pod"]}}]},"validate":{}}]}"#,
        );
        assert!(
            msg.starts_with("settings.rules[0].validate: validate rules are not supported"),
            "{msg}"
        );
        let plan = load_str(r#"{"rules":[{"name":"x","match":{"any":[{"resources":{"kinds":["Pod"]}}]},"mutate":{"patchStrategicMerge":{"metadata":{"labels":{"a":"b"}}}}}]}"#).unwrap();
        assert!(plan.copy.is_empty(), "rules alone: no built-in default");
        assert_eq!(plan.rules.len(), 1);
        let many: Vec<String> = (0..=MAX_COPY_ENTRIES)
            .map(|i| format!(r#"{{"label":"k{i}"}}"#))
            .collect();
        let msg = refused(&format!(r#"{{"copy":[{}]}}"#, many.join(",")));
        assert_eq!(
            msg,
            "settings.copy: 501 entries; at most 500 are allowed, so that one evaluation's work stays bounded"
        );
    }

    #[test]
    fn explicit_empty_list_copies_nothing() {
        assert!(load_str(r#"{"copy": []}"#).unwrap().copy.is_empty());
    }

    #[test]
    fn an_empty_rule_list_runs_nothing_instead_of_the_default() {
        for settings in [
            r#"{"rules": []}"#.to_string(),
            document("{}", "").replace(&format!("[{}]", pod_rule()), "[]"),
        ] {
            let plan = load_str(&settings).unwrap();
            assert!(plan.copy.is_empty() && plan.rules.is_empty(), "{settings}");
        }
        // With rules and no `copy`, still no default either.
        assert!(load_str(&document("{}", "")).unwrap().copy.is_empty());
    }

    #[test]
    fn copy_entries_written_as_strings_say_what_to_write() {
        let msg = refused(r#"{"copy": ["topology.kubernetes.io/zone"]}"#);
        assert_eq!(
            msg,
            "settings.copy[0]: invalid type: string \"topology.kubernetes.io/zone\", expected a copy entry, a map such as `{label: topology.kubernetes.io/zone}` or `{annotation: example.com/rack}`"
        );
    }

    #[test]
    fn other_policy_kinds_are_refused_by_kind() {
        let validating = r#"{"apiVersion":"policies.kyverno.io/v1","kind":"ValidatingPolicy","metadata":{"name":"v"},
            "spec":{"matchConstraints":{"resourceRules":[]},"validations":[]}}"#;
        let msg = refused(validating);
        assert!(
            msg.starts_with("settings.kind: ValidatingPolicy (policies.kyverno.io) validates; this policy mutates, and takes a Kyverno ClusterPolicy or Policy"),
            "{msg}"
        );
        let msg = refused(
            &validating
                .replace("\"ValidatingPolicy\"", "\"ValidatingAdmissionPolicy\"")
                .replace("policies.kyverno.io/v1", "admissionregistration.k8s.io/v1"),
        );
        assert!(
            msg.starts_with(
                "settings.kind: ValidatingAdmissionPolicy (admissionregistration.k8s.io) validates"
            ),
            "{msg}"
        );
        let msg = refused(&validating.replace("ValidatingPolicy", "GeneratingPolicy"));
        assert!(
            msg.starts_with(
                "settings.kind: GeneratingPolicy (policies.kyverno.io) generates resources"
            ),
            "{msg}"
        );
        let msg = refused(r#"{"apiVersion":"kyverno.io/v1","kind":"Pod"}"#);
        assert!(
            msg.starts_with("settings.kind: \"Pod\" is not a policy"),
            "{msg}"
        );
        let msg =
            refused(r#"{"apiVersion":"policies.kyverno.io/v1","kind":"ClusterPolicy","spec":{}}"#);
        assert_eq!(
            msg,
            "settings.apiVersion: \"policies.kyverno.io/v1\": a pasted Kyverno ClusterPolicy must be kyverno.io/v1 (or kyverno.io/v2beta1)"
        );
        assert!(!msg.contains("Some("), "{msg}");
        let msg = refused(r#"{"kind":"ClusterPolicy","spec":{}}"#);
        assert!(msg.starts_with("settings.apiVersion: missing"), "{msg}");
    }

    #[test]
    fn full_entry_parses() {
        let plan = load_str(
            r#"{"copy":[
                {"label":"node.kubernetes.io/instance-type","rename":"example.com/instance-type","default":"unknown","to":"both"},
                {"annotation":"rack.example.com/*","replacePrefix":{"from":"rack.example.com/","to":"node.example.com/"}},
                {"label":"zone*","addPrefix":"node-"}
             ],"failurePolicy":"Fail","onPresetKeys":"Reject"}"#,
        )
        .unwrap();
        assert_eq!(plan.copy.len(), 3);
        assert_eq!(plan.failure_policy, FailurePolicy::Fail);
        assert_eq!(plan.on_preset_keys, PresetKeys::Reject);
        assert_eq!(plan.copy[1].target.as_str(), "node.example.com/*");
        assert_eq!(plan.copy[2].naming.apply("zone-a"), "node-zone-a");
    }

    fn refused(raw: &str) -> String {
        load_str(raw).unwrap_err()
    }

    #[test]
    fn unknown_fields_name_their_path() {
        let msg = refused(r#"{"copy":[{"lable":"x"}]}"#);
        assert!(
            msg.starts_with("settings.copy[0].lable: unknown field `lable`"),
            "{msg}"
        );
        let msg = refused(r#"{"nodeLabels":[]}"#);
        assert!(msg.contains("unknown field `nodeLabels`"), "{msg}");
    }

    #[test]
    fn wrong_types_name_their_path() {
        let msg = refused(r#"{"copy":{"label":"x"}}"#);
        assert!(
            msg.starts_with("settings.copy: invalid type: map, expected a sequence"),
            "{msg}"
        );
        let msg = refused(r#"{"copy":[{"label":"x","to":"pod"}]}"#);
        assert_eq!(
            msg,
            "settings.copy[0].to: unknown value \"pod\": expected `annotations`, `labels` or `both`"
        );
        let msg = refused(r#"{"failurePolicy":"fail"}"#);
        assert_eq!(
            msg,
            "settings.failurePolicy: unknown value \"fail\": expected `Ignore` or `Fail`"
        );
        let msg = refused(r#"{"onPresetKeys":true}"#);
        assert_eq!(
            msg,
            "settings.onPresetKeys: invalid type: boolean `true`, expected a string"
        );
        for not_a_map in ["[1]", "3", "\"copy\""] {
            assert_eq!(
                refused(not_a_map),
                "settings: must be a JSON object of setting names and values"
            );
        }
    }

    #[test]
    fn invalid_keys_and_globs() {
        let msg = refused(r#"{"copy":[{"label":"topology.kubernetes.io/[zone]"}]}"#);
        assert!(
            msg.starts_with(
                "settings.copy[0].label: \"topology.kubernetes.io/[zone]\" character '['"
            ),
            "{msg}"
        );
        let msg = refused(r#"{"copy":[{"annotation":"Example.com/zone"}]}"#);
        assert!(
            msg.contains("settings.copy[0].annotation") && msg.contains("DNS subdomain"),
            "{msg}"
        );
        let msg = refused(r#"{"copy":[{"label":"zone","rename":"bad key"}]}"#);
        assert!(
            msg.starts_with("settings.copy[0].rename: \"bad key\" is not a valid key"),
            "{msg}"
        );
    }

    #[test]
    fn contradictory_entries() {
        let msg = refused(r#"{"copy":[{"label":"a","annotation":"b"}]}"#);
        assert!(msg.contains("not both"), "{msg}");
        let msg = refused(r#"{"copy":[{"to":"labels"}]}"#);
        assert!(msg.contains("missing `label` or `annotation`"), "{msg}");
        let msg = refused(r#"{"copy":[{"label":"a/*","rename":"b"}]}"#);
        assert!(
            msg.starts_with("settings.copy[0].rename: cannot rename the keys of glob"),
            "{msg}"
        );
        let msg = refused(r#"{"copy":[{"label":"a/*","default":"x"}]}"#);
        assert!(
            msg.starts_with("settings.copy[0].default: a default needs one exact key"),
            "{msg}"
        );
        let msg = refused(r#"{"copy":[{"label":"a","rename":"b","addPrefix":"c"}]}"#);
        assert!(msg.contains("alternatives"), "{msg}");
        let msg = refused(
            r#"{"copy":[{"label":"a.io/*","replacePrefix":{"from":"b.io/","to":"c.io/"}}]}"#,
        );
        assert!(
            msg.starts_with("settings.copy[0].replacePrefix.from: \"b.io/\" is not a prefix"),
            "{msg}"
        );
        let msg =
            refused(r#"{"copy":[{"label":"a","rename":"z"},{"annotation":"b","rename":"z"}]}"#);
        assert!(msg.starts_with("settings.copy[1]: writes Pod annotation \"z\", which settings.copy[0] already writes"), "{msg}");
        // Same key to labels and to annotations is not a conflict.
        assert!(load_str(r#"{"copy":[{"label":"a","rename":"z","to":"labels"},{"annotation":"b","rename":"z"}]}"#).is_ok());
    }

    #[test]
    fn prefixes_that_make_every_key_invalid_are_refused() {
        let msg = refused(
            r#"{"copy":[{"label":"topology.kubernetes.io/*","addPrefix":"node.example.com/"}]}"#,
        );
        assert!(msg.starts_with("settings.copy[0].addPrefix: produces keys like \"node.example.com/topology.kubernetes.io/*\""), "{msg}");
        let msg = refused(
            r#"{"copy":[{"label":"a.io/*","replacePrefix":{"from":"a.io/","to":"Bad_Prefix/"}}]}"#,
        );
        assert!(
            msg.starts_with("settings.copy[0].replacePrefix.to:"),
            "{msg}"
        );
    }

    #[test]
    fn label_defaults_must_be_label_values() {
        let msg = refused(r#"{"copy":[{"label":"a","to":"labels","default":"not valid!"}]}"#);
        assert!(
            msg.starts_with("settings.copy[0].default: \"not valid!\" cannot be a label value"),
            "{msg}"
        );
        assert!(
            load_str(r#"{"copy":[{"label":"a","default":"any text is fine for annotations!"}]}"#)
                .is_ok()
        );
    }

    #[test]
    fn reserved_prefix_naming() {
        let plan = load_str(
            r#"{"copy":[{"label":"topology.kubernetes.io/*"},{"label":"*"},{"label":"*zone*"}]}"#,
        )
        .unwrap();
        assert!(plan.copy[0].names_prefix_of("topology.kubernetes.io/zone"));
        assert!(!plan.copy[1].names_prefix_of("topology.kubernetes.io/zone"));
        assert!(!plan.copy[2].names_prefix_of("topology.kubernetes.io/zone"));
    }

    fn pod_rule() -> &'static str {
        r#"{"name":"r","match":{"any":[{"resources":{"kinds":["Pod"]}}]},"mutate":{"patchStrategicMerge":{"metadata":{"labels":{"a":"b"}}}}}"#
    }

    fn document(metadata: &str, spec_extra: &str) -> String {
        format!(
            r#"{{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{metadata},"spec":{{"background":false,{spec_extra}"rules":[{}]}}}}"#,
            pod_rule()
        )
    }

    #[test]
    fn a_whole_policy_document_is_settings() {
        let plan = load_str(&document(r#"{"name":"p","uid":"x"}"#, "")).unwrap();
        assert_eq!(plan.rules.len(), 1);
        assert!(
            plan.copy.is_empty(),
            "a pasted policy acts through its rules alone"
        );
        assert_eq!(plan.failure_policy, FailurePolicy::Ignore);
        assert_eq!(plan.rule_groups[0].autogen, Autogen::default());
        let plan = load_str(&document("{}", r#""failurePolicy":"Fail","#)).unwrap();
        assert_eq!(plan.failure_policy, FailurePolicy::Fail);
    }

    #[test]
    fn the_autogen_annotation_chooses_the_controllers() {
        let annotated = |value: &str| {
            document(
                &format!(
                    r#"{{"annotations":{{"pod-policies.kyverno.io/autogen-controllers":"{value}"}}}}"#
                ),
                "",
            )
        };
        assert!(
            load_str(&annotated("none")).unwrap().rule_groups[0]
                .autogen
                .controllers
                .is_empty()
        );
        assert_eq!(
            load_str(&annotated("Deployment, CronJob"))
                .unwrap()
                .rule_groups[0]
                .autogen
                .controllers,
            ["Deployment", "CronJob"]
        );
        let msg = refused(&annotated("Deployment,Pod"));
        assert!(msg.contains("\"Pod\" is not a Pod controller"), "{msg}");
        // A rule on other kinds turns autogen off for the whole policy, as in Kyverno.
        let mixed = r#"{"rules":[{"name":"a","match":{"any":[{"resources":{"kinds":["Pod"]}}]},"mutate":{"patchStrategicMerge":{}}},{"name":"b","match":{"any":[{"resources":{"kinds":["Service"]}}]},"mutate":{"patchStrategicMerge":{}}}]}"#;
        assert!(
            load_str(mixed).unwrap().rule_groups[0]
                .autogen
                .controllers
                .is_empty()
        );
    }

    #[test]
    fn pasted_documents_are_checked() {
        let msg = refused(&document("{}", "").replace("kyverno.io/v1", "policies.kyverno.io/v1"));
        assert!(msg.starts_with("settings.apiVersion:"), "{msg}");
        // A ClusterPolicy's spec under another kind: read by that kind's schema.
        let msg = refused(&document("{}", "").replace("ClusterPolicy", "MutatingPolicy"));
        assert!(
            msg.starts_with(
                "settings.apiVersion: \"kyverno.io/v1\": a MutatingPolicy is policies.kyverno.io/v1"
            ),
            "{msg}"
        );
        let both = document("{}", "").replacen('{', &format!("{{\"rules\":[{}],", pod_rule()), 1);
        assert!(refused(&both).contains("alternatives"));
        let contradiction = document("{}", r#""failurePolicy":"Fail","#).replacen(
            '{',
            r#"{"failurePolicy":"Ignore","#,
            1,
        );
        assert!(refused(&contradiction).starts_with("settings.failurePolicy: contradicts"));
        assert!(refused(&document("{}", r#""applyRules":"One","#)).contains("applyRules"));
        assert!(refused(r#"{"metadata":{}}"#).starts_with("settings.metadata:"));
        assert!(refused(&document("{}", r#""typo":1,"#)).contains("settings.spec.typo"));
    }

    #[test]
    fn a_namespaced_policy_keeps_to_its_namespace() {
        let policy = |metadata: &str| document(metadata, "").replace("ClusterPolicy", "Policy");
        let plan = load_str(&policy(r#"{"name":"p","namespace":"team-a"}"#)).unwrap();
        assert_eq!(plan.rule_groups[0].namespace.as_deref(), Some("team-a"));
        let plan = load_str(&policy(r#"{"name":"p"}"#)).unwrap();
        assert_eq!(
            plan.rule_groups[0].namespace.as_deref(),
            Some("default"),
            "written without one, it lands in default as kubectl would put it"
        );
        let msg = refused(&policy(r#"{"namespace":"Team_A"}"#));
        assert!(
            msg.starts_with("settings.metadata.namespace: \"Team_A\" is not a namespace name"),
            "{msg}"
        );
        assert_eq!(
            load_str(&document("{}", "")).unwrap().rule_groups[0].namespace,
            None
        );
    }
}
