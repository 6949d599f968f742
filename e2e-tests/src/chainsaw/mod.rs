//! Runs chainsaw tests (`chainsaw-test.yaml`) through the policy against a
//! simulated cluster. A step that applies a policy document (ClusterPolicy,
//! Policy, MutatingPolicy, NamespacedMutatingPolicy, MutatingAdmissionPolicy,
//! PolicyException) sets the settings; any other object becomes an admission
//! request (CREATE, or UPDATE when it exists) whose patched result is stored;
//! a Pod with no Node gets the scheduler's Binding (`pods/binding`). Asserts
//! compare as chainsaw does ([`assert`]). What needs a controller, a script or
//! a live cluster skips the test with the reason.

pub mod api_server;
pub mod assert;
pub mod cluster;
mod plan;
mod policies;
mod scheduler;
pub mod test_file;

use serde_json::{Value, json};

use crate::conformance::{
    Step, StepCheck, create_request, kind_of, name_of, namespace_of, subresource_request,
};
use crate::policy::PolicyModule;
use cluster::{NODE_NAME, SimulatedCluster, in_test_namespace, merge};
pub use plan::{NAMESPACE_PLACEHOLDER, plan_chainsaw_test};
use policies::{LoadedPolicies, is_policy_document};
pub use test_file::{ChainsawTest, find_chainsaw_tests, read_test};
use test_file::{Expectation, Operation, Verb};

/// What became of one chainsaw test.
#[derive(Debug, Clone, PartialEq)]
pub enum TestOutcome {
    Pass,
    Fail(String),
    /// `validate_settings` refused a policy of the test.
    Refused(String),
    Skipped(String),
}

#[derive(Debug, Clone)]
pub struct TestReport {
    pub outcome: TestOutcome,
    /// Operations noted and not played (a Kyverno ConfigMap edit), a
    /// simulated controller, a refusal the test expected.
    pub notes: Vec<String>,
    /// Admission requests the policy evaluated.
    pub requests: usize,
    /// Of those, the ones kwctl ran, and where it disagreed.
    pub kwctl_checked: usize,
    pub kwctl_disagreements: Vec<String>,
    /// The first image a policy asked a registry about that the simulation
    /// could not answer (the test is skipped for it).
    pub unreachable_image: Option<String>,
    /// The objects the test left in the simulated cluster (policy documents
    /// and the cluster's own objects as they started left out).
    pub objects: Vec<Value>,
}

/// Why a test is not one this runner counts, if it is not: it has no mutating
/// policy, or it tests a ClusterPolicy sample that also has a `kyverno test`
/// (counted by the CLI runner).
pub fn out_of_scope(test: &ChainsawTest) -> Option<String> {
    let documents: Vec<&Value> = test
        .steps
        .iter()
        .flatten()
        .filter_map(|op| match op {
            Operation::Apply { documents, .. } => Some(documents),
            _ => None,
        })
        .flatten()
        .filter(|d| is_policy_document(d))
        .collect();
    if documents.iter().any(|d| policies::is_cel_mutating(d)) {
        return None;
    }
    if !documents.iter().any(|d| policies::has_mutate_rule(d)) {
        return Some("no mutating policy".into());
    }
    let sample = test
        .dir
        .file_name()
        .is_some_and(|n| n == ".chainsaw-test")
        .then(|| test.dir.parent())
        .flatten();
    if sample.is_some_and(|s| !crate::conformance::find_tests(s).is_empty()) {
        return Some("a ClusterPolicy sample with a `kyverno test` (counted there)".into());
    }
    None
}

/// What the kubelet makes of a Pod placed on a Node: it runs (a Pod that
/// is not on a Node is returned as it is).
fn running(mut object: Value) -> Value {
    if kind_of(&object) == "Pod" && object["status"]["phase"].is_null() {
        object["status"]["phase"] = json!("Running");
    }
    object
}

struct Run<'a> {
    module: &'a PolicyModule,
    kwctl: Option<StepCheck<'a>>,
    cluster: SimulatedCluster,
    policies: LoadedPolicies,
    /// Kinds some step applied (an assert on any other kind waits for a
    /// controller that is not here).
    applied_kinds: Vec<String>,
    /// The first image a policy asked a registry about that the simulation
    /// could not answer.
    unreachable_image: Option<String>,
    report: TestReport,
}

