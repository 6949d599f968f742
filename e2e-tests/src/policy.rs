//! Loading a policy module and evaluating requests the way policy-server does.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use serde::Deserialize;
use serde_json::{Value, json};
use wapc::WapcHost;
use wasmtime_provider::{EpochDeadlines, WasmtimeEngineProviderBuilder, WasmtimeEngineProviderPre};

use crate::capabilities::Capabilities;

/// How often the epoch of a module loaded with a time limit advances.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// A compiled policy, instantiated afresh for every evaluation.
pub struct PolicyModule {
    pre: WasmtimeEngineProviderPre,
    /// Set by `load_with_limit`: each waPC call is interrupted after it.
    epoch_deadlines: Option<EpochDeadlines>,
    pub size_bytes: usize,
    pub compile_time: Duration,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct SettingsVerdict {
    pub valid: bool,
    #[serde(default)]
    pub message: Option<String>,
    /// What the policy logged through the host while validating, as
    /// policy-server writes it to its log: `LEVEL message`.
    #[serde(skip)]
    pub logged: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct RawResponse {
    accepted: bool,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    code: Option<u16>,
    #[serde(default)]
    mutated_object: Option<Value>,
    #[serde(default)]
    warnings: Option<Vec<String>>,
}

/// The outcome a user of policy-server sees.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub accepted: bool,
    pub message: Option<String>,
    pub code: Option<u16>,
    pub warnings: Vec<String>,
    /// The JSON Patch policy-server would send (None when the diff is empty).
    pub patch: Option<Value>,
}

impl PolicyModule {
    pub fn load(path: &Path) -> Result<PolicyModule> {
        Self::load_with_limit(path, None)
    }

