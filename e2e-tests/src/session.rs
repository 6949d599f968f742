//! Replays kwctl session files (`--replay-host-capabilities-interactions`):
//! recorded exchanges are matched exactly and in order; `field_masks` is not
//! part of the recorded request. Any mismatch or surplus call is an error to
//! the policy and is kept in `failures` so a test can fail on it.

use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::capabilities::{Capabilities, HostCall};

#[derive(Debug, Deserialize)]
struct Exchange {
    #[serde(rename = "type")]
    kind: String,
    request: String,
    response: Response,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Response {
    Success { payload: String },
    Error { message: String },
}

#[derive(Debug)]
struct Recorded {
    tag: String,
    fields: serde_yaml::Value,
    response: Response,
}

#[derive(Debug, Default)]
struct ReplayState {
    next: usize,
    failures: Vec<String>,
    calls: Vec<HostCall>,
}

pub struct SessionReplay {
    exchanges: Vec<Recorded>,
    state: Mutex<ReplayState>,
}

impl SessionReplay {
    pub fn empty() -> SessionReplay {
        SessionReplay {
            exchanges: Vec::new(),
            state: Mutex::default(),
        }
    }

    pub fn from_file(path: &Path) -> Result<SessionReplay> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("parsing session {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<SessionReplay> {
        let raw: Option<Vec<Exchange>> = serde_yaml::from_str(text)?;
        let mut exchanges = Vec::new();
        for (i, exchange) in raw.unwrap_or_default().into_iter().enumerate() {
            if exchange.kind != "Exchange" {
                bail!("entry {i}: type {:?} is not Exchange", exchange.kind);
            }
            let request: serde_yaml::Value = serde_yaml::from_str(&exchange.request)?;
            let serde_yaml::Value::Tagged(tagged) = request else {
                bail!(
                    "entry {i}: the request must start with a !Tag such as !KubernetesGetResource"
                );
            };
            exchanges.push(Recorded {
                tag: tagged.tag.to_string().trim_start_matches('!').to_string(),
                fields: tagged.value,
                response: exchange.response,
            });
        }
        Ok(SessionReplay {
            exchanges,
            state: Mutex::default(),
        })
    }

    /// Mismatched or surplus calls seen so far.
    pub fn failures(&self) -> Vec<String> {
        self.state
            .lock()
            .map(|s| s.failures.clone())
            .unwrap_or_default()
    }

    /// Recorded exchanges the policy did not ask for.
    pub fn unused(&self) -> usize {
        let next = self.state.lock().map(|s| s.next).unwrap_or_default();
        self.exchanges.len().saturating_sub(next)
    }

    pub fn calls(&self) -> Vec<HostCall> {
        self.state
            .lock()
            .map(|s| s.calls.clone())
            .unwrap_or_default()
    }
}

fn tag_for(call: &HostCall) -> Option<&'static str> {
    match (
        call.binding.as_str(),
        call.namespace.as_str(),
        call.operation.as_str(),
    ) {
        ("kubewarden", "kubernetes", "get_resource") => Some("KubernetesGetResource"),
        ("kubewarden", "kubernetes", "list_resources_all") => Some("KubernetesListResourceAll"),
        ("kubewarden", "kubernetes", "list_resources_by_namespace") => {
            Some("KubernetesListResourceNamespace")
        }
        ("kubewarden", "kubernetes", "can_i") => Some("KubernetesCanI"),
        _ => None,
    }
}

impl Capabilities for SessionReplay {
    fn answer(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, String> {
        let call = &HostCall::new(binding, namespace, operation, payload);
        let mut state = self.state.lock().map_err(|e| e.to_string())?;
        state.calls.push(call.clone());
        let outcome = (|| {
            let tag = tag_for(call).ok_or_else(|| {
                format!(
                    "host call {}/{}/{} is not replayable",
                    call.binding, call.namespace, call.operation
                )
            })?;
            let recorded = self.exchanges.get(state.next).ok_or_else(|| {
                format!(
                    "unexpected host call !{tag} {}: the session has no more exchanges",
                    call.payload
                )
            })?;
            let mut fields = call.payload.clone();
            if let Some(map) = fields.as_object_mut() {
                map.remove("field_masks");
            }
            let fields: serde_yaml::Value =
                serde_yaml::to_value(&fields).map_err(|e| e.to_string())?;
            if recorded.tag != tag || recorded.fields != fields {
                return Err(format!(
                    "host call !{tag} {} does not match recorded exchange {}: !{} {}",
                    call.payload,
                    state.next,
                    recorded.tag,
                    serde_json::to_string(&recorded.fields).unwrap_or_default()
                ));
            }
            Ok(&recorded.response)
        })();
        match outcome {
            Ok(response) => {
                state.next += 1;
                match response {
                    Response::Success { payload } => {
                        // policy-server prunes by field masks; so does this host.
                        let value: Value =
                            serde_json::from_str(payload).map_err(|e| e.to_string())?;
                        crate::capabilities::masked_answer(&value, &call.payload)
                    }
                    Response::Error { message } => Err(message.clone()),
                }
            }
            Err(failure) => {
                state.failures.push(failure.clone());
                Err(failure)
            }
        }
    }
}
