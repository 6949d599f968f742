//! The policy's half of `make differential`'s mutation judges: each case (a
//! JSON line `{"id", "settings", "request", "resources"}`) through
//! `policy.wasm` as policy-server runs it (settings validated, then a fresh
//! instance per request), answered as a JSON line `{"id", "settings_valid",
//! "settings_message", "accepted", "message", "object"}`, where `object` is
//! the request's object with the policy's patch applied (absent when the
//! policy did not mutate it).
//!
//! Each call into the module is interrupted after DIFFERENTIAL_CASE_SECONDS
//! (20 s unless set): the case is then answered `{"host_error", "timeout":
//! true}`, which the runner counts as a crash.
//!
//! Usage: differential POLICY.wasm < cases.jsonl

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use policy_host::{InMemoryCluster, PolicyModule};
use serde_json::{Value, json};

fn answer(module: &PolicyModule, case: &Value) -> Result<Value> {
    let settings = case.get("settings").cloned().unwrap_or(Value::Null);
    let verdict = module.validate_settings(&settings)?;
    if !verdict.valid {
        return Ok(json!({"settings_valid": false, "settings_message": verdict.message}));
    }
    let mut cluster = InMemoryCluster::default();
    for object in case
        .get("resources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        cluster.insert(object.clone());
    }
    let request = case.get("request").cloned().unwrap_or(Value::Null);
    let evaluation = module.evaluate(&request, &settings, Arc::new(cluster))?;
    let object = match (&evaluation.patch, request.get("object")) {
        (Some(patch), Some(original)) => {
            let mut object = original.clone();
            let patch: json_patch::Patch = serde_json::from_value(patch.clone())?;
            json_patch::patch(&mut object, &patch)?;
            Some(object)
        }
        _ => None,
    };
    Ok(
        json!({"settings_valid": true, "accepted": evaluation.accepted,
        "message": evaluation.message, "warnings": evaluation.warnings, "object": object}),
    )
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [wasm] = args.as_slice() else {
        bail!("usage: differential POLICY.wasm < cases.jsonl");
    };
    let seconds = std::env::var("DIFFERENTIAL_CASE_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(20.0);
    let module = PolicyModule::load_with_limit(
        &PathBuf::from(wasm),
        Some(Duration::from_secs_f64(seconds)),
    )?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for line in std::io::stdin().lock().lines() {
        let case: Value = serde_json::from_str(&line?).context("a case line")?;
        let mut answer = answer(&module, &case).unwrap_or_else(|e| {
            // wasmtime's trap when the epoch deadline passes.
            let timeout = format!("{e:#}").contains("interrupt");
            json!({"host_error": format!("{e:#}"), "timeout": timeout})
        });
        answer["id"] = case.get("id").cloned().unwrap_or(Value::Null);
        writeln!(out, "{answer}")?;
    }
    Ok(())
}
