//! The policy's half of the CEL judge of `make differential`
//! (`e2e-tests/differential/`): each case's expression, with its variables,
//! goes through `evaluate` (the entry point `validate` uses) inside a
//! MutatingAdmissionPolicy, and its value is caught once the policy has
//! matched, before any mutation: typed, so that the runner compares it with
//! cel-go's. Each case runs three ways: as shipped, with the direct evaluator
//! off, and with the subset parser off too.

use std::cell::OnceCell;
use std::io::{BufRead, Write};

use ::cel::Value as CelValue;
use ::cel::objects::{Key, OptionalValue};
use base64::Engine;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::admission::ValidatePayload;
use crate::cel::engine;
use crate::cel::eval::evaluation::Evaluation;
use crate::cel::eval::request::{CelRequest, Evaluated};
use crate::cel::program::Evaluators;
use crate::host::cluster::CachedCluster;
use crate::shared::request_facts::RequestFacts;
use crate::testing::fake_cluster::{FakeCluster, get};

/// The variable holding the case's expression.
const RESULT: &str = "differential_result";

/// The case's value, evaluated as the engine would once the policy
/// admitted the request (its matching and `matchConditions` passed), before
/// any mutation; `None` when the request does not get that far.
fn probe(payload: &[u8], cluster: &FakeCluster, evaluators: Evaluators) -> Option<Value> {
    let decoded: ValidatePayload = serde_json::from_slice(payload).ok()?;
    let settings = decoded.settings.map_or("{}", RawValue::get);
    let plan = crate::settings::load_for_request(settings.as_bytes())
        .ok()?
        .with_evaluators(evaluators);
    let policy = plan
        .rule_groups
        .iter()
        .find_map(|group| group.cel.as_deref())?;
    let object: Value = serde_json::from_str(decoded.request.raw("object")?.get()).ok()?;
    let facts = RequestFacts::from_request(&decoded.request, &plan.resource_kinds);
    let cached = CachedCluster::new(cluster).with_namespace_masks(plan.namespace_masks());
    let (request_value, old_object, old_object_json) =
        (OnceCell::new(), OnceCell::new(), OnceCell::new());
    let request = CelRequest {
        facts: &facts,
        admission: &decoded.request,
        request: &request_value,
        old_object: &old_object,
        old_object_json: &old_object_json,
        kinds: &plan.resource_kinds,
        cluster: &cached,
    };
    // The case's policy is a MutatingAdmissionPolicy: never autogen.
    if engine::applies(policy, &object, &request)?.is_some() {
        return None;
    }
    let mut evaluation = Evaluation::new(policy, &request, object.clone());
    if !engine::admitted(policy, &request, &mut evaluation).ok()? {
        return None;
    }
    let mut direct_answered = false;
    let answer = match evaluation.evaluate("variables.differential_result", || RESULT.into()) {
        Ok(Evaluated::Json(value)) => {
            direct_answered = true;
            json_typed(&value)
        }
        Ok(Evaluated::Cel(value)) => cel_typed(&value, 0),
        Err(why) => Err(why),
    };
    // The direct evaluator's answers are JSON, which has one kind of number:
    // the runner compares them in JSON's terms.
    let json = answer.is_ok() && direct_answered;
    let mut answer = match answer {
        Ok(value) => json!({"status": "value", "value": value, "json": json}),
        Err(why) => json!({"status": "eval_error", "message": why}),
    };
    // What the case's variables (its expression is one) cost in cel-go's
    // runtime cost model, when every expression counts it.
    if evaluators.count_every_cost
        && let Some(fields) = answer.as_object_mut()
    {
        fields.insert("cost".into(), json!(evaluation.variables_cost()));
    }
    Some(answer)
}

