//! One pipeline for both forms of the settings. They compile to steps (the
//! short form's Node-metadata step, then each Kyverno rule) that run in
//! order over one object: every step sees what the steps before it wrote,
//! and a step that fails is judged by `failurePolicy` the same way whichever
//! form it came from.

use std::cell::OnceCell;
use std::rc::Rc;

use jmespath::Rcvar;
use serde_json::Value;

use crate::admission::identity;
use crate::admission::object::Object;
use crate::admission::{AdmissionRequest, Subject};
use crate::cel::CelPolicy;
use crate::cel::engine::CelResult;
use crate::cel::eval::request::CelRequest;
use crate::host::cluster::{CachedCluster, Cluster};
use crate::host::node_lookup::{self, NodeFields, NodeLookup};
use crate::kyverno;
use crate::kyverno::engine::{Engine, RuleResult};
use crate::kyverno::spec::RuleSpec;
use crate::settings::{PolicyPlan, RuleGroup};
use crate::shared::policy_options::FailurePolicy;
use crate::shared::request_facts::RequestFacts;
use crate::short_form::apply::{self, ObjectKind};
use crate::short_form::rule::Source;

/// One step of the pipeline.
pub enum Step<'p> {
    /// The short form (or the zone/region default): on a Binding or a Pod
    /// created on a Node, read that Node and write the chosen keys.
    NodeMetadata,
    /// A Kyverno rule, with what governs the policy it came from.
    Rule(&'p RuleSpec, &'p RuleGroup),
    /// A CEL policy document (MutatingPolicy, MutatingAdmissionPolicy).
    Cel(&'p CelPolicy, &'p RuleGroup),
}

impl PolicyPlan {
    /// The settings as steps, in the order they run.
    pub fn steps(&self) -> Vec<Step<'_>> {
        let mut steps = Vec::new();
        if !self.copy.is_empty() {
            steps.push(Step::NodeMetadata);
        }
        let mut rules = self.rules.iter();
        for group in &self.rule_groups {
            if let Some(policy) = &group.cel {
                steps.push(Step::Cel(policy, group));
            }
            for rule in rules.by_ref().take(group.count) {
                steps.push(Step::Rule(rule, group));
            }
        }
        steps
    }
}

/// How a step ended when it did not simply apply or skip.
enum StepError {
    /// The step could not do its work: `failurePolicy` decides.
    Failed {
        message: String,
        /// The warning when the failure is ignored.
        ignored: String,
    },
    /// The user asked for this request to be refused (`onPresetKeys: Reject`).
    Reject(String),
    /// The rule applied, but left metadata the API server refuses: the
    /// request is refused once every policy has run, if the object still
    /// has it (a later rule may write over the key; one that fails under
    /// `Ignore` drops its policy's changes, and this with them).
    Refused { message: String, changed: bool },
}

/// What the pipeline did.
#[derive(Default)]
pub struct Outcome<'a> {
    /// The object as mutated (when there was one to mutate).
    pub object: Option<Object<'a>>,
    pub changed: bool,
    pub warnings: Vec<String>,
    /// Set when the request must be refused, with the reason.
    pub rejection: Option<String>,
    /// Audit annotations CEL policies wrote (`<policy>/<key>`).
    pub audit_annotations: Vec<(String, String)>,
}

/// A Kyverno policy's rules apply together, as Kyverno's webhook applies
/// them: when one fails under `Ignore`, the changes of the policy's rules
/// before it are dropped and the rules after it do not run. `before` is the
/// object as the policy found it, kept while a policy of more than one rule
/// runs (a rule that fails leaves the object as it was, so one rule needs
/// no copy).
struct PolicyRun<'p> {
    group: &'p RuleGroup,
    before: Option<(Value, bool)>,
    failed: bool,
    /// Why the API server would refuse what the policy's rules wrote.
    refusal: Option<String>,
}

