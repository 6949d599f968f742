//! End-to-end cases: the built policy.wasm in the wasm host, host calls
//! answered from kwctl session files. The cases live in `e2e-tests/cases.json`
//! so the bats suite runs the very same ones through kwctl.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};
use policy_host::{Granted, PolicyModule, SessionReplay};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    #[serde(default)]
    about: String,
    request: String,
    settings: Value,
    session: String,
    /// What the policy is granted, as in a ClusterAdmissionPolicy; absent,
    /// what metadata.yml declares (the annotated module's own list).
    #[serde(default, rename = "contextAwareResources")]
    context_aware_resources: Option<Vec<Resource>>,
    expect: Expect,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Resource {
    api_version: String,
    kind: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    context_aware_resources: Vec<Resource>,
}

fn metadata_resources() -> Result<Vec<Resource>, Failed> {
    let text = std::fs::read_to_string(repo_root().join("metadata.yml"))
        .map_err(|e| format!("metadata.yml: {e}"))?;
    let metadata: Metadata =
        serde_yaml::from_str(&text).map_err(|e| format!("metadata.yml: {e}"))?;
    Ok(metadata.context_aware_resources)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    #[serde(default)]
    settings_invalid: Option<String>,
    #[serde(default)]
    accepted: Option<bool>,
    #[serde(default)]
    patch: Option<Value>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    /// What the policy logs when its settings load (`LEVEL message`).
    #[serde(default)]
    settings_logged: Vec<String>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn policy_path() -> PathBuf {
    std::env::var_os("POLICY_WASM").map_or_else(|| repo_root().join("policy.wasm"), PathBuf::from)
}

fn run_case(module: &PolicyModule, case: &Case) -> Result<(), Failed> {
    let root = repo_root();
    let verdict = module
        .validate_settings(&case.settings)
        .map_err(|e| e.to_string())?;
    if let Some(expected) = &case.expect.settings_invalid {
        if verdict.valid {
            return Err(format!("settings were accepted, expected refusal: {expected}").into());
        }
        if verdict.message.as_deref() != Some(expected.as_str()) {
            return Err(format!(
                "settings refused with {:?}\n             expected {expected:?}",
                verdict.message
            )
            .into());
        }
        return Ok(());
    }
    if !verdict.valid {
        return Err(format!("settings refused: {:?}", verdict.message).into());
    }
    if verdict.logged != case.expect.settings_logged {
        return Err(format!(
            "logged at settings validation:\n  got      {:?}\n  expected {:?}",
            verdict.logged, case.expect.settings_logged
        )
        .into());
    }
    let request: Value = serde_json::from_slice(
        &std::fs::read(root.join(&case.request)).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let session = Arc::new(
        SessionReplay::from_file(&root.join(&case.session)).map_err(|e| format!("{e:#}"))?,
    );
    let granted = match &case.context_aware_resources {
        Some(resources) => resources.clone(),
        None => metadata_resources()?,
    };
    let host = Arc::new(Granted::new(
        granted
            .into_iter()
            .map(|r| (r.api_version, r.kind))
            .collect(),
        session.clone(),
    ));
    let evaluation = module
        .evaluate(&request, &case.settings, host)
        .map_err(|e| format!("{e:#}"))?;
    let mut problems = Vec::new();
    problems.extend(
        session
            .failures()
            .into_iter()
            .map(|f| format!("session replay: {f}")),
    );
    if session.unused() > 0 {
        problems.push(format!(
            "{} recorded exchange(s) were not used",
            session.unused()
        ));
    }
    let expect = &case.expect;
    if Some(evaluation.accepted) != expect.accepted {
        problems.push(format!(
            "accepted: got {}, expected {:?}",
            evaluation.accepted, expect.accepted
        ));
    }
    if evaluation.patch != expect.patch {
        problems.push(format!(
            "patch:\n  got      {}\n  expected {}",
            serde_json::to_string(&evaluation.patch).unwrap_or_default(),
            serde_json::to_string(&expect.patch).unwrap_or_default()
        ));
    }
    if evaluation.message != expect.message {
        problems.push(format!(
            "message:\n  got      {:?}\n  expected {:?}",
            evaluation.message, expect.message
        ));
    }
    if evaluation.warnings != expect.warnings {
        problems.push(format!(
            "warnings:\n  got      {:?}\n  expected {:?}",
            evaluation.warnings, expect.warnings
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}

/// Host answers scripted per input, as the fuzz target does.
struct Scripted(std::sync::Mutex<Result<Vec<u8>, String>>);

impl policy_host::Capabilities for Scripted {
    fn answer(&self, _: &str, _: &str, _: &str, _: &[u8]) -> Result<Vec<u8>, String> {
        self.0
            .lock()
            .map_err(|e| e.to_string())
            .and_then(|answer| answer.clone())
    }
}

/// One fuzz corpus input (`request \0 settings \0 host answer`, see
/// `src/testing/fuzzing.rs`) whose request and settings are JSON.
struct CorpusInput {
    name: String,
    request: Value,
    settings: Value,
    answer: Result<Vec<u8>, String>,
}

fn corpus() -> Vec<CorpusInput> {
    let dir = repo_root().join("fuzz/corpus/evaluate");
    let mut inputs = Vec::new();
    for entry in std::fs::read_dir(&dir)
        .expect("fuzz/corpus/evaluate is readable")
        .flatten()
    {
        let Ok(data) = std::fs::read(entry.path()) else {
            continue;
        };
        let mut parts = data.splitn(3, |b| *b == 0);
        let request = parts.next().unwrap_or_default();
        let settings = parts.next().unwrap_or_default();
        let answer = parts.next().unwrap_or_default();
        let settings = if settings.is_empty() { b"{}" } else { settings };
        let (Ok(request), Ok(settings)) = (
            serde_json::from_slice::<Value>(request),
            serde_json::from_slice::<Value>(settings),
        ) else {
            continue;
        };
        let answer = match answer.strip_prefix(b"!") {
            Some(error) => Err(String::from_utf8_lossy(error).into_owned()),
            None => Ok(answer.to_vec()),
        };
        inputs.push(CorpusInput {
            name: entry.file_name().to_string_lossy().into_owned(),
            request,
            settings,
            answer,
        });
    }
    inputs.sort_by(|a, b| a.name.cmp(&b.name));
    inputs
}

/// Every corpus input whose settings load goes through the wasm build
/// without a trap: in a fresh instance each, or all through one instance
/// (what the heap must survive when an instance is reused).
fn replay_corpus(module: &PolicyModule, warm: bool) -> Result<(), Failed> {
    let inputs = corpus();
    if inputs.len() < 100 {
        return Err(format!("only {} corpus inputs found", inputs.len()).into());
    }
    let host = Arc::new(Scripted(std::sync::Mutex::new(Ok(Vec::new()))));
    let instance = module
        .instantiate(host.clone())
        .map_err(|e| e.to_string())?;
    let mut evaluated = 0;
    for CorpusInput {
        name,
        request,
        settings,
        answer,
    } in &inputs
    {
        let verdict = module
            .validate_settings(settings)
            .map_err(|e| format!("{name}: validate_settings trapped: {e:#}"))?;
        if !verdict.valid {
            continue;
        }
        if let Ok(mut current) = host.0.lock() {
            *current = answer.clone();
        }
        let outcome = if warm {
            PolicyModule::evaluate_on(&instance, request, settings)
        } else {
            module.evaluate(request, settings, host.clone())
        };
        outcome.map_err(|e| format!("{name}: validate failed: {e:#}"))?;
        evaluated += 1;
    }
    if evaluated < 100 {
        return Err(format!("only {evaluated} corpus inputs had valid settings").into());
    }
    Ok(())
}

/// The chainsaw runner on tests of this repository: one that must pass (a
/// Pod annotated at binding, asserted with a JMESPath key and an `error`),
/// one whose assert must fail.
fn chainsaw_runner(module: &PolicyModule) -> Result<(), Failed> {
    use policy_host::chainsaw::{TestOutcome, read_test, run_chainsaw_test};
    let dir = repo_root().join("e2e-tests/chainsaw");
    let run = |name: &str| -> Result<TestOutcome, Failed> {
        let test = read_test(&dir.join(name).join("chainsaw-test.yaml"))
            .map_err(|e| Failed::from(format!("{name}: {e:#}")))?;
        Ok(run_chainsaw_test(module, &test, None).outcome)
    };
    match run("binding-annotation")? {
        TestOutcome::Pass => {}
        other => return Err(format!("binding-annotation: {other:?}").into()),
    }
    match run("wrong-assert")? {
        TestOutcome::Fail(why) if why.contains("node-os") => Ok(()),
        other => Err(format!("wrong-assert should fail on node-os: {other:?}").into()),
    }
}

fn main() {
    let args = Arguments::from_args();
    let manifest = repo_root().join("e2e-tests/cases.json");
    let cases: Vec<Case> = serde_json::from_slice(
        &std::fs::read(&manifest).expect("e2e-tests/cases.json is readable"),
    )
    .expect("e2e-tests/cases.json matches the case schema");
    let module = match PolicyModule::load(&policy_path()) {
        Ok(module) => Arc::new(module),
        Err(e) => {
            eprintln!("cannot load the policy: {e:#}");
            std::process::exit(1);
        }
    };
    let trials = cases
        .into_iter()
        .map(|case| {
            let module = module.clone();
            let name = case.name.clone();
            let _ = &case.about;
            Trial::test(name, move || run_case(&module, &case))
        })
        .chain([false, true].map(|warm| {
            let module = module.clone();
            let name = if warm {
                "fuzz_corpus_one_warm_instance"
            } else {
                "fuzz_corpus_fresh_instances"
            };
            Trial::test(name, move || replay_corpus(&module, warm))
        }))
        .chain({
            let module = module.clone();
            [Trial::test("chainsaw_runner", move || {
                chainsaw_runner(&module)
            })]
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
