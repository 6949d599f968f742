//! The policy documents a chainsaw test has applied so far, turned into the
//! policy's settings: one document whole, or several under `policies`, in the
//! order applied (a re-applied document replaces its earlier version).

use serde_json::{Value, json};

use super::TestOutcome;
use crate::conformance::{
    is_namespaced_policy, is_supported_policy, kind_of, name_of, namespace_of,
};
use crate::policy::PolicyModule;

/// A Kyverno `PolicyException` for CEL policies, which goes under `policies`.
fn is_exception(doc: &Value) -> bool {
    doc["apiVersion"]
        .as_str()
        .is_some_and(|a| a.starts_with("policies.kyverno.io/"))
        && kind_of(doc) == "PolicyException"
}

/// A document the settings take.
pub fn is_policy_document(doc: &Value) -> bool {
    is_supported_policy(doc) || is_exception(doc)
}

pub fn is_cel_mutating(doc: &Value) -> bool {
    is_supported_policy(doc)
        && matches!(
            kind_of(doc),
            "MutatingPolicy" | "NamespacedMutatingPolicy" | "MutatingAdmissionPolicy"
        )
}

pub fn has_mutate_rule(doc: &Value) -> bool {
    is_supported_policy(doc)
        && doc["spec"]["rules"]
            .as_array()
            .is_some_and(|rules| rules.iter().any(|r| r.get("mutate").is_some()))
}

/// Why an object a test applies needs something this simulation lacks.
pub fn needs_controller(doc: &Value) -> Option<String> {
    let api = doc["apiVersion"].as_str().unwrap_or_default();
    let kyverno = api.contains("kyverno.io/") || api.starts_with("admissionregistration.k8s.io/");
    if !kyverno || kind_of(doc) == "MutatingAdmissionPolicyBinding" {
        return None;
    }
    Some(format!(
        "{api} {} is served by Kyverno's controllers, not by these settings",
        kind_of(doc)
    ))
}

/// Whether the policy mutates existing resources (Kyverno's background
/// controller does that).
fn mutates_existing(doc: &Value) -> bool {
    doc["spec"]["evaluation"]["mutateExisting"]["enabled"] == json!(true)
        || doc["spec"]["mutateExistingOnPolicyUpdate"] == json!(true)
        || doc["spec"]["rules"]
            .as_array()
            .is_some_and(|rules| rules.iter().any(|r| r["mutate"].get("targets").is_some()))
}

/// A ClusterPolicy whose every target is the trigger itself, mutated when the
/// policy is created (`mutateExistingOnPolicyUpdate`), rewritten as the plain
/// mutate rule it amounts to: its kind, and the rewritten document.
fn background_as_admission(doc: &Value) -> Option<(String, Value)> {
    if doc["spec"]["mutateExistingOnPolicyUpdate"] != json!(true) {
        return None;
    }
    let mut rewritten = doc.clone();
    rewritten["spec"]
        .as_object_mut()?
        .remove("mutateExistingOnPolicyUpdate");
    let mut kind = None;
    for rule in rewritten["spec"]["rules"].as_array_mut()? {
        let targets = rule["mutate"]["targets"].as_array()?;
        let [target] = targets.as_slice() else {
            return None;
        };
        let name = target["name"].as_str()?.replace(' ', "");
        let matched = rule["match"]["any"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|f| f["resources"]["kinds"].as_array().into_iter().flatten())
            .any(|k| k == &target["kind"]);
        if name != "{{request.object.metadata.name}}" || !matched {
            return None;
        }
        kind = Some(target["kind"].as_str()?.to_string());
        rule["mutate"].as_object_mut()?.remove("targets");
    }
    Some((kind?, rewritten))
}

#[derive(Default)]
pub struct LoadedPolicies {
    documents: Vec<Value>,
}

fn same_document(a: &Value, b: &Value) -> bool {
    kind_of(a) == kind_of(b) && name_of(a) == name_of(b) && namespace_of(a) == namespace_of(b)
}

/// One document whole, several under `policies`.
fn settings_of(documents: Vec<Value>) -> Value {
    match <[Value; 1]>::try_from(documents) {
        Ok([one]) => one,
        Err(documents) => json!({"policies": documents}),
    }
}

impl LoadedPolicies {
    pub fn is_empty(&self) -> bool {
        self.documents.is_empty()
    }

    /// Only `doc` from now on.
    pub fn set_only(&mut self, doc: Value) {
        self.documents = vec![doc];
    }

    /// The documents with `doc` added (or in place of its earlier version),
    /// exceptions after the policies they name.
    fn with(&self, doc: &Value) -> Vec<Value> {
        let mut documents: Vec<Value> = self
            .documents
            .iter()
            .filter(|d| !same_document(d, doc))
            .cloned()
            .collect();
        documents.push(doc.clone());
        documents.sort_by_key(is_exception);
        documents
    }

    /// The settings adding `doc` makes, before they are validated (what a
    /// refusal refused).
    pub fn settings_with(&self, doc: &Value) -> Value {
        settings_of(self.with(doc))
    }

