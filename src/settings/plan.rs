//! The plan settings compile into ([`super::compile`]): the short form's copy
//! rules, and the groups of Kyverno rules and CEL policies, in order, with
//! what each does on failure.

use crate::cel::CelPolicy;
use crate::kyverno::spec::RuleSpec;
use crate::shared::autogen::Autogen;
use crate::shared::policy_options::FailurePolicy;
use crate::shared::resources::ResourceKind;
use crate::short_form::entry::PresetKeys;
use crate::short_form::rule::{CopyRule, Source};

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
    /// Whether the document or the settings gave `failure_policy` (else it
    /// is the default of the document's kind).
    pub failure_policy_given: bool,
    /// The policy, for messages: `ClusterPolicy "name"`; empty for bare `rules`.
    pub label: String,
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

impl PolicyPlan {
    /// What every Namespace read of a request asks for: the union of what
    /// the policies read of one. A Kyverno rule's namespaceSelector reads the
    /// labels; a CEL policy's `namespaceObject` may read any field.
    pub fn namespace_masks(&self) -> &'static [&'static str] {
        if self.rule_groups.iter().any(|group| group.cel.is_some()) {
            &[]
        } else {
            &["metadata.labels"]
        }
    }

    pub fn reads(&self, source: Source) -> bool {
        self.copy.iter().any(|r| r.source == source)
    }

    /// The plan with its CEL policies run by `evaluators`.
    pub fn with_evaluators(mut self, evaluators: crate::cel::program::Evaluators) -> Self {
        for group in &mut self.rule_groups {
            if let Some(policy) = group.cel.as_mut() {
                policy.evaluators = evaluators;
            }
        }
        self
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
            warnings.extend(crate::cel::policy::targets::warning(policy));
            warnings.extend(crate::cel::autogen_warning(policy));
        }
        // Kyverno's default for a ClusterPolicy or Policy is Fail too.
        let mut warned: Option<&RuleGroup> = None;
        for (rule, group) in self.grouped_rules() {
            if group.failure_policy_given
                || group.failure_policy != FailurePolicy::Fail
                || warned.is_some_and(|last| std::ptr::eq(last, group))
                || !crate::kyverno::matching::may_match_bindings(rule)
            {
                continue;
            }
            warned = Some(group);
            warnings.push(format!(
                "{}: rule {:?} matches pods/binding and sets no failurePolicy, so it gets Fail, Kyverno's default (spec.webhookConfiguration.failurePolicy, then spec.failurePolicy, else Fail): a Node that cannot be read (or any other rule error) rejects the Binding, the scheduler retries, and Pods stay pending; set `failurePolicy: Ignore` to schedule them without the metadata, or `failurePolicy: Fail` to keep this",
                group.label, rule.name,
            ));
        }
        // Kyverno's rule for Pod controllers is not always the Pod rule.
        for (rule, group) in self.grouped_rules() {
            if group.autogen.controllers.is_empty() {
                continue;
            }
            if let Some(why) = crate::kyverno::autogen::generated_warning(rule) {
                warnings.push(format!(
                    "{}rule {:?}: Kyverno's autogen rule for {} {why}; name the controllers the rule suits in the pod-policies.kyverno.io/autogen-controllers annotation (none for none)",
                    if group.label.is_empty() { String::new() } else { format!("{}: ", group.label) },
                    rule.name,
                    group.autogen.controllers.join(", "),
                ));
            }
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
pub(super) fn cel_group(mut policy: Box<CelPolicy>, given: Option<FailurePolicy>) -> RuleGroup {
    let failure_policy = given.unwrap_or(FailurePolicy::Fail);
    policy.failure_policy = failure_policy;
    policy.failure_policy_given = given.is_some();
    RuleGroup {
        count: 0,
        failure_policy,
        failure_policy_given: given.is_some(),
        label: format!("{} {:?}", policy.kind.name(), policy.name),
        autogen: Autogen {
            controllers: Vec::new(),
        },
        namespace: policy.namespace.clone(),
        cel: Some(policy),
    }
}