impl<'p> PolicyRun<'p> {
    fn start(group: &'p RuleGroup, outcome: &mut Outcome) -> Self {
        let changed = outcome.changed;
        let before = match outcome.object.as_mut() {
            Some(object) if group.count > 1 => {
                object.whole().ok().map(|object| (object.clone(), changed))
            }
            _ => None,
        };
        PolicyRun {
            group,
            before,
            failed: false,
            refusal: None,
        }
    }

    /// The policy has run: the refusal its changes earn, unless they went.
    fn finish(self) -> Option<String> {
        self.refusal.filter(|_| !self.failed)
    }

    /// A rule failed under `Ignore`: the policy's changes go.
    fn drop_changes(&mut self, outcome: &mut Outcome) {
        self.failed = true;
        if let Some((object, changed)) = self.before.take() {
            if let Some(current) = outcome.object.as_mut().and_then(|o| o.whole().ok()) {
                *current = object;
            }
            outcome.changed = changed;
        }
    }
}

/// What the rules read, prepared once, when the first rule runs.
struct RuleInputs<'s> {
    request: Rcvar,
    facts: Rc<RequestFacts>,
    functions: kyverno::jmes::Functions<'s>,
    config_map_masks: kyverno::references::ConfigMapMasks<'s>,
}

/// What CEL policies read, prepared once, when the first one runs.
struct CelInputs {
    facts: Rc<RequestFacts>,
    /// `request` and `oldObject` as CEL values, made when a policy reads them.
    request: OnceCell<::cel::Value>,
    old_object: OnceCell<::cel::Value>,
    old_object_json: OnceCell<Value>,
}

pub struct Pipeline<'a> {
    pub plan: &'a PolicyPlan,
    pub request: &'a AdmissionRequest<'a>,
    /// The settings text: the rules' functions are picked from it.
    pub raw_settings: &'a str,
    pub lookup: &'a dyn NodeLookup,
    pub cluster: &'a dyn Cluster,
}