/// A value from the direct evaluator, which answers in JSON: numbers that
/// fit an i64 are CEL ints there, as in `from_json`.
fn json_typed(value: &Value) -> Result<Value, String> {
    Ok(match value {
        Value::Null => json!({"null": null}),
        Value::Bool(b) => json!({"bool": b}),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => json!({"int": i.to_string()}),
            (None, Some(u), _) => json!({"uint": u.to_string()}),
            (_, _, Some(f)) => json!({"double": f}),
            _ => return Err(format!("number {n}")),
        },
        Value::String(s) => json!({"string": s}),
        Value::Array(items) => {
            json!({"list": items.iter().map(json_typed).collect::<Result<Vec<_>, _>>()?})
        }
        Value::Object(map) => {
            let mut entries = map
                .iter()
                .map(|(k, v)| Ok(json!([{"string": k}, json_typed(v)?])))
                .collect::<Result<Vec<_>, String>>()?;
            entries.sort_by_key(|entry| entry.get(0).map(Value::to_string));
            json!({"map": entries})
        }
    })
}

fn double(f: f64) -> Value {
    if f.is_nan() {
        json!("NaN")
    } else if f.is_infinite() {
        json!(if f > 0.0 { "+Inf" } else { "-Inf" })
    } else {
        json!(f)
    }
}

fn cel_typed(value: &CelValue, depth: usize) -> Result<Value, String> {
    if depth > 128 {
        return Err("nested too deep".into());
    }
    let depth = depth + 1;
    Ok(match value {
        CelValue::Null => json!({"null": null}),
        CelValue::Bool(b) => json!({"bool": b}),
        CelValue::Int(i) => json!({"int": i.to_string()}),
        CelValue::UInt(u) => json!({"uint": u.to_string()}),
        CelValue::Float(f) => json!({"double": double(*f)}),
        CelValue::String(s) => json!({"string": s.as_str()}),
        CelValue::Bytes(b) => {
            json!({"bytes": base64::engine::general_purpose::STANDARD.encode(b.as_slice())})
        }
        CelValue::List(items) => json!({"list": items
            .iter()
            .map(|item| cel_typed(item, depth))
            .collect::<Result<Vec<_>, _>>()?}),
        CelValue::Map(map) => {
            let mut entries = Vec::new();
            for (key, item) in map.map.iter() {
                let key = match key {
                    Key::Int(i) => json!({"int": i.to_string()}),
                    Key::Uint(u) => json!({"uint": u.to_string()}),
                    Key::Bool(b) => json!({"bool": b}),
                    Key::String(s) => json!({"string": s.as_str()}),
                };
                entries.push(json!([key, cel_typed(item, depth)?]));
            }
            entries.sort_by_key(|entry| entry.get(0).map(Value::to_string));
            json!({"map": entries})
        }
        CelValue::Opaque(_) if crate::testing::cel_libraries::nanos(value).is_some() => {
            match crate::testing::cel_libraries::nanos(value) {
                Some(("timestamp", n)) => json!({"timestamp": format!(
                    "{}.{:09}", n.div_euclid(1_000_000_000), n.rem_euclid(1_000_000_000))}),
                Some((_, n)) => json!({"duration": n.to_string()}),
                None => Value::Null,
            }
        }
        CelValue::Opaque(opaque) => match opaque.downcast_ref::<OptionalValue>() {
            Some(optional) => match optional.value() {
                Some(inner) => json!({"optional": cel_typed(inner, depth)?}),
                None => json!({"optional_none": true}),
            },
            None => {
                json!({"opaque": opaque.runtime_type_name(), "string": format!("{:?}", opaque.as_debug())})
            }
        },
        CelValue::Struct(_) => {
            json!({"object": "struct", "fields": crate::cel::libraries::values::to_json(value)?})
        }
        CelValue::Function(name, _) => json!({"other": "function", "string": name.as_str()}),
    })
}

