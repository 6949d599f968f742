//! A chainsaw test as a plan for the real cluster (`e2e-tests/cluster/chainsaw_real.py`):
//! its operations in order, with the decisions that are this runner's and not
//! the cluster's made here, once, by the same code the simulation uses:
//! what settings the policy documents applied so far become ([`LoadedPolicies`]),
//! whether they are refused, and where the test stops being playable (a
//! script, a Kyverno controller's object, a policy that mutates existing
//! resources). Objects, asserts and deletes are left as the test wrote them:
//! the real API server decides their namespace, defaults and admission.

use serde_json::{Value, json};

use super::TestOutcome;
use super::cluster::{TEST_NAMESPACE, in_test_namespace};
use super::policies::{LoadedPolicies, is_policy_document, needs_controller};
use super::test_file::{ChainsawTest, Expectation, Operation, Verb};
use crate::conformance::{kind_of, name_of};
use crate::policy::PolicyModule;

/// The namespace the settings' namespaced documents (a Policy, a
/// NamespacedMutatingPolicy) name when the test names none: the real runner
/// puts its test namespace in its place.
pub const NAMESPACE_PLACEHOLDER: &str = TEST_NAMESPACE;

fn verb_name(verb: Verb) -> &'static str {
    match verb {
        Verb::Apply => "apply",
        Verb::Create => "create",
        Verb::Update => "update",
        Verb::Patch => "patch",
    }
}

fn stop(outcome: TestOutcome) -> Value {
    let (verdict, why) = match outcome {
        TestOutcome::Pass => ("pass", String::new()),
        TestOutcome::Fail(why) => ("fail", why),
        TestOutcome::Refused(why) => ("refused", why),
        TestOutcome::Skipped(why) => ("skipped", why),
    };
    json!({"op": "stop", "outcome": verdict, "why": why})
}

/// The operations of `test`, ending with a `stop` where the test cannot be
/// played further (its outcome is then that stop's).
pub fn plan_chainsaw_test(module: &PolicyModule, test: &ChainsawTest) -> Vec<Value> {
    let mut policies = LoadedPolicies::default();
    let mut ops = Vec::new();
    for (index, operations) in test.steps.iter().enumerate() {
        let step = index + 1;
        for op in operations {
            match op {
                Operation::Apply {
                    verb,
                    documents,
                    expect,
                } => {
                    for document in documents {
                        let what = format!("{} {}", kind_of(document), name_of(document));
                        if is_policy_document(document) {
                            if *expect == Expectation::Refusal {
                                ops.push(stop(TestOutcome::Skipped(format!(
                                    "step {step} expects Kyverno to refuse the policy {what}"
                                ))));
                                return ops;
                            }
                            let placed = in_test_namespace(document.clone());
                            match policies.load(module, &placed, step) {
                                Ok(background) => ops.push(json!({
                                    "op": "policy", "step": step, "document": placed,
                                    "settings": policies.settings_for_all(),
                                    "background": background.map(|(kind, rewritten)| json!({
                                        "kind": kind, "settings": rewritten})),
                                })),
                                Err(outcome) => {
                                    let refused = matches!(outcome, TestOutcome::Refused(_));
                                    let mut stop = stop(outcome);
                                    // policy-server is asked to load what was refused.
                                    if refused {
                                        stop["settings"] = policies.settings_with(&placed);
                                    }
                                    ops.push(stop);
                                    return ops;
                                }
                            }
                            continue;
                        }
                        if let Some(why) = needs_controller(document) {
                            ops.push(stop(TestOutcome::Skipped(format!(
                                "step {step} applies {what}: {why}"
                            ))));
                            return ops;
                        }
                        ops.push(json!({
                            "op": "apply", "step": step, "verb": verb_name(*verb),
                            "document": document,
                            "expect": if *expect == Expectation::Refusal { "refusal" } else { "success" },
                        }));
                    }
                }
                Operation::Assert(documents) => {
                    ops.push(json!({"op": "assert", "step": step, "documents": documents}))
                }
                Operation::Error(documents) => {
                    ops.push(json!({"op": "error", "step": step, "documents": documents}))
                }
                Operation::Delete(documents) => {
                    ops.push(json!({"op": "delete", "step": step, "documents": documents}))
                }
                Operation::PolicyReady => ops.push(json!({"op": "policy-ready", "step": step})),
                Operation::Sleep => ops.push(json!({"op": "sleep", "step": step})),
                Operation::Noted(note) => {
                    ops.push(json!({"op": "note", "step": step, "note": note}))
                }
                Operation::Unsupported(why) => {
                    ops.push(stop(TestOutcome::Skipped(why.clone())));
                    return ops;
                }
            }
        }
    }
    ops
}
