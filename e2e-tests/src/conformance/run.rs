//! Running one Kyverno CLI test: every mutate result applied through the
//! policy (the test's policies in file order, each on the previous one's
//! output) and compared with the resource the test expects.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use super::cluster::{
    Exchange, TestCluster, add_cluster_resources, add_context_images, test_cluster,
    with_given_image_data,
};
use super::compare::compare;
use super::documents::{
    create_request, find_resource, is_namespaced_policy, is_supported_policy, kind_of, name_of,
    names_policy, namespace_of, read_documents, rule_of, short_kind, subresource_request,
    with_default_namespace,
};
use super::test_file::{TestFile, Values};
use crate::policy::PolicyModule;

/// What became of one result of a test.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Pass,
    /// The first path where the policy's output and the expected resource differ.
    Fail(String),
    /// `validate_settings` refused the policy, or the request was rejected.
    Refused(String),
    Skipped(String),
}

#[derive(Debug, Clone)]
pub struct ResultLine {
    pub test: PathBuf,
    pub policy: String,
    pub rule: String,
    pub resource: String,
    pub outcome: Outcome,
    /// What kwctl made of the same steps, when it ran.
    pub kwctl: Option<Result<(), String>>,
}

/// Checks one step against another host (kwctl).
pub type StepCheck<'a> = &'a dyn Fn(&Step) -> Result<(), String>;

/// One application of one policy to one object, as the steps kwctl replays.
pub struct Step {
    pub settings: Value,
    pub request: Value,
    pub exchanges: Vec<Exchange>,
    pub patch: Option<Value>,
}

/// Applies the policies of the test, in order, to `object`, up to and
/// including `last` (Kyverno's CLI checks a result against the output of its
/// own policy, applied to what the policies before it made).
fn apply_all(
    module: &PolicyModule,
    policies: &[Value],
    last: &Value,
    object: &Value,
    only_rule: Option<&str>,
    namespace: Option<&str>,
    cluster: &Arc<TestCluster>,
) -> Result<(Value, Vec<Step>, Value), Outcome> {
    let mut current = object.clone();
    let mut before_last = object.clone();
    let mut steps = Vec::new();
    for policy in policies {
        // A namespaced Policy applies only in its own namespace (the
        // deployment's namespaceSelector does that job for a Kubewarden policy).
        if is_namespaced_policy(policy) && namespace_of(policy) != namespace_of(&current) {
            continue;
        }
        let mut settings = policy.clone();
        let exceptions: Vec<&Value> = cluster
            .exceptions
            .iter()
            .filter(|e| names_policy(e, policy))
            .collect();
        if policy == last {
            before_last = current.clone();
            // A rule's own effect: the policy with that rule alone.
            if let (Some(rule), Some(rules)) = (
                only_rule,
                settings
                    .pointer_mut("/spec/rules")
                    .and_then(Value::as_array_mut),
            ) {
                rules.retain(|r| r["name"].as_str() == Some(rule));
            }
        }
        if !exceptions.is_empty() || !cluster.resource_kinds.is_empty() {
            let mut documents = vec![settings];
            documents.extend(exceptions.into_iter().cloned());
            settings = json!({"policies": documents});
            if !cluster.resource_kinds.is_empty() {
                settings["resourceKinds"] = json!(cluster.resource_kinds);
            }
        }
        let verdict = module
            .validate_settings(&settings)
            .map_err(|e| Outcome::Refused(format!("validate_settings trapped: {e:#}")))?;
        if !verdict.valid {
            return Err(Outcome::Refused(format!(
                "policy {:?}: {}",
                name_of(policy),
                verdict.message.unwrap_or_default()
            )));
        }
        let mut request = create_request(&current, namespace);
        subresource_request(&mut request, &cluster.subresources);
        if let Ok(mut exchanges) = cluster.exchanges.lock() {
            exchanges.clear();
        }
        let evaluation = module
            .evaluate(&request, &settings, cluster.clone())
            .map_err(|e| Outcome::Refused(format!("evaluation failed: {e:#}")))?;
        if !evaluation.accepted {
            return Err(Outcome::Refused(format!(
                "policy {:?} rejected the request: {}",
                name_of(policy),
                evaluation.message.unwrap_or_default()
            )));
        }
        if let Some(patch) = &evaluation.patch {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| Outcome::Refused(format!("the policy's patch: {e}")))?;
            json_patch::patch(&mut current, &ops)
                .map_err(|e| Outcome::Refused(format!("the policy's patch does not apply: {e}")))?;
        }
        steps.push(Step {
            settings,
            request,
            exchanges: cluster
                .exchanges
                .lock()
                .map(|e| e.clone())
                .unwrap_or_default(),
            patch: evaluation.patch,
        });
        if policy == last {
            break;
        }
    }
    Ok((current, steps, before_last))
}

