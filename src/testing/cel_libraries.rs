//! Helpers for the CEL libraries' tests: an expression evaluated in the
//! environment its text asks for, tables of expressions and their values,
//! and a whole MutatingPolicy's answer through `evaluate`.
use std::collections::BTreeSet;
use std::sync::Arc;

use ::cel::{ExecutionError, Value};
use kubewarden_policy_sdk::response::ValidationResponse;
use serde_json::json;

use crate::cel::check::type_check::{FunctionNames, check};
use crate::cel::check::types::Ty;
use crate::cel::libraries::time::{Duration, Timestamp};
use crate::cel::{eval::environment::runtime_env, program::library_use::Libraries};

/// The load-time check of one expression, for the tests that evaluate
/// expressions: what they expect to run must pass it.
pub fn check_source(source: &str) -> Result<Ty, String> {
    let compiled = crate::cel::program::compile(source, "e")?;
    check(
        source,
        &compiled.expression,
        &std::collections::BTreeMap::new(),
        &mut FunctionNames::new(),
        false,
    )
    .map_err(|why| format!("check: {why}"))
}

/// What one expression may call, read from its tree.
pub fn libraries_for_source(source: &str) -> Libraries {
    crate::cel::program::compile(source, "e")
        .map(|compiled| compiled.names.libraries)
        .unwrap_or_default()
}

/// A timestamp or duration as the differential run compares them: its
/// kind and nanoseconds (since the epoch, for a timestamp).
pub fn nanos(value: &Value) -> Option<(&'static str, i128)> {
    let Value::Opaque(opaque) = value else {
        return None;
    };
    if let Some(t) = opaque.downcast_ref::<Timestamp>() {
        return Some(("timestamp", t.0.nanos));
    }
    opaque.downcast_ref::<Duration>().map(|d| ("duration", d.0))
}

/// Evaluates `source` in the environment its text asks for.
pub fn eval(source: &str) -> Result<Value, ExecutionError> {
    check_source(source).map_err(|e| ExecutionError::function_error("check", e))?;
    let libraries = libraries_for_source(source);
    let env = Arc::new(runtime_env(&BTreeSet::new(), libraries));
    let mut compiled = crate::cel::program::compile(source, "e")
        .map_err(|e| ExecutionError::function_error("compile", e))?;
    libraries.prepare(&mut compiled.expression);
    let context = ::cel::Context::with_env(env);
    context.resolve(&compiled.expression)
}

/// What `source` costs in cel-go's runtime cost model, run with `object`
/// as `object`; `Err`: why it failed (past the limit, the limit's message).
pub fn cost(source: &str, object: &serde_json::Value) -> Result<u64, String> {
    use crate::cel::libraries::{cost_tracker, runtime_cost};
    let libraries = libraries_for_source(source);
    let env = Arc::new(runtime_env(&BTreeSet::new(), libraries));
    let mut compiled = crate::cel::program::compile(source, "e")?;
    // The calls whose overload cel-go's check leaves open, as a policy's
    // load-time check works them out (`object` is `dyn`).
    let open_overloads = crate::cel::check::type_check::node_types(
        source,
        &compiled.expression,
        &std::collections::BTreeMap::new(),
        &mut crate::cel::check::type_check::FunctionNames::new(),
        false,
    )
    .map(|(_, nodes)| crate::cel::check::typed_calls::open_overloads(&compiled.expression, &nodes))
    .unwrap_or_default();
    libraries.prepare_counting(
        &mut compiled.expression,
        true,
        crate::cel::program::metering::Interpreter::Kubernetes,
        &open_overloads,
    );
    let mut context = ::cel::Context::with_env(env);
    let object: Box<dyn ::cel::common::value::Val> =
        crate::cel::libraries::values::from_json(object)
            .try_into()
            .map_err(|e: ExecutionError| e.to_string())?;
    context.add_variable_as_val("object", object);
    cost_tracker::clear();
    runtime_cost::clear();
    let outcome = context.resolve(&compiled.expression);
    if let Some(why) = cost_tracker::failed() {
        return Err(why.to_string());
    }
    outcome.map_err(|e| e.to_string())?;
    Ok(runtime_cost::spent())
}

/// Checks each `(expression, expected)`; `None` expects an error.
pub fn table(cases: &[(&str, Option<Value>)]) {
    for (source, expected) in cases {
        let got = eval(source);
        match expected {
            Some(value) => assert_eq!(got.as_ref(), Ok(value), "{source}"),
            None => assert!(got.is_err(), "{source}: expected an error, got {got:?}"),
        }
    }
}

pub fn s(text: &str) -> Option<Value> {
    Some(Value::from(text))
}
pub fn b(value: bool) -> Option<Value> {
    Some(Value::Bool(value))
}
pub fn i(value: i64) -> Option<Value> {
    Some(Value::Int(value))
}

/// What a whole MutatingPolicy answers for the scheduler's Binding
/// (`test_data/binding.json`, node `node-1`) when its one mutation sets the
/// annotation `result` to `expression`, run through `crate::evaluate` as
/// policy-server would.
pub fn bound(expression: &str) -> ValidationResponse {
    let policy = serde_json::json!({"apiVersion": "policies.kyverno.io/v1",
        "kind": "MutatingPolicy", "metadata": {"name": "library"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""],
            "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/binding"]}]},
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            format!("Object{{metadata: Object.metadata{{annotations: {{'result': {expression}}}}}}}")}}]}});
    crate::testing::fake_cluster::run("binding.json", policy)
}

/// The annotations [`bound`] writes; the policy must admit the request.
pub fn annotated(expression: &str) -> serde_json::Value {
    let response = bound(expression);
    assert!(response.accepted, "{expression}: {:?}", response.message);
    crate::testing::fake_cluster::annotations(&response)
}

/// Whether a policy of `kind` with `expression` as a variable loads.
pub fn policy_loads(kind: &str, expression: &str) -> Result<(), String> {
    let mut settings = json!({
        "apiVersion": "policies.kyverno.io/v1", "kind": kind, "metadata": {"name": "p"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["pods"]}]},
            "variables": [{"name": "v", "expression": expression}],
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}}],
        },
    });
    if kind == "MutatingAdmissionPolicy" {
        settings["apiVersion"] = json!("admissionregistration.k8s.io/v1");
        settings["spec"]["reinvocationPolicy"] = json!("Never");
    }
    let verdict = crate::check_settings(&serde_json::to_vec(&settings).unwrap_or_default());
    if verdict.valid {
        Ok(())
    } else {
        Err(verdict.message.unwrap_or_default())
    }
}