impl<'a> Pipeline<'a> {
    pub fn run<'o>(&self, subject: Subject<'o>) -> Outcome<'o> {
        let mut outcome = Outcome::default();
        let placement = match subject {
            Subject::Binding { node, object } => {
                outcome.object = Some(object);
                Some((node, ObjectKind::Binding))
            }
            Subject::PlacedPod { node, object } => {
                outcome.object = Some(object);
                Some((node, ObjectKind::PlacedPod))
            }
            Subject::PassThrough { why } => {
                outcome.warnings.extend(why.as_deref().map(not_handled));
                None
            }
        };
        let cluster =
            CachedCluster::new(self.cluster).with_namespace_masks(self.plan.namespace_masks());
        let mut inputs: Option<RuleInputs> = None;
        let mut policy_run: Option<PolicyRun> = None;
        let mut cel_inputs: Option<CelInputs> = None;
        // One decoding of the request's facts, whichever language runs first.
        let facts: OnceCell<Rc<RequestFacts>> = OnceCell::new();
        // A namespaced Policy sees only requests in its namespace.
        let request_namespace: Option<String> = self
            .plan
            .rule_groups
            .iter()
            .any(|group| group.namespace.is_some())
            .then(|| self.request.field::<String>("namespace"));
        // Why the API server would refuse what each policy's rules wrote: it
        // judges the object once every policy has run, so a later rule may
        // still write a valid value over the key.
        let mut refusals: Vec<String> = Vec::new();
        for step in self.plan.steps() {
            let same_policy = match (&step, &policy_run) {
                (Step::Rule(_, group), Some(run)) => std::ptr::eq(run.group, *group),
                _ => false,
            };
            if !same_policy && let Some(refusal) = policy_run.take().and_then(PolicyRun::finish) {
                refusals.push(refusal);
            }
            let failure_policy = match step {
                Step::NodeMetadata => self.plan.failure_policy,
                Step::Rule(_, group) | Step::Cel(_, group) => group.failure_policy,
            };
            let result = match step {
                Step::NodeMetadata => match (&placement, outcome.object.as_mut()) {
                    (Some((node, kind)), Some(object)) => {
                        self.node_metadata(node, object.metadata_holder(), *kind)
                    }
                    // Only Bindings and placed Pods have a Node to read.
                    _ => continue,
                },
                Step::Rule(_, group)
                    if group
                        .namespace
                        .as_ref()
                        .is_some_and(|namespace| request_namespace.as_ref() != Some(namespace)) =>
                {
                    continue;
                }
                Step::Rule(rule, group) => {
                    let Some(ready) = self.rule_inputs(&mut inputs, &facts, &mut outcome) else {
                        // Nothing to mutate (DELETE, CONNECT) or no request data.
                        break;
                    };
                    // Any run of another policy ended above.
                    let failed = policy_run
                        .get_or_insert_with(|| PolicyRun::start(group, &mut outcome))
                        .failed;
                    if failed {
                        continue;
                    }
                    self.rule(rule, group, ready, &mut outcome, &cluster)
                }
                Step::Cel(policy, _) => {
                    let Some(ready) = self.cel_inputs(&mut cel_inputs, &facts, &mut outcome) else {
                        break;
                    };
                    self.cel(policy, ready, &mut outcome, &cluster)
                }
            };
            match result {
                Ok((changed, warnings)) => {
                    outcome.changed |= changed;
                    outcome.warnings.extend(warnings);
                }
                Err(StepError::Reject(message)) => {
                    outcome.rejection = Some(message);
                    return outcome;
                }
                Err(StepError::Refused { message, changed }) => {
                    outcome.changed |= changed;
                    if let Some(run) = policy_run.as_mut() {
                        run.refusal.get_or_insert(message);
                    }
                }
                Err(StepError::Failed { message, ignored }) => {
                    // A rule's failure is its policy's (Kyverno's webhook
                    // names both); bare `rules` have no name.
                    let (message, ignored) = match step {
                        Step::Rule(_, group) if !group.label.is_empty() => (
                            format!("{}: {message}", group.label),
                            format!("{} not applied: {message}", group.label),
                        ),
                        Step::Rule(_, group) if group.count > 1 => {
                            let ignored = format!("settings.rules not applied: {message}");
                            (message, ignored)
                        }
                        _ => (message, ignored),
                    };
                    match failure_policy {
                        FailurePolicy::Fail => {
                            outcome.rejection = Some(message);
                            return outcome;
                        }
                        FailurePolicy::Ignore => {
                            if let (Step::Rule(..), Some(run)) = (&step, policy_run.as_mut()) {
                                run.drop_changes(&mut outcome);
                            }
                            outcome.warnings.push(ignored);
                        }
                    }
                }
            }
        }
        refusals.extend(policy_run.and_then(PolicyRun::finish));
        if !refusals.is_empty() {
            outcome.rejection = still_refused(&mut outcome, &refusals);
        }
        outcome
    }

    /// Decodes the request for the rules the first time one runs; the object
    /// comes from the request when no earlier step produced it.
    fn rule_inputs<'i>(
        &self,
        inputs: &'i mut Option<RuleInputs<'a>>,
        facts: &OnceCell<Rc<RequestFacts>>,
        outcome: &mut Outcome,
    ) -> Option<&'i RuleInputs<'a>> {
        if inputs.is_none() {
            let (request, received) =
                kyverno::request_data(self.request, self.raw_settings, outcome.object.is_none())?;
            if outcome.object.is_none() {
                outcome.object = received.map(Object::Whole);
            }
            outcome.object.as_ref()?;
            *inputs = Some(RuleInputs {
                request: Rc::new(request),
                functions: kyverno::jmes::Functions::for_settings(self.raw_settings),
                config_map_masks: kyverno::references::ConfigMapMasks::new(self.raw_settings),
                facts: self.facts(facts),
            });
        }
        inputs.as_ref()
    }

    /// The request's facts, decoded the first time a language asks.
    fn facts(&self, facts: &OnceCell<Rc<RequestFacts>>) -> Rc<RequestFacts> {
        facts
            .get_or_init(|| {
                Rc::new(RequestFacts::from_request(
                    self.request,
                    &self.plan.resource_kinds,
                ))
            })
            .clone()
    }

    /// The request as CEL policies read it, decoded the first time one runs.
    fn cel_inputs<'i>(
        &self,
        inputs: &'i mut Option<CelInputs>,
        facts: &OnceCell<Rc<RequestFacts>>,
        outcome: &mut Outcome,
    ) -> Option<&'i CelInputs> {
        if inputs.is_none() {
            if outcome.object.is_none() {
                let object = self
                    .request
                    .raw("object")
                    .and_then(|o| serde_json::from_str::<Value>(o.get()).ok())
                    .filter(Value::is_object)?;
                outcome.object = Some(Object::Whole(object));
            }
            *inputs = Some(CelInputs {
                facts: self.facts(facts),
                request: OnceCell::new(),
                old_object: OnceCell::new(),
                old_object_json: OnceCell::new(),
            });
        }
        inputs.as_ref()
    }

    /// A CEL policy's step.
    fn cel(
        &self,
        policy: &CelPolicy,
        inputs: &CelInputs,
        outcome: &mut Outcome,
        cluster: &CachedCluster,
    ) -> Result<(bool, Vec<String>), StepError> {
        let Some(object) = outcome.object.as_mut() else {
            return Ok((false, Vec::new()));
        };
        // The policy named for a message: formatted only when there is one.
        let failed = |why: String| {
            let label = format!("{} {:?}", policy.kind.name(), policy.name);
            StepError::Failed {
                ignored: format!("{label} not applied: {why}"),
                message: format!("{label}: {why}"),
            }
        };
        let object = object.whole().map_err(failed)?;
        let request = CelRequest {
            facts: &inputs.facts,
            admission: self.request,
            request: &inputs.request,
            old_object: &inputs.old_object,
            old_object_json: &inputs.old_object_json,
            kinds: &self.plan.resource_kinds,
            cluster,
        };
        match crate::cel::engine::run(policy, object, &request) {
            Ok(CelResult::Skipped) => Ok((false, Vec::new())),
            Ok(CelResult::Mutated {
                object: mutated,
                audit,
                warnings,
            }) => {
                let who = || format!("{} {:?}", policy.kind.name(), policy.name);
                let (changed, mut committed) = commit(&who, object, mutated).map_err(failed)?;
                outcome.audit_annotations.extend(audit);
                committed.extend(warnings);
                Ok((changed, committed))
            }
            Err(why) => Err(failed(why)),
        }
    }

    /// The short form's step: read the Node, write its metadata.
    fn node_metadata(
        &self,
        node: &str,
        object: &mut Value,
        kind: ObjectKind,
    ) -> Result<(bool, Vec<String>), StepError> {
        let plan = self.plan;
        let fields = NodeFields {
            labels: plan.reads(Source::Label),
            annotations: plan.reads(Source::Annotation),
        };
        let answer = self.lookup.fetch_node(node, fields);
        let metadata = answer
            .as_deref()
            .map_err(String::clone)
            .and_then(node_lookup::parse_node)
            .map_err(|cause| {
                let message = format!("cannot read Node {node:?}: {cause}");
                StepError::Failed {
                    ignored: format!("Node metadata not added: {message}"),
                    message,
                }
            })?;
        let selection = apply::select(&plan.copy, node, &metadata);
        let applied = apply::apply(object, selection, &plan.copy, plan.on_preset_keys, kind)
            .map_err(StepError::Reject)?;
        Ok((applied.changed, applied.warnings))
    }

    /// A Kyverno rule's step; what it writes to metadata is checked the way
    /// the short form checks its own keys.
    fn rule(
        &self,
        rule: &RuleSpec,
        group: &RuleGroup,
        inputs: &RuleInputs,
        outcome: &mut Outcome,
        cluster: &CachedCluster,
    ) -> Result<(bool, Vec<String>), StepError> {
        let Some(object) = outcome.object.as_mut() else {
            return Ok((false, Vec::new()));
        };
        // `run` names the policy before these.
        let refused = |why: String| StepError::Failed {
            ignored: format!("rule {:?} not applied: {why}", rule.name),
            message: format!("rule {:?}: {why}", rule.name),
        };
        let object = object.whole().map_err(refused)?;
        // Autogen: a Pod rule runs over a controller's Pod template, as a Pod.
        let template = crate::shared::autogen::template_pointer(
            &inputs.facts.kind,
            &group.autogen.controllers,
        )
        .filter(|_| inputs.facts.sub_resource.is_empty());
        let pod_facts;
        let view;
        let generated;
        let (facts, subject, rule) = match template {
            Some(pointer) => {
                pod_facts = inputs.facts.for_pod_template();
                view = crate::shared::autogen::view(object, pointer);
                generated = crate::kyverno::autogen::generated(rule);
                (&pod_facts, &view, generated.as_ref().unwrap_or(rule))
            }
            None => (&*inputs.facts, &*object, rule),
        };
        let engine = Engine {
            policy_namespace: group.namespace.as_deref(),
            resource_kinds: &self.plan.resource_kinds,
            functions: &inputs.functions,
            config_map_masks: &inputs.config_map_masks,
            facts,
        };
        match engine.apply(rule, &inputs.request, subject, cluster) {
            Ok(RuleResult::Skipped) => Ok((false, Vec::new())),
            Ok(RuleResult::Applied(mutated)) => {
                let mutated = match template {
                    Some(pointer) => {
                        let mut whole = object.clone();
                        crate::shared::autogen::write_back(&mut whole, pointer, mutated);
                        whole
                    }
                    None => mutated,
                };
                let who = || format!("rule {:?}", rule.name);
                if inputs.facts.sub_resource == "binding" {
                    // The API server copies a Binding's metadata onto the Pod
                    // unchecked: what it would refuse elsewhere is left out.
                    return commit(&who, object, mutated).map_err(refused);
                }
                // Elsewhere it validates the object it stores, and refuses
                // such metadata whatever Kyverno's failurePolicy. The object
                // stays as the rule left it, for the rules after it, as in
                // Kyverno; the refusal comes once every policy has run.
                identity::check(object, &mutated).map_err(refused)?;
                let problem = crate::shared::metadata::first_metadata_problem(
                    crate::shared::metadata::metadata_maps(object),
                    &mutated,
                );
                let changed = mutated != *object;
                *object = mutated;
                match problem {
                    Some(why) => Err(StepError::Refused {
                        message: format!(
                            "the API server would refuse the object: rule {:?}: {why}",
                            rule.name
                        ),
                        changed,
                    }),
                    None => Ok((changed, Vec::new())),
                }
            }
            Err(why) => {
                let message = format!("rule {:?}: {why}", rule.name);
                Err(StepError::Failed {
                    ignored: message.clone(),
                    message,
                })
            }
        }
    }
}

