//! Reading a chainsaw test (`chainsaw-test.yaml`, `chainsaw.kyverno.io/v1alpha1`
//! `Test`) into the operations the runner knows, with the documents each one
//! names read from its files.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::conformance::{find_files_named, read_documents};

/// How an object reaches the cluster: chainsaw's `apply` creates or merges,
/// `create` only creates, `update` replaces, `patch` merges into what exists.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verb {
    Apply,
    Create,
    Update,
    Patch,
}

/// What the step expects of an apply: chainsaw's `expect` with a
/// `($error != null): true` check means the API server must refuse it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expectation {
    Success,
    Refusal,
}

/// One operation of a step, as the runner plays it.
#[derive(Debug, Clone)]
pub enum Operation {
    Apply {
        verb: Verb,
        documents: Vec<Value>,
        expect: Expectation,
    },
    /// Every document must be a subset of some object in the cluster.
    Assert(Vec<Value>),
    /// No object in the cluster may match any document.
    Error(Vec<Value>),
    Delete(Vec<Value>),
    /// A step template that waits for a policy to be ready: the loaded
    /// (validated) settings are that.
    PolicyReady,
    /// Nothing to wait for: admission is synchronous here.
    Sleep,
    /// A script that only reconfigures Kyverno: noted, not played.
    Noted(String),
    /// What the simulation cannot play; the test is skipped with this reason.
    Unsupported(String),
}

/// A test: its name, its directory, and per step the operations in order.
#[derive(Debug, Clone)]
pub struct ChainsawTest {
    pub name: String,
    pub dir: PathBuf,
    pub steps: Vec<Vec<Operation>>,
}

/// Every `chainsaw-test.yaml` under `root`, sorted.
pub fn find_chainsaw_tests(root: &Path) -> Vec<PathBuf> {
    find_files_named(root, "chainsaw-test.yaml")
}

pub fn read_test(path: &Path) -> Result<ChainsawTest> {
    let dir = path
        .parent()
        .context("a test file has a directory")?
        .to_path_buf();
    let text = std::fs::read_to_string(path)?;
    let test: Value = serde_yaml::from_str(&text).context("parsing the chainsaw test")?;
    if test["kind"] != "Test"
        || !test["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .starts_with("chainsaw.kyverno.io/")
    {
        bail!("not a chainsaw Test");
    }
    let mut steps = Vec::new();
    for (index, step) in test["spec"]["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let number = index + 1;
        let mut operations = Vec::new();
        if let Some(template) = step["use"]["template"].as_str() {
            operations.push(template_operation(&dir, template, &step["use"], number));
        }
        for op in step["try"].as_array().into_iter().flatten() {
            operations.push(operation(&dir, op, number));
        }
        steps.push(operations);
    }
    Ok(ChainsawTest {
        name: test["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        dir,
        steps,
    })
}

/// kyverno/kyverno's step templates, by name (the templates themselves live
/// outside the test directories): `create-policy.yaml` applies its `file`
/// binding, `*-ready.yaml` waits for the policy to be ready.
fn template_operation(dir: &Path, template: &str, using: &Value, step: usize) -> Operation {
    let binding = |name: &str| {
        using["with"]["bindings"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|b| b["name"] == name)
            .and_then(|b| b["value"].as_str())
    };
    let file_name = Path::new(template)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if file_name.ends_with("-ready.yaml") {
        return Operation::PolicyReady;
    }
    if file_name == "create-policy.yaml"
        && let Some(file) = binding("file")
    {
        return match read_documents(&dir.join(file)) {
            Ok(documents) => Operation::Apply {
                verb: Verb::Apply,
                documents,
                expect: Expectation::Success,
            },
            Err(e) => Operation::Unsupported(format!("step {step}: {e:#}")),
        };
    }
    Operation::Unsupported(format!("step {step} uses the template {template}"))
}

/// The documents of an operation: its `file` (relative to the test) or its
/// inline `resource`.
fn documents(dir: &Path, body: &Value) -> Result<Vec<Value>> {
    if let Some(file) = body["file"].as_str() {
        if file.contains('*') {
            bail!("file glob {file}");
        }
        return read_documents(&dir.join(file));
    }
    match body.get("resource") {
        Some(resource) => Ok(vec![resource.clone()]),
        None => bail!("neither file nor resource"),
    }
}

fn expectation(body: &Value) -> Result<Expectation, String> {
    let Some(expect) = body.get("expect") else {
        return Ok(Expectation::Success);
    };
    let text = expect.to_string().replace(' ', "");
    if text.contains("$error!=null") {
        Ok(Expectation::Refusal)
    } else if text.contains("$error==null") {
        Ok(Expectation::Success)
    } else {
        Err(format!("an expect the runner does not read: {expect}"))
    }
}

fn operation(dir: &Path, op: &Value, step: usize) -> Operation {
    let unsupported = |what: &str| Operation::Unsupported(format!("step {step} {what}"));
    for (key, verb) in [
        ("apply", Verb::Apply),
        ("create", Verb::Create),
        ("update", Verb::Update),
        ("patch", Verb::Patch),
    ] {
        if let Some(body) = op.get(key) {
            let expect = match expectation(body) {
                Ok(expect) => expect,
                Err(why) => return unsupported(&format!("{key}: {why}")),
            };
            return match documents(dir, body) {
                Ok(documents) => Operation::Apply {
                    verb,
                    documents,
                    expect,
                },
                Err(e) => unsupported(&format!("{key}: {e:#}")),
            };
        }
    }
    for key in ["assert", "error", "delete"] {
        if let Some(body) = op.get(key) {
            // A delete names its object with `ref`.
            let found = match body.get("ref") {
                Some(reference) => Ok(vec![reference.clone()]),
                None => documents(dir, body),
            };
            let documents = match found {
                Ok(documents) => documents,
                Err(e) => return unsupported(&format!("{key}: {e:#}")),
            };
            return match key {
                "assert" => Operation::Assert(documents),
                "error" => Operation::Error(documents),
                _ => Operation::Delete(documents),
            };
        }
    }
    if op.get("sleep").is_some() {
        return Operation::Sleep;
    }
    if let Some(content) = op["script"]["content"].as_str() {
        if content.contains("configmap -n kyverno kyverno") && content.contains("kubectl apply") {
            return Operation::Noted(format!(
                "step {step} edits Kyverno's resource filters (its ConfigMap), which do not exist in Kubewarden"
            ));
        }
        return unsupported("runs a script");
    }
    let kind = op
        .as_object()
        .and_then(|m| {
            m.keys()
                .find(|k| !matches!(k.as_str(), "name" | "description"))
        })
        .cloned()
        .unwrap_or_default();
    unsupported(&format!("runs a `{kind}` operation"))
}
