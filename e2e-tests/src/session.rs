//! Replays kwctl session files (`--replay-host-capabilities-interactions`) as
//! kwctl 1.35 does: recorded exchanges are matched exactly and in order,
//! `field_masks` included (a missing or null list is "no masks", `[]` is an
//! empty list), and the recorded answer is returned as written, unpruned. A
//! recorded answer must therefore be what 1.35 returns for its masks; `parse`
//! refuses one that holds fields outside them. Any mismatch or surplus call is
//! an error to the policy and is kept in `failures` so a test can fail on it.

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
            if let Response::Success { payload } = &exchange.response {
                let fields: Value = serde_json::to_value(&tagged.value)?;
                let answer: Value = serde_json::from_str(payload)
                    .with_context(|| format!("entry {i}: the payload is not JSON"))?;
                let masks = crate::capabilities::field_masks(&fields);
                if crate::capabilities::apply_field_masks(&answer, masks.as_ref()) != answer {
                    bail!(
                        "entry {i}: the payload holds fields outside its field_masks {masks:?}; \
                         Kubewarden 1.35 would have pruned them"
                    );
                }
            }
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
        ("kubewarden", "oci", "v1/manifest_digest") => Some("OciManifestDigest"),
        ("kubewarden", "oci", "v1/oci_manifest_config") => Some("OciManifestAndConfig"),
        _ => None,
    }
}

/// The request's fields as kwctl records them: the OCI calls send the bare
/// image reference, which kwctl writes as `image: <reference>`; `can_i`
/// sends `subject_access_review`, which kwctl writes as `request`.
fn recorded_form(call: &HostCall) -> Value {
    match &call.payload {
        Value::String(image) if call.namespace == "oci" => serde_json::json!({ "image": image }),
        payload if call.operation == "can_i" => serde_json::json!({
            "request": payload["subject_access_review"],
            "disable_cache": payload["disable_cache"],
        }),
        other => other.clone(),
    }
}

/// A request's fields as kwctl compares them after decoding: optional fields
/// absent or null are the same, `field_masks` is a set.
fn comparable(fields: &Value) -> Value {
    let mut fields = fields.clone();
    if let Some(map) = fields.as_object_mut() {
        map.retain(|_, v| !v.is_null());
        if let Some(list) = map.get_mut("field_masks").and_then(Value::as_array_mut) {
            list.sort_by_key(|m| m.to_string());
            list.dedup();
        }
    }
    fields
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
            let recorded_fields =
                serde_json::to_value(&recorded.fields).map_err(|e| e.to_string())?;
            if recorded.tag != tag
                || comparable(&recorded_fields) != comparable(&recorded_form(call))
            {
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
                    Response::Success { payload } => Ok(payload.clone().into_bytes()),
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