/// Plays one test.
pub fn run_chainsaw_test(
    module: &PolicyModule,
    test: &ChainsawTest,
    kwctl: Option<StepCheck>,
) -> TestReport {
    let mut run = Run {
        module,
        kwctl,
        cluster: SimulatedCluster::default(),
        policies: LoadedPolicies::default(),
        applied_kinds: vec!["Node".into(), "Namespace".into(), "ServiceAccount".into()],
        unreachable_image: None,
        report: TestReport {
            outcome: TestOutcome::Pass,
            notes: Vec::new(),
            requests: 0,
            kwctl_checked: 0,
            kwctl_disagreements: Vec::new(),
            unreachable_image: None,
            objects: Vec::new(),
        },
    };
    let played = test
        .steps
        .iter()
        .enumerate()
        .try_for_each(|(index, ops)| ops.iter().try_for_each(|op| run.play(index + 1, op)));
    if let Err(outcome) = played {
        run.report.outcome = outcome;
    }
    // An image the simulation has no registry for: the test needs the
    // registry it names (ghcr.io, docker.io), which is not reachable here.
    if let Some(image) = run.unreachable_image.take() {
        run.report.outcome = TestOutcome::Skipped(format!(
            "reads image {image} from its registry (oci/v1), which the simulated cluster does not have"
        ));
        run.report.unreachable_image = Some(image);
    }
    let initial = SimulatedCluster::default();
    run.report.objects = run
        .cluster
        .objects()
        .iter()
        .filter(|o| !is_policy_document(o) && !initial.objects().contains(o))
        .cloned()
        .collect();
    run.report
}

