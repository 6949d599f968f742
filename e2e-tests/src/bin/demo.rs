//! `make demo`: evaluate a Binding against a sample Node in the wasm host and
//! show what policy-server would send back.
//!
//! Usage: demo POLICY.wasm REQUEST.json NODE.json [SETTINGS_JSON]

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use policy_host::{InMemoryCluster, PolicyModule};
use serde_json::Value;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [wasm, request, node, rest @ ..] = args.as_slice() else {
        bail!("usage: demo POLICY.wasm REQUEST.json NODE.json [SETTINGS_JSON]");
    };
    let settings: Value =
        serde_json::from_str(rest.first().map_or("{}", String::as_str)).context("settings JSON")?;
    let read = |p: &str| -> Result<Value> {
        serde_json::from_slice(&std::fs::read(p).with_context(|| format!("reading {p}"))?)
            .with_context(|| format!("parsing {p}"))
    };
    let request = read(request)?;
    let node = read(node)?;

    let module = PolicyModule::load(&PathBuf::from(wasm))?;
    println!(
        "policy      {wasm} ({} bytes, compiled in {:.0?})",
        module.size_bytes, module.compile_time
    );
    println!("settings    {settings}");
    let verdict = module.validate_settings(&settings)?;
    if !verdict.valid {
        println!("settings refused: {}", verdict.message.unwrap_or_default());
        std::process::exit(1);
    }
    println!(
        "request     {} {} {}/{} -> Node {}",
        request["operation"].as_str().unwrap_or("?"),
        request["kind"]["kind"].as_str().unwrap_or("?"),
        request["namespace"].as_str().unwrap_or("?"),
        request["name"].as_str().unwrap_or("?"),
        request["object"]["target"]["name"]
            .as_str()
            .or(request["object"]["spec"]["nodeName"].as_str())
            .unwrap_or("?"),
    );
    println!("Node labels {}", node["metadata"]["labels"]);

    let cluster = Arc::new(InMemoryCluster::default().with(node));
    let evaluation = module.evaluate(&request, &settings, cluster.clone())?;
    println!(
        "host calls  {}",
        cluster.calls.lock().map(|c| *c).unwrap_or_default()
    );
    println!("accepted    {}", evaluation.accepted);
    if let Some(message) = &evaluation.message {
        println!("message     {message}");
    }
    for warning in &evaluation.warnings {
        println!("warning     {warning}");
    }
    match &evaluation.patch {
        Some(patch) => println!("JSON Patch:\n{}", serde_json::to_string_pretty(patch)?),
        None => println!("JSON Patch: none (object unchanged)"),
    }
    Ok(())
}