    /// Adds (or replaces) `doc` and validates the settings that makes. A
    /// refusal of a policy that mutates existing resources is a skip: that
    /// job is Kyverno's background controller's; so is a MutatingPolicy the
    /// settings take with a warning that its background half does not run
    /// here (the test's asserts are on what that half does). When the
    /// background job is one an admission can do (the targets are the
    /// trigger itself), returns the kind and the policy rewritten to do it.
    pub fn load(
        &mut self,
        module: &PolicyModule,
        doc: &Value,
        step: usize,
    ) -> Result<Option<(String, Value)>, TestOutcome> {
        let what = format!("{} {}", kind_of(doc), name_of(doc));
        // The refusal, or the policy's warning that Kyverno's background
        // controller would do more than the settings do.
        let verdict = |documents: &[Value]| -> Result<Result<Option<String>, String>, TestOutcome> {
            let settings = settings_of(documents.to_vec());
            let verdict = module.validate_settings(&settings).map_err(|e| {
                TestOutcome::Refused(format!("step {step}: validate_settings trapped: {e:#}"))
            })?;
            if !verdict.valid {
                return Ok(Err(verdict.message.unwrap_or_default()));
            }
            let background = format!(
                "evaluation.mutateExisting.enabled: {} {:?}",
                kind_of(doc),
                name_of(doc)
            );
            Ok(Ok(verdict.logged.into_iter().find_map(|line| {
                line.split_once("node-metadata-policy: ")
                    .filter(|(_, warning)| warning.contains(&background))
                    .map(|(_, warning)| warning.to_string())
            })))
        };
        let documents = self.with(doc);
        // Exceptions alone wait for the policies they name.
        if documents.iter().all(is_exception) {
            self.documents = documents;
            return Ok(None);
        }
        let message = match verdict(&documents)? {
            Ok(None) => {
                self.documents = documents;
                return Ok(None);
            }
            Ok(Some(warning)) => {
                return Err(TestOutcome::Skipped(format!(
                    "step {step}: {what} mutates existing resources, a job for Kyverno's background controller (the settings load it with the warning {warning:?})"
                )));
            }
            Err(message) => message,
        };
        if !mutates_existing(doc) {
            return Err(TestOutcome::Refused(format!(
                "step {step}: {what}: {message}"
            )));
        }
        if let Some((kind, rewritten)) = background_as_admission(doc) {
            let documents = self.with(&rewritten);
            if verdict(&documents)? == Ok(None) {
                self.documents = documents;
                return Ok(Some((kind, rewritten)));
            }
        }
        Err(TestOutcome::Skipped(format!(
            "step {step}: {what} mutates existing resources, a job for Kyverno's background controller (the settings refuse it: {message})"
        )))
    }

    /// The settings with every document applied so far, as one policy in
    /// policy-server takes them (the policy itself keeps a namespaced
    /// document to its namespace); `None` when there are only exceptions.
    pub fn settings_for_all(&self) -> Option<Value> {
        self.documents
            .iter()
            .any(|d| !is_exception(d))
            .then(|| settings_of(self.documents.clone()))
    }

    /// The settings for a request in `namespace`: every policy that applies
    /// there (a namespaced one only in its own), with the exceptions; `None`
    /// when no policy applies.
    pub fn settings_for(&self, namespace: &str) -> Option<Value> {
        let documents: Vec<Value> = self
            .documents
            .iter()
            .filter(|d| !is_namespaced_policy(d) || namespace_of(d) == namespace)
            .cloned()
            .collect();
        documents
            .iter()
            .any(|d| !is_exception(d))
            .then(|| settings_of(documents))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_background_rule_whose_target_is_its_trigger_becomes_a_mutation() {
        let policy = json!({"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
            "metadata": {"name": "label-nodes"},
            "spec": {"mutateExistingOnPolicyUpdate": true, "rules": [{"name": "r",
                "match": {"any": [{"resources": {"kinds": ["Node"]}}]},
                "mutate": {"patchStrategicMerge": {"metadata": {"labels": {"foo": "bar"}}},
                    "targets": [{"apiVersion": "v1", "kind": "Node",
                        "name": "{{ request.object.metadata.name }}"}]}}]}});
        let (kind, rewritten) = background_as_admission(&policy).expect("rewritten");
        assert_eq!(kind, "Node");
        assert!(
            rewritten["spec"]
                .get("mutateExistingOnPolicyUpdate")
                .is_none()
        );
        assert!(
            rewritten["spec"]["rules"][0]["mutate"]
                .get("targets")
                .is_none()
        );
        let mut other = policy.clone();
        other["spec"]["rules"][0]["mutate"]["targets"][0]["name"] = json!("x");
        assert!(background_as_admission(&other).is_none());
    }

    #[test]
    fn several_documents_go_under_policies_and_namespaced_ones_stay_home() {
        let mut loaded = LoadedPolicies::default();
        let cluster = json!({"apiVersion": "policies.kyverno.io/v1", "kind": "MutatingPolicy",
            "metadata": {"name": "a"}});
        let namespaced = json!({"apiVersion": "policies.kyverno.io/v1",
            "kind": "NamespacedMutatingPolicy", "metadata": {"name": "b", "namespace": "ns"}});
        loaded.documents = vec![cluster.clone(), namespaced.clone()];
        assert_eq!(loaded.settings_for("other"), Some(cluster.clone()));
        assert_eq!(
            loaded.settings_for("ns"),
            Some(json!({"policies": [cluster, namespaced]}))
        );
    }
}