/// Runs one test file; `kwctl` checks every step against real kwctl too.
pub fn run_test(
    module: &PolicyModule,
    test: &Path,
    kwctl: Option<StepCheck>,
) -> Result<Vec<ResultLine>> {
    let dir = test.parent().ok_or_else(|| anyhow!("no directory"))?;
    let text = std::fs::read_to_string(test)?;
    let spec: TestFile = serde_yaml::from_str(&text).context("not a Kyverno CLI test")?;
    let mut policies = Vec::new();
    for p in &spec.policies {
        policies.extend(read_documents(&dir.join(p))?);
    }
    let mut resources = Vec::new();
    for r in &spec.resources {
        resources.extend(
            read_documents(&dir.join(r))?
                .into_iter()
                .map(with_default_namespace),
        );
    }
    let values: Values = match &spec.variables {
        Some(v) => {
            serde_yaml::from_str(&std::fs::read_to_string(dir.join(v))?).context("values file")?
        }
        None => Values::default(),
    };
    let policies: Vec<Value> = policies
        .into_iter()
        .map(|p| with_given_image_data(p, &values))
        .collect();
    let kyverno_policies: Vec<Value> = policies
        .iter()
        .filter(|p| is_supported_policy(p))
        .cloned()
        .collect();
    let mut cluster = test_cluster(&values, &kyverno_policies);
    for e in &spec.exceptions {
        cluster.exceptions.extend(read_documents(&dir.join(e))?);
    }
    add_cluster_resources(&mut cluster, dir, &spec.cluster_resources)?;
    if let Some(context) = &spec.context {
        add_context_images(&mut cluster, &dir.join(context))?;
    }
    let cluster = Arc::new(cluster);
    let request_namespace = values
        .global_values
        .get("request.namespace")
        .or_else(|| {
            values
                .policies
                .iter()
                .flat_map(|p| &p.rules)
                .find_map(|r| r.values.get("request.namespace"))
        })
        .and_then(Value::as_str);

    let mut lines = Vec::new();
    for result in &spec.results {
        let names: Vec<&String> = result.resources.iter().chain(&result.resource).collect();
        let patched = result
            .patched_resources
            .as_ref()
            .or(result.patched_resource.as_ref());
        // `namespace/name` names a namespaced Policy.
        let policy = policies.iter().find(|p| {
            name_of(p) == result.policy
                || format!("{}/{}", namespace_of(p), name_of(p)) == result.policy
        });
        let is_mutate = policy
            .and_then(|p| rule_of(p, &result.rule))
            .is_some_and(|r| r.get("mutate").is_some())
            || patched.is_some()
            || result.is_mutating_policy;
        if !is_mutate {
            continue;
        }
        for name in names {
            let mut line = ResultLine {
                test: test.to_path_buf(),
                policy: result.policy.clone(),
                rule: result.rule.clone(),
                resource: format!("{}/{name}", short_kind(&result.kind)),
                outcome: Outcome::Pass,
                kwctl: None,
            };
            line.outcome = (|| {
                let Some(policy) = policy else {
                    return Outcome::Skipped(format!("policy {:?} not in the test", result.policy));
                };
                if !is_supported_policy(policy) {
                    return Outcome::Skipped(format!(
                        "{} {} is not a policy kind the settings take",
                        policy["apiVersion"].as_str().unwrap_or("?"),
                        kind_of(policy)
                    ));
                }
                let Some(object) = find_resource(&resources, &result.kind, name) else {
                    return Outcome::Skipped(format!("resource {name} not in the test"));
                };
                let expected = match patched {
                    Some(file) => match read_documents(&dir.join(file)) {
                        Ok(docs) => match find_resource(
                            &docs
                                .into_iter()
                                .map(with_default_namespace)
                                .collect::<Vec<_>>(),
                            &result.kind,
                            name,
                        ) {
                            Some(doc) => Some(doc.clone()),
                            // `result: fail` may name a file without the resource.
                            None if result.result == "fail" => None,
                            None => {
                                return Outcome::Skipped(format!("{name} not in {file}"));
                            }
                        },
                        Err(e) => return Outcome::Skipped(format!("{e:#}")),
                    },
                    // A skip without a patched resource: the rule alone must
                    // leave what its policy received as it was (below).
                    None if result.result == "skip" => None,
                    None => return Outcome::Skipped("no patchedResource to compare".into()),
                };
                let rule_skipped = patched.is_none();
                match apply_all(
                    module,
                    &kyverno_policies,
                    policy,
                    object,
                    rule_skipped.then_some(result.rule.as_str()),
                    request_namespace,
                    &cluster,
                ) {
                    Err(outcome) => outcome,
                    Ok((actual, steps, before)) => {
                        let expected = if rule_skipped { Some(before) } else { expected };
                        if let Some(check) = kwctl {
                            line.kwctl = Some(steps.iter().try_for_each(check));
                        }
                        // `result: fail`: the test expects the output to differ.
                        let difference = expected.as_ref().map_or_else(
                            || Some("the expected file does not hold it".to_string()),
                            |expected| compare(&actual, expected),
                        );
                        match (difference, result.result == "fail") {
                            (None, false) | (Some(_), true) => Outcome::Pass,
                            (Some(path), false) => Outcome::Fail(path),
                            (None, true) => Outcome::Fail(
                                "equals the resource the test expects it to differ from".into(),
                            ),
                        }
                    }
                }
            })();
            lines.push(line);
        }
    }
    if lines.is_empty() && spec.results.iter().any(|r| r.patched_resource.is_some()) {
        bail!("no result could be read");
    }
    Ok(lines)
}