/// One case, one way: the answer as the oracle gives it.
fn answer(case: &Value, evaluators: Evaluators) -> Value {
    let mut variables = case
        .get("variables")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    variables.push(json!({"name": RESULT, "expression": case.get("expression")}));
    let settings = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "differential"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"], "resources": ["*", "*/*"]}]},
            "failurePolicy": "Fail", "reinvocationPolicy": "Never",
            "variables": variables,
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}}],
        },
    });
    let raw = serde_json::to_vec(&settings).unwrap_or_default();
    let verdict = crate::check_settings(&raw);
    if !verdict.valid {
        return json!({"status": "compile_error", "message": verdict.message});
    }
    let mut table = FakeCluster::default();
    if let Some(namespace) = case.get("namespace").filter(|n| !n.is_null()) {
        let name = namespace
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        table = table.with(get("v1", "Namespace", None, name), namespace.clone());
    }
    // The request `run.py` built, as the API server would send it.
    let payload = json!({"request": case.get("request"), "settings": settings});
    let payload = serde_json::to_vec(&payload).unwrap_or_default();
    match probe(&payload, &table, evaluators) {
        Some(answer) => answer,
        // The policy stopped before the probe: a failure of the request, or
        // not reached.
        None => {
            let response = crate::decide_with(&payload, &table, &table, evaluators).into_response();
            if response.accepted {
                json!({"status": "not_reached"})
            } else {
                json!({"status": "eval_error", "message": response.message})
            }
        }
    }
}

fn with_paths(direct: bool, subset_parser: bool, case: &Value) -> Value {
    let evaluators = Evaluators {
        subset_parser,
        direct,
        count_every_cost: !direct,
    };
    std::panic::catch_unwind(|| answer(case, evaluators))
        .unwrap_or_else(|_| json!({"status": "panic"}))
}

/// Reads `DIFFERENTIAL_CASES` (JSON lines, each with the admission request
/// `e2e-tests/differential/run.py` made for it) and writes an answer a line to
/// `DIFFERENTIAL_ANSWERS`: `{"id", "paths": {"shipped", "crate_evaluator",
/// "crate_parser"}}`. Run by `make differential`, not by `cargo test`.
#[test]
#[ignore = "run by make differential"]
fn differential_cel() {
    let (Ok(cases), Ok(answers)) = (
        std::env::var("DIFFERENTIAL_CASES"),
        std::env::var("DIFFERENTIAL_ANSWERS"),
    ) else {
        panic!("DIFFERENTIAL_CASES and DIFFERENTIAL_ANSWERS name the files");
    };
    let cases = std::io::BufReader::new(std::fs::File::open(cases).unwrap());
    let mut out = std::io::BufWriter::new(std::fs::File::create(answers).unwrap());
    let limit = std::env::var("DIFFERENTIAL_CASE_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(20.0);
    let limit = std::time::Duration::from_secs_f64(limit);
    for line in cases.lines() {
        let case: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let paths = all_paths_within(&case, limit);
        writeln!(out, "{}", json!({"id": case.get("id"), "paths": paths})).unwrap();
    }
}

/// The three ways' answers, or `timeout` for each when they take longer than
/// `limit` (DIFFERENTIAL_CASE_SECONDS, 20 s unless set). The case is
/// abandoned, not stopped: its thread may go on, and the runner fails the run
/// on the timeout anyway.
fn all_paths_within(case: &Value, limit: std::time::Duration) -> Value {
    let (sender, receiver) = std::sync::mpsc::channel();
    let case = case.clone();
    std::thread::spawn(move || {
        let _ = sender.send(json!({
            "shipped": with_paths(true, true, &case),
            "crate_evaluator": with_paths(false, true, &case),
            "crate_parser": with_paths(false, false, &case),
        }));
    });
    receiver.recv_timeout(limit).unwrap_or_else(|_| {
        let timeout =
            json!({"status": "timeout", "message": format!("no answer within {limit:?}")});
        json!({"shipped": timeout, "crate_evaluator": timeout, "crate_parser": timeout})
    })
}