impl Run<'_> {
    fn play(&mut self, step: usize, op: &Operation) -> Result<(), TestOutcome> {
        match op {
            Operation::Apply {
                verb,
                documents,
                expect,
            } => documents
                .iter()
                .try_for_each(|d| self.apply(step, *verb, in_test_namespace(d.clone()), *expect)),
            Operation::Assert(documents) => documents
                .iter()
                .try_for_each(|d| self.assert(step, &in_test_namespace(d.clone()))),
            Operation::Error(documents) => documents
                .iter()
                .try_for_each(|d| self.error(step, &in_test_namespace(d.clone()))),
            Operation::Delete(documents) => {
                for document in documents {
                    self.cluster.remove(&in_test_namespace(document.clone()));
                }
                Ok(())
            }
            Operation::PolicyReady => match self.policies.is_empty() {
                true => Err(TestOutcome::Fail(format!(
                    "step {step} waits for a policy, none is loaded"
                ))),
                false => Ok(()),
            },
            Operation::Sleep => Ok(()),
            Operation::Noted(note) => {
                self.report.notes.push(note.clone());
                Ok(())
            }
            Operation::Unsupported(why) => Err(TestOutcome::Skipped(why.clone())),
        }
    }

    fn apply(
        &mut self,
        step: usize,
        verb: Verb,
        document: Value,
        expect: Expectation,
    ) -> Result<(), TestOutcome> {
        let what = format!("{} {}", kind_of(&document), name_of(&document));
        if is_policy_document(&document) {
            if expect == Expectation::Refusal {
                return Err(TestOutcome::Skipped(format!(
                    "step {step} expects Kyverno to refuse the policy {what}"
                )));
            }
            let background = self.policies.load(self.module, &document, step)?;
            self.cluster.put(document);
            if let Some((kind, rewritten)) = background {
                self.simulate_background(step, &kind, &rewritten)?;
            }
            return Ok(());
        }
        if let Some(why) = policies::needs_controller(&document) {
            return Err(TestOutcome::Skipped(format!(
                "step {step} applies {what}: {why}"
            )));
        }
        let old = self.cluster.get(&document).cloned();
        let object = match (verb, &old) {
            (Verb::Create, Some(_)) => {
                return Err(TestOutcome::Fail(format!(
                    "step {step}: {what} already exists"
                )));
            }
            (Verb::Update | Verb::Patch, None) => {
                return Err(TestOutcome::Fail(format!(
                    "step {step}: {what} does not exist"
                )));
            }
            (Verb::Apply | Verb::Patch, Some(old)) => merge(old, &document),
            _ => document,
        };
        self.applied_kinds.push(kind_of(&object).to_string());
        let object = match old {
            None => api_server::before_webhooks(object),
            Some(_) => api_server::with_defaults(object),
        };
        let admitted = self.admit(&object, old.as_ref(), None);
        match (admitted.map(api_server::with_defaults), expect) {
            (Ok(object), Expectation::Success) => {
                let object = api_server::with_generation(object, old.as_ref());
                let unbound = kind_of(&object) == "Pod"
                    && object["spec"]["nodeName"]
                        .as_str()
                        .is_none_or(str::is_empty);
                match (unbound, old.is_none()) {
                    (true, true) => {
                        self.cluster.put(object.clone());
                        self.schedule(step, object);
                    }
                    (false, true) => {
                        let service_account = api_server::default_service_account(&object);
                        self.cluster.put(running(object));
                        if let Some(account) = service_account {
                            self.controller_creates(step, account)?;
                        }
                    }
                    _ => self.cluster.put(object),
                }
                Ok(())
            }
            (Err(message), Expectation::Refusal) => {
                self.report.notes.push(format!(
                    "step {step}: {what} refused as expected: {message}"
                ));
                Ok(())
            }
            (Ok(_), Expectation::Refusal) => Err(TestOutcome::Fail(format!(
                "step {step} expects {what} to be refused; the policy admitted it"
            ))),
            (Err(message), Expectation::Success) => Err(TestOutcome::Fail(format!(
                "step {step}: {what} rejected: {message}"
            ))),
        }
    }

    /// One admission request through the loaded policies: the object as the
    /// policies left it, or the rejection. `subject` overrides the request's
    /// user (the scheduler's Binding).
    fn admit(
        &mut self,
        object: &Value,
        old: Option<&Value>,
        user: Option<&str>,
    ) -> Result<Value, String> {
        let Some(settings) = self.policies.settings_for(namespace_of(object)) else {
            return Ok(object.clone());
        };
        let mut request = create_request(object, None);
        subresource_request(
            &mut request,
            &[(
                "Binding".to_string(),
                "pods".to_string(),
                "binding".to_string(),
            )],
        );
        if let Some(old) = old {
            request["operation"] = json!("UPDATE");
            request["oldObject"] = old.clone();
            request["options"] = json!({"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"});
        }
        if let Some(user) = user {
            request["userInfo"] = json!({"username": user, "groups": ["system:authenticated"]});
        }
        let host = self.cluster.host();
        self.report.requests += 1;
        let evaluation = self
            .module
            .evaluate(&request, &settings, host.clone())
            .map_err(|e| format!("evaluation failed: {e:#}"))?;
        let check = Step {
            settings,
            request,
            exchanges: host.recorded(),
            patch: evaluation.patch.clone(),
        };
        if let Some((_, image, _)) = check
            .exchanges
            .iter()
            .find(|(operation, _, answer)| operation.starts_with("v1/") && answer.is_err())
        {
            self.unreachable_image
                .get_or_insert_with(|| image.as_str().unwrap_or_default().to_string());
        }
        if let Some(kwctl) = self.kwctl {
            self.report.kwctl_checked += 1;
            // kwctl must accept with the same patch, or reject as the policy did.
            let disagreement = match (kwctl(&check), evaluation.accepted) {
                (Err(e), true) => Some(e),
                (Ok(()), false) => Some("kwctl accepted what the policy rejected".to_string()),
                (Err(e), false) if !e.starts_with("kwctl: not allowed") => Some(e),
                _ => None,
            };
            if let Some(e) = disagreement {
                self.report.kwctl_disagreements.push(format!(
                    "{} {}: {e}",
                    kind_of(object),
                    name_of(object)
                ));
            }
        }
        if !evaluation.accepted {
            return Err(evaluation.message.unwrap_or_default());
        }
        let mut mutated = object.clone();
        if let Some(patch) = evaluation.patch {
            let ops: json_patch::Patch =
                serde_json::from_value(patch).map_err(|e| format!("the policy's patch: {e}"))?;
            json_patch::patch(&mut mutated, &ops)
                .map_err(|e| format!("the policy's patch does not apply: {e}"))?;
        }
        Ok(mutated)
    }

    /// The scheduler binds a new Pod to the Node: a `pods/binding` CREATE from
    /// `system:kube-scheduler`; the API server then copies the Binding's
    /// annotations and labels onto the Pod and sets `spec.nodeName`.
    fn schedule(&mut self, step: usize, mut pod: Value) {
        let node = self
            .cluster
            .get(&json!({"kind": "Node", "metadata": {"name": NODE_NAME}}));
        if let Some(why) = node.and_then(|node| scheduler::unschedulable(&pod, node, &self.cluster))
        {
            self.report.notes.push(format!(
                "step {step}: Pod {} stays pending, unbound: {why}",
                name_of(&pod)
            ));
            return;
        }
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name_of(&pod), "namespace": namespace_of(&pod)},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE_NAME},
        });
        match self.admit(&binding, None, Some("system:kube-scheduler")) {
            Ok(binding) => {
                // Labels too: the simulated cluster is Kubernetes 1.35, where
                // `PodTopologyLabelsAdmission` is on by default.
                for field in ["annotations", "labels"] {
                    if let Some(copied) = binding["metadata"][field].as_object() {
                        for (key, value) in copied {
                            pod["metadata"][field][key] = value.clone();
                        }
                    }
                }
                pod["spec"]["nodeName"] = json!(NODE_NAME);
                self.cluster.put(running(pod));
            }
            Err(message) => self.report.notes.push(format!(
                "step {step}: the Binding of Pod {} was rejected ({message}); the Pod stays pending",
                name_of(&pod)
            )),
        }
    }

    /// An object a built-in controller creates, through admission as any.
    fn controller_creates(&mut self, step: usize, object: Value) -> Result<(), TestOutcome> {
        if self.cluster.get(&object).is_some() {
            return Ok(());
        }
        let user = api_server::SERVICE_ACCOUNT_CONTROLLER;
        match self.admit(&object, None, Some(user)) {
            Ok(object) => {
                self.cluster.put(object);
                Ok(())
            }
            Err(message) => Err(TestOutcome::Fail(format!(
                "step {step}: the controller's {} {} was rejected: {message}",
                kind_of(&object),
                name_of(&object)
            ))),
        }
    }

    /// Kyverno's background controller for a policy whose targets are the
    /// trigger itself (`mutateExistingOnPolicyUpdate`): every existing object
    /// of the kind goes through the rule as an UPDATE.
    fn simulate_background(
        &mut self,
        step: usize,
        kind: &str,
        policy: &Value,
    ) -> Result<(), TestOutcome> {
        let existing: Vec<Value> = self.cluster.of_kind(kind).cloned().collect();
        let saved = std::mem::take(&mut self.policies);
        self.policies.set_only(policy.clone());
        let mut outcome = Ok(());
        for object in existing {
            let result = self.admit(
                &object,
                Some(&object),
                Some("system:serviceaccount:kyverno:kyverno-background-controller"),
            );
            match result {
                Ok(mutated) => {
                    let mutated = api_server::with_defaults(mutated);
                    self.cluster
                        .put(api_server::with_generation(mutated, Some(&object)))
                }
                Err(message) => {
                    outcome = Err(TestOutcome::Fail(format!(
                        "step {step}: the simulated background mutation of {kind} {} was rejected: {message}",
                        name_of(&object)
                    )));
                    break;
                }
            }
        }
        self.policies = saved;
        outcome?;
        self.report.notes.push(format!(
            "step {step}: Kyverno's background controller simulated for {} (its targets are the trigger itself)",
            name_of(policy)
        ));
        Ok(())
    }

    fn assert(&mut self, step: usize, expected: &Value) -> Result<(), TestOutcome> {
        let what = format!("{} {}", kind_of(expected), name_of(expected));
        let mut expected = expected.clone();
        if is_policy_document(&expected) {
            // Readiness (`status`) is the settings having been validated.
            if let Some(map) = expected.as_object_mut() {
                map.remove("status");
            }
        }
        let mut first_difference = None;
        for candidate in self.cluster.candidates(&expected) {
            let served = api_server::served_as(candidate, &expected);
            match assert::is_subset(&served, &expected, "") {
                Ok(()) => return Ok(()),
                Err(difference) => {
                    first_difference.get_or_insert(difference);
                }
            }
        }
        match first_difference {
            Some(difference) => Err(TestOutcome::Fail(format!(
                "step {step} asserts {what}: {difference}"
            ))),
            None if !self.applied_kinds.iter().any(|k| k == kind_of(&expected)) => {
                Err(TestOutcome::Skipped(format!(
                    "step {step} asserts {what}, which a controller would create (no step applies a {})",
                    kind_of(&expected)
                )))
            }
            None => Err(TestOutcome::Fail(format!(
                "step {step} asserts {what}: not in the cluster"
            ))),
        }
    }

    fn error(&mut self, step: usize, expected: &Value) -> Result<(), TestOutcome> {
        let matched = self.cluster.candidates(expected).any(|candidate| {
            assert::is_subset(&api_server::served_as(candidate, expected), expected, "").is_ok()
        });
        if matched {
            return Err(TestOutcome::Fail(format!(
                "step {step}: error expects no {} {} like this, one is in the cluster",
                kind_of(expected),
                name_of(expected)
            )));
        }
        Ok(())
    }
}
