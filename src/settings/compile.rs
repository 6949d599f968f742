//! Compiling settings into a [`PolicyPlan`]: the short form's entries into
//! copy rules, every Kyverno rule and CEL document checked and grouped, and
//! exceptions attached to the policies they name. Everything that can be
//! wrong with settings is found here, at load, with the field's path.

use super::documents::{Document, PolicyDocument, without_position};
use super::plan::{PolicyPlan, RuleGroup, cel_group};
use super::schema::{Settings, parse};
use crate::kyverno::spec::RuleSpec;
use crate::shared::autogen::Autogen;
use crate::shared::policy_options::{Checks, FailurePolicy};
use crate::short_form::compile::{check_conflicts, default_rule};
use crate::short_form::entry::{DEFAULT_LABELS, MAX_COPY_ENTRIES};
use crate::short_form::rule::Origin;

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
    exceptions: Vec<crate::cel::policy::exception::CelException>,
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
                    // The settings' default, not a document's.
                    failure_policy_given: true,
                    // Messages name the rule alone.
                    label: String::new(),
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
                let given = match (self.failure_policy, document.failure_policy) {
                    (Some(a), Some(b)) if a != b => {
                        return Err("settings.failurePolicy: contradicts the pasted policy's spec.failurePolicy; keep one".to_string());
                    }
                    (settings, document) => settings.or(document),
                };
                // Kyverno's default for a ClusterPolicy or Policy.
                failure_policy = given.unwrap_or(FailurePolicy::Fail);
                sources.push((
                    "settings.spec.rules".to_string(),
                    document.rules,
                    RuleGroup {
                        count: 0,
                        failure_policy,
                        failure_policy_given: given.is_some(),
                        label: document.label,
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
                    // applies to those that have none, else Kyverno's
                    // default.
                    let given = document.failure_policy.or(self.failure_policy);
                    sources.push((
                        format!("{at}.spec.rules"),
                        document.rules,
                        RuleGroup {
                            count: 0,
                            failure_policy: given.unwrap_or(FailurePolicy::Fail),
                            failure_policy_given: given.is_some(),
                            label: document.label,
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