    /// A module whose every call (initialisation, validation, settings) is
    /// interrupted with a trap after `limit`, as policy-server's
    /// `policy-timeout` does, by wasmtime's epochs: a thread ticks every
    /// `EPOCH_TICK` for as long as the process runs.
    pub fn load_with_limit(path: &Path, limit: Option<Duration>) -> Result<PolicyModule> {
        let bytes = std::fs::read(path)
            .with_context(|| format!("reading {} (run `make policy.wasm`)", path.display()))?;
        let started = Instant::now();
        let mut config = wasmtime::Config::default();
        if std::env::var_os("POLICY_HOST_PERFMAP").is_some() {
            // Lets `perf` name the policy's functions (see docs/performance.md).
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        config.epoch_interruption(limit.is_some());
        let engine = wasmtime::Engine::new(&config).map_err(|e| anyhow!("wasmtime: {e}"))?;
        let epoch_deadlines = limit.map(|limit| {
            let ticks = (limit.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64;
            let ticker = engine.clone();
            std::thread::spawn(move || {
                loop {
                    std::thread::sleep(EPOCH_TICK);
                    ticker.increment_epoch();
                }
            });
            EpochDeadlines {
                wapc_init: ticks,
                wapc_func: ticks,
            }
        });
        let module = wasmtime::Module::new(&engine, &bytes)
            .map_err(|e| anyhow!("compiling {}: {e}", path.display()))?;
        let pre = WasmtimeEngineProviderBuilder::new()
            .engine(engine)
            .module(module)
            .build_pre()
            .map_err(|e| anyhow!("preparing {}: {e}", path.display()))?;
        Ok(PolicyModule {
            pre,
            epoch_deadlines,
            size_bytes: bytes.len(),
            compile_time: started.elapsed(),
        })
    }

    /// A fresh, initialised waPC instance whose host calls go to `capabilities`.
    pub fn instantiate(&self, capabilities: Arc<dyn Capabilities>) -> Result<WapcHost> {
        let provider = self
            .pre
            .rehydrate(self.epoch_deadlines)
            .map_err(|e| anyhow!("instantiating: {e}"))?;
        let callback =
            move |_id: u64, binding: &str, namespace: &str, operation: &str, payload: &[u8]| {
                capabilities
                    .answer(binding, namespace, operation, payload)
                    // policy-server wraps every capability error this way.
                    .map_err(|message| -> Box<dyn std::error::Error + Send + Sync> {
                        format!("Callback evaluation failure: {message}").into()
                    })
            };
        WapcHost::new(Box::new(provider), Some(Box::new(callback)))
            .map_err(|e| anyhow!("initialising: {e}"))
    }

    pub fn validate_settings(&self, settings: &Value) -> Result<SettingsVerdict> {
        let log = Arc::new(SettingsLog::default());
        let host = self.instantiate(log.clone())?;
        let answer = host
            .call("validate_settings", &serde_json::to_vec(settings)?)
            .map_err(|e| anyhow!("validate_settings failed: {e}"))?;
        let mut verdict: SettingsVerdict = serde_json::from_slice(&answer)?;
        verdict.logged = log.entries.lock().map(|e| e.clone()).unwrap_or_default();
        Ok(verdict)
    }

    /// One evaluation as policy-server runs it: a fresh instance, `validate`,
    /// and the mutated object diffed into a JSON Patch.
    pub fn evaluate(
        &self,
        request: &Value,
        settings: &Value,
        capabilities: Arc<dyn Capabilities>,
    ) -> Result<Evaluation> {
        let host = self.instantiate(capabilities)?;
        Self::evaluate_on(&host, request, settings)
    }

    /// The same on an existing instance (the benchmark's warm mode).
    pub fn evaluate_on(host: &WapcHost, request: &Value, settings: &Value) -> Result<Evaluation> {
        Self::evaluate_payload(host, &validate_payload(request, settings)?, request)
    }

    /// `validate` with a payload encoded beforehand ([`validate_payload`]), so
    /// a benchmark times the policy rather than the host's encoding.
    pub fn evaluate_payload(
        host: &WapcHost,
        payload: &[u8],
        request: &Value,
    ) -> Result<Evaluation> {
        let answer = host
            .call("validate", payload)
            .map_err(|e| anyhow!("validate failed: {e}"))?;
        let response: RawResponse =
            serde_json::from_slice(&answer).context("decoding the policy's response")?;
        let patch = match (&response.mutated_object, request.get("object")) {
            (Some(mutated), Some(original)) => {
                let patch = json_patch::diff(original, mutated);
                (!patch.0.is_empty())
                    .then(|| serde_json::to_value(&patch))
                    .transpose()?
            }
            (Some(_), None) => {
                return Err(anyhow!("the policy mutated a request that has no object"));
            }
            (None, _) => None,
        };
        Ok(Evaluation {
            accepted: response.accepted,
            message: response.message,
            code: response.code,
            warnings: response.warnings.unwrap_or_default(),
            patch,
        })
    }
}

/// What policy-server sends to `validate`.
pub fn validate_payload(request: &Value, settings: &Value) -> Result<Vec<u8>> {
    Ok(serde_json::to_vec(
        &json!({"request": request, "settings": settings}),
    )?)
}

/// Settings validation gets no host capabilities, as in policy-server.
/// Settings validation may log (policy-server's `tracing/log`, which needs no
/// capability); nothing else is answered.
#[derive(Default)]
struct SettingsLog {
    entries: std::sync::Mutex<Vec<String>>,
}

impl Capabilities for SettingsLog {
    fn answer(
        &self,
        _binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, String> {
        if (namespace, operation) == ("tracing", "log") {
            let entry: Value = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
            // policy-server logs "warning" at tracing's WARN level.
            let level = match entry["level"].as_str().unwrap_or_default().to_uppercase() {
                level if level == "WARNING" => "WARN".to_string(),
                level => level,
            };
            let line = format!("{level} {}", entry["message"].as_str().unwrap_or_default());
            self.entries.lock().map_err(|e| e.to_string())?.push(line);
            return Ok(Vec::new());
        }
        Err(format!(
            "host call {operation} not available during settings validation"
        ))
    }
}