/// Where an engine's result becomes the object the answer carries: one gate
/// for every policy language. The object must stay the object it was
/// ([`admission::identity::check`]); metadata the rules wrote is checked the way the
/// short form checks its own keys, warnings naming `who` wrote it. Returns whether anything changed and the
/// warnings; on `Err` the object is left as it was.
fn commit(
    who: &dyn Fn() -> String,
    object: &mut Value,
    mut mutated: Value,
) -> Result<(bool, Vec<String>), String> {
    identity::check(object, &mutated)?;
    let warnings = crate::shared::metadata::guard_metadata(who, object, &mut mutated);
    let changed = mutated != *object;
    *object = mutated;
    Ok((changed, warnings))
}

/// The refusal the object the policies left still earns: the first of its
/// labels and annotations the API server refuses, with the rule that wrote it
/// when its refusal says so.
fn still_refused(outcome: &mut Outcome, refusals: &[String]) -> Option<String> {
    let object = outcome.object.as_mut()?.whole().ok()?;
    let why = crate::shared::metadata::first_metadata_problem([None, None], object)?;
    Some(
        refusals
            .iter()
            .rev()
            .find(|refusal| refusal.ends_with(&why))
            .cloned()
            .unwrap_or_else(|| format!("the API server would refuse the object: {why}")),
    )
}

/// The warning for a request the policy lets through without handling it.
pub(crate) fn not_handled(why: &str) -> String {
    format!("request not handled: {why}")
}
