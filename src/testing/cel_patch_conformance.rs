//! Kubernetes' own table tests of mutating admission policies' patches
//! (kubernetes/apiserver `pkg/admission/plugin/policy/mutating/patch`:
//! `smd_test.go` for ApplyConfiguration, `json_patch_test.go` for
//! JSONPatch), run through `evaluate` as a MutatingAdmissionPolicy over an
//! `apps/v1` Deployment. Ignored: the cases are not in this repository.
//! `K8S_PATCH_CASES` names a JSON list of `{file, name, patchType,
//! expression, object, oldObject, expected | error}` made from the Go tables
//! (each object as the JSON of the typed Go value); docs/cel.md says how it
//! was run.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::testing::fake_cluster::{FakeCluster, run_on};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    file: String,
    name: String,
    patch_type: String,
    expression: String,
    object: Value,
    #[serde(default)]
    old_object: Value,
    #[serde(default)]
    expected: Value,
    #[serde(default)]
    error: Option<String>,
}

/// The object as Go's JSON encoding of a typed Deployment gives it, which is
/// what Kubernetes' JSON patcher patches: parents that are not pointers are
/// there, empty.
fn as_encoded(object: &Value) -> Value {
    let mut object = object.clone();
    for (pointer, empty) in [
        ("/metadata", json!({})),
        ("/spec", json!({})),
        ("/spec/template", json!({})),
        ("/spec/template/metadata", json!({})),
        ("/spec/template/spec", json!({})),
        ("/spec/template/spec/containers", Value::Null),
        ("/spec/strategy", json!({})),
        ("/status", json!({})),
    ] {
        if object.pointer(pointer).is_none() {
            let (parent, field) = pointer.rsplit_once('/').unwrap();
            if let Some(Value::Object(map)) = object.pointer_mut(parent) {
                map.insert(field.to_string(), empty);
            }
        }
    }
    object
}

/// Empty maps and lists and nulls left out: Kubernetes' semantic equality
/// takes nil and empty alike.
fn pruned(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), pruned(v)))
                .filter(|(_, v)| !is_empty(v))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(pruned).collect()),
        other => other.clone(),
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

fn settings(case: &Case) -> Value {
    let field = if case.patch_type == "JSONPatch" {
        "jsonPatch"
    } else {
        "applyConfiguration"
    };
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "case"},
        "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["deployments"]}]},
            "mutations": [{"patchType": case.patch_type, field: {"expression": case.expression}}]}})
}

/// The admission request the API server would send: its objects carry their
/// kind, which the Go tables' typed values leave empty.
fn request(case: &Case, object: &Value) -> Value {
    let mut object = object.clone();
    object["apiVersion"] = json!("apps/v1");
    object["kind"] = json!("Deployment");
    let mut request = json!({"uid": "1", "operation": "CREATE",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "requestKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "requestResource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "name": "", "namespace": "default",
        "userInfo": {"username": "admin"}, "object": object});
    if !case.old_object.is_null() {
        let mut old = case.old_object.clone();
        old["apiVersion"] = json!("apps/v1");
        old["kind"] = json!("Deployment");
        request["oldObject"] = old;
    }
    request
}

#[test]
#[ignore]
fn kubernetes_patch_tables() {
    let Some(cases) =
        crate::testing::cel_spec_conformance::cases_from_env::<Case>("K8S_PATCH_CASES")
    else {
        return;
    };
    let mut failed = Vec::new();
    let mut outcomes: std::collections::BTreeMap<&str, usize> = Default::default();
    for case in &cases {
        let object = if case.patch_type == "JSONPatch" {
            as_encoded(&case.object)
        } else {
            case.object.clone()
        };
        let settings = settings(case);
        let verdict = crate::check_settings(&serde_json::to_vec(&settings).unwrap());
        let outcome = if !verdict.valid {
            Err(format!(
                "refused at load: {}",
                verdict.message.unwrap_or_default()
            ))
        } else {
            let response = run_on(request(case, &object), settings, &FakeCluster::default());
            if response.accepted {
                // Compared without the kind, as the tables' expected values are.
                let mut got = response.mutated_object.unwrap_or(object);
                if let Value::Object(map) = &mut got {
                    map.remove("apiVersion");
                    map.remove("kind");
                }
                Ok(got)
            } else {
                Err(response.message.unwrap_or_default())
            }
        };
        let verdict = match (&case.error, outcome) {
            (Some(wanted), Err(got)) if got.contains(wanted.as_str()) => Ok("pass"),
            // Kubernetes' test compiles the expression as it patches; the
            // API server refuses such a policy when it is created.
            (Some(_), Err(got)) if got.starts_with("refused at load") => Ok("refused at load"),
            (Some(_), Err(_)) => Ok("an error in other words"),
            (Some(wanted), Ok(got)) => Err(format!("wanted error '{wanted}', got {got}")),
            (None, Err(got)) => Err(format!("unexpected error: {got}")),
            (None, Ok(got)) if pruned(&got) == pruned(&case.expected) => Ok("pass"),
            (None, Ok(got)) => Err(format!(
                "got {}\nwanted {}",
                pruned(&got),
                pruned(&case.expected)
            )),
        };
        match verdict {
            Ok(how) => *outcomes.entry(how).or_default() += 1,
            Err(why) if ON_PURPOSE.iter().any(|(name, _)| *name == case.name) => {
                *outcomes.entry("differs on purpose").or_default() += 1;
                println!("ON PURPOSE {}: {}: {why}", case.file, case.name);
            }
            Err(why) => failed.push(format!("{}: {}: {why}", case.file, case.name)),
        }
    }
    for failure in &failed {
        println!("FAIL {failure}");
    }
    println!("{} cases: {outcomes:?}, {} fail", cases.len(), failed.len());
    assert!(failed.is_empty());
}

/// Cases whose outcome this policy changes on purpose, and why.
const ON_PURPOSE: &[(&str, &str)] = &[(
    "JSONPatch key escaping",
    "the label key k8s.io/x~y is not a valid label key: the policy leaves it out with a warning instead of sending a patch the API server would refuse",
)];
