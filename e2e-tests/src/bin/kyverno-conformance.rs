//! `make kyverno-conformance KYVERNO_TESTS=DIR`: runs every Kyverno CLI test
//! under DIR through the policy (see `policy_host::conformance`), then every
//! chainsaw test with a mutating policy (see `policy_host::chainsaw`), and
//! through kwctl too when it is on PATH. One line per result, then a summary
//! for each kind of test.
//!
//! With `--plan FILE`, also writes each chainsaw test's plan for the real
//! cluster (`e2e-tests/cluster/chainsaw_real.py`): the test, the simulation's
//! verdict, and its operations with the settings they make.
//!
//! Usage: kyverno-conformance POLICY.wasm DIR [ANNOTATED.wasm] [--plan FILE]

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Result, bail};
use policy_host::PolicyModule;
use policy_host::chainsaw::cluster::SimulatedCluster;
use policy_host::chainsaw::{
    NAMESPACE_PLACEHOLDER, TestOutcome, find_chainsaw_tests, out_of_scope, plan_chainsaw_test,
    read_test, run_chainsaw_test,
};
use policy_host::conformance::{Outcome, Step, StepCheck, find_tests, run_test, session_yaml};
use serde_json::{Value, json};

/// Runs one step through kwctl (a ClusterAdmissionPolicy manifest granting the
/// kinds the step read, its host calls replayed) and compares the patch.
fn kwctl_step(annotated: &Path, work: &Path, step: &Step) -> Result<(), String> {
    let mut granted: Vec<Value> = vec![json!({"apiVersion": "v1", "kind": "Node"})];
    // Kubernetes reads name a kind to grant; the OCI calls' payload is the
    // bare image reference.
    for (_, payload, _) in step.exchanges.iter().filter(|(_, p, _)| p.is_object()) {
        let resource = json!({"apiVersion": payload["api_version"], "kind": payload["kind"]});
        if !granted.contains(&resource) {
            granted.push(resource);
        }
    }
    let manifest = json!({
        "apiVersion": "policies.kubewarden.io/v1",
        "kind": "ClusterAdmissionPolicy",
        "metadata": {"name": "conformance"},
        "spec": {
            "module": format!("file://{}", annotated.display()),
            "mutating": true,
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["CREATE", "UPDATE"]}],
            "settings": step.settings,
            "contextAwareResources": granted,
        }
    });
    let write = |name: &str, text: String| -> Result<PathBuf, String> {
        let path = work.join(name);
        std::fs::write(&path, text).map_err(|e| e.to_string())?;
        Ok(path)
    };
    let manifest = write("policy.yaml", manifest.to_string())?;
    let request = write("request.json", step.request.to_string())?;
    let session = write("session.yml", session_yaml(&step.exchanges))?;
    let output = Command::new("kwctl")
        .env("RUST_BACKTRACE", "0")
        .args([
            "run",
            "--allow-context-aware",
            "--replay-host-capabilities-interactions",
        ])
        .arg(&session)
        .arg("--request-path")
        .arg(&request)
        .arg(&manifest)
        .output()
        .map_err(|e| format!("kwctl: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let response: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| {
            format!(
                "kwctl printed no response: {}",
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .last()
                    .unwrap_or_default()
            )
        })?;
    let patch = match response["patch"].as_str() {
        Some(encoded) => {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| e.to_string())?;
            Some(serde_json::from_slice::<Value>(&bytes).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    let (mut got, mut want) = (
        step.request["object"].clone(),
        step.request["object"].clone(),
    );
    for (target, p) in [(&mut got, &patch), (&mut want, &step.patch)] {
        if let Some(p) = p {
            let ops: json_patch::Patch =
                serde_json::from_value(p.clone()).map_err(|e| e.to_string())?;
            json_patch::patch(target, &ops).map_err(|e| e.to_string())?;
        }
    }
    if response["allowed"] != json!(true) {
        return Err(format!(
            "kwctl: not allowed: {}",
            response["status"]["message"]
        ));
    }
    if got != want {
        return Err("kwctl's patch differs from the wasm host's".to_string());
    }
    Ok(())
}

/// `kyverno test` directories: one line per mutate result, then a summary.
fn report_cli_tests(module: &PolicyModule, root: &Path, kwctl: Option<StepCheck>) {
    let (mut pass, mut fail, mut refused, mut skipped, mut kwctl_diff) = (0, 0, 0, 0, 0);
    for test in find_tests(root) {
        let shown = test
            .strip_prefix(root)
            .unwrap_or(&test)
            .display()
            .to_string();
        let lines = match run_test(module, &test, kwctl) {
            Ok(lines) => lines,
            Err(e) => {
                println!("skipped  {shown}: {e:#}");
                continue;
            }
        };
        for line in lines {
            let what = format!("{shown} {}/{} {}", line.policy, line.rule, line.resource);
            match &line.outcome {
                Outcome::Pass => {
                    pass += 1;
                    println!("pass     {what}");
                }
                Outcome::Fail(path) => {
                    fail += 1;
                    println!("FAIL     {what}: differs at {path}");
                }
                Outcome::Refused(why) => {
                    refused += 1;
                    println!("refused  {what}: {why}");
                }
                Outcome::Skipped(why) => {
                    skipped += 1;
                    println!("skipped  {what}: {why}");
                }
            }
            if let Some(Err(e)) = &line.kwctl {
                kwctl_diff += 1;
                println!("  kwctl  {what}: {e}");
            }
        }
    }
    println!(
        "summary: {pass} pass, {fail} fail, {refused} refused, {skipped} skipped; kwctl disagreed on {kwctl_diff}"
    );
}

/// Chainsaw tests with a mutating policy: one line per test, then a summary.
/// Returns each test's plan for the real cluster.
fn report_chainsaw_tests(
    module: &PolicyModule,
    root: &Path,
    kwctl: Option<StepCheck>,
) -> Vec<Value> {
    let mut plans = Vec::new();
    let (mut pass, mut fail, mut refused, mut skipped) = (0, 0, 0, 0);
    let (mut not_counted, mut kwctl_checked, mut kwctl_diff) = (0, 0, 0);
    for path in find_chainsaw_tests(root) {
        let shown = path
            .parent()
            .unwrap_or(&path)
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        let test = match read_test(&path) {
            Ok(test) => test,
            Err(e) => {
                println!("chainsaw skipped  {shown}: {e:#}");
                skipped += 1;
                continue;
            }
        };
        if out_of_scope(&test).is_some() {
            not_counted += 1;
            continue;
        }
        let report = run_chainsaw_test(module, &test, kwctl);
        let (verdict, why) = match &report.outcome {
            TestOutcome::Pass => ("pass", ""),
            TestOutcome::Fail(why) => ("fail", why.as_str()),
            TestOutcome::Refused(why) => ("refused", why.as_str()),
            TestOutcome::Skipped(why) => ("skipped", why.as_str()),
        };
        plans.push(json!({
            "test": shown,
            "simulation": {"outcome": verdict, "why": why},
            "registry_image": report.unreachable_image,
            "simulated_objects": report.objects,
            "ops": plan_chainsaw_test(module, &test),
        }));
        match &report.outcome {
            TestOutcome::Pass => {
                pass += 1;
                println!("chainsaw pass     {shown}");
            }
            TestOutcome::Fail(why) => {
                fail += 1;
                println!("chainsaw FAIL     {shown}: {why}");
            }
            TestOutcome::Refused(why) => {
                refused += 1;
                println!("chainsaw refused  {shown}: {why}");
            }
            TestOutcome::Skipped(why) => {
                skipped += 1;
                println!("chainsaw skipped  {shown}: {why}");
            }
        }
        for note in &report.notes {
            println!("  note   {note}");
        }
        kwctl_checked += report.kwctl_checked;
        kwctl_diff += report.kwctl_disagreements.len();
        for e in &report.kwctl_disagreements {
            println!("  kwctl  {e}");
        }
    }
    println!(
        "chainsaw summary: {pass} pass, {fail} fail, {refused} refused, {skipped} skipped ({not_counted} tests without a mutating policy, or of a ClusterPolicy with a `kyverno test`, not counted); kwctl ran {kwctl_checked} requests, disagreed on {kwctl_diff}"
    );
    plans
}

fn main() -> Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let plan_file = match args.iter().position(|a| a == "--plan") {
        Some(at) if at + 1 < args.len() => Some(args.drain(at..at + 2).nth(1).unwrap_or_default()),
        Some(_) => bail!("--plan needs a file"),
        None => None,
    };
    let [wasm, dir, rest @ ..] = args.as_slice() else {
        bail!("usage: kyverno-conformance POLICY.wasm DIR [ANNOTATED.wasm] [--plan FILE]");
    };
    let module = PolicyModule::load(Path::new(wasm))?;
    let annotated = rest.first().map(PathBuf::from).filter(|p| p.exists());
    let work = std::env::temp_dir().join(format!("kyverno-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let kwctl_available = annotated.is_some()
        && Command::new("kwctl")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    let check =
        |step: &Step| kwctl_step(annotated.as_deref().unwrap_or(Path::new("")), &work, step);
    let kwctl: Option<StepCheck> = if kwctl_available { Some(&check) } else { None };
    println!(
        "kwctl: {}",
        if kwctl_available {
            "every step also runs through kwctl"
        } else {
            "SKIPPED (kwctl or the annotated module not available)"
        }
    );

    let root = Path::new(dir);
    report_cli_tests(&module, root, kwctl);
    let plans = report_chainsaw_tests(&module, root, kwctl);
    if let Some(file) = plan_file {
        // The simulated cluster as a test starts, which the real one copies
        // (its Node, its Namespaces), and the namespace that stands for the
        // test's own in the plans.
        let plan = json!({
            "cluster": SimulatedCluster::default().objects(),
            "test_namespace": NAMESPACE_PLACEHOLDER,
            "tests": plans,
        });
        std::fs::write(&file, serde_json::to_string(&plan)?)?;
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}
