//! node-metadata-policy: a Kubewarden policy that gives Pods the metadata of
//! the Node they land on.
//!
//! Flow: [`wapc_init`] registers the waPC entry points; `validate` decodes the
//! request ([`admission`]), loads the settings ([`settings`]) and runs them as
//! one [`pipeline`] of steps: the short form's (read the Node through the
//! host, [`node_lookup`]; write the chosen keys, [`mutation`]) and Kyverno's
//! rules ([`kyverno`], reading the cluster through [`cluster`]) and CEL
//! policies ([`cel`]).

// No unsafe code: the one exception is the waPC entry point's export name.
#![deny(unsafe_code)]
// A panic in wasm is a trap, and a trap on pods/binding stalls scheduling:
// nothing on a path fed by requests, settings or the host may panic.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing,
        clippy::string_slice,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented,
        clippy::exit
    )
)]

pub mod admission;
pub mod cel;
pub mod host;
pub mod kyverno;
pub mod pipeline;
pub mod settings;
pub mod shared;
pub mod short_form;

#[cfg(any(test, feature = "fuzzing"))]
pub mod testing;

use kubewarden_policy_sdk::response::ValidationResponse;
use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use serde_json::value::RawValue;
use wapc_guest::prelude::*;

use crate::admission::{Subject, ValidatePayload, classify};
use crate::cel::program::Evaluators;
use crate::host::cluster::{Cluster, HostCluster};
use crate::host::node_lookup::{HostNodeLookup, NodeLookup};

/// Prefix of every warning, so users know where it comes from.
pub const WARNING_PREFIX: &str = "node-metadata-policy: ";
/// At most this many warnings go back; the API server truncates long lists.
pub const MAX_WARNINGS: usize = 10;

#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    register_function("validate", validate);
    register_function("validate_settings", validate_settings);
    register_function(
        "protocol_version",
        kubewarden_policy_sdk::protocol_version_guest,
    );
}

fn validate(payload: &[u8]) -> CallResult {
    let verdict = decide(payload, &HostNodeLookup, &HostCluster);
    // Sized once: a mutated object is about as long as the request that
    // carried it, and growing the buffer step by step copies it each time.
    let mut answer = Vec::with_capacity(if verdict.mutated_object.is_some() {
        payload.len().saturating_add(512)
    } else {
        256
    });
    serde_json::to_writer(&mut answer, &verdict)?;
    Ok(answer)
}

fn validate_settings(payload: &[u8]) -> CallResult {
    let (response, warnings) = check_settings_and_warn(payload);
    for warning in warnings {
        log_warning(&warning);
    }
    Ok(serde_json::to_vec(&response)?)
}

/// A warning in the host's log: policy-server reads nothing but `valid` and
/// `message` of a settings answer, and keeps `message` only when the settings
/// are refused, so settings that load but will not do what they seem to say
/// are reported this way, when the policy is loaded.
fn log_warning(warning: &str) {
    let entry = serde_json::json!({
        "level": "warning",
        "message": format!("{WARNING_PREFIX}{warning}"),
        "policy": "node-metadata-policy",
    });
    if let Ok(entry) = serde_json::to_vec(&entry) {
        // A host that cannot log loses a warning, nothing else.
        let _ = host_call("kubewarden", "tracing", "log", &entry);
    }
}

/// `validate_settings`: never an error, always an answer with the reason.
pub fn check_settings(raw: &[u8]) -> SettingsValidationResponse {
    check_settings_and_warn(raw).0
}

/// The settings answer, and the warnings about settings that load but will
/// not do what they seem to say.
pub fn check_settings_and_warn(raw: &[u8]) -> (SettingsValidationResponse, Vec<String>) {
    match settings::load(raw) {
        Ok(plan) => (
            SettingsValidationResponse {
                valid: true,
                message: None,
            },
            plan.load_warnings(),
        ),
        Err(message) => (
            SettingsValidationResponse {
                valid: false,
                message: Some(message),
            },
            Vec::new(),
        ),
    }
}

/// `validate`'s answer as the SDK's type (what tests and the fuzzer check;
/// `validate` itself writes [`Verdict`] straight to JSON, the same text).
pub fn evaluate(raw: &[u8], lookup: &dyn NodeLookup, cluster: &dyn Cluster) -> ValidationResponse {
    decide(raw, lookup, cluster).into_response()
}

/// `validate`: decide and mutate. Every outcome is an answer, never a trap.
pub fn decide<'a>(raw: &'a [u8], lookup: &dyn NodeLookup, cluster: &dyn Cluster) -> Verdict<'a> {
    // Most requests are Pods not yet placed: known from the bytes, without
    // decoding them.
    if admission::pass_through::certain(raw) {
        return accept(None, Vec::new());
    }
    decide_decoded(raw, lookup, cluster)
}

/// [`decide`] without the shortcut: the request decoded, then classified.
pub fn decide_decoded<'a>(
    raw: &'a [u8],
    lookup: &dyn NodeLookup,
    cluster: &dyn Cluster,
) -> Verdict<'a> {
    decide_with(raw, lookup, cluster, Evaluators::SHIPPED)
}

/// [`decide_decoded`] with CEL expressions parsed and evaluated by the
/// given paths (tests compare the shipped ones with the `cel` crate's).
pub fn decide_with<'a>(
    raw: &'a [u8],
    lookup: &dyn NodeLookup,
    cluster: &dyn Cluster,
    evaluators: Evaluators,
) -> Verdict<'a> {
    let payload: ValidatePayload = match serde_json::from_slice(raw) {
        Ok(payload) => payload,
        Err(e) => {
            return accept(
                None,
                vec![format!("request not handled: it cannot be decoded: {e}")],
            );
        }
    };
    let raw_settings = payload.settings.map_or("{}", RawValue::get);
    // Most requests are neither bindings nor placed Pods: without rules the
    // settings need no parsing then.
    let may_have_rules = settings::may_have_rules(raw_settings);
    let subject = classify(&payload.request, may_have_rules);
    if let Subject::PassThrough { why } = &subject
        && !may_have_rules
    {
        return accept(
            None,
            why.as_deref()
                .map(pipeline::not_handled)
                .into_iter()
                .collect(),
        );
    }
    let plan = match settings::load_for_request(raw_settings.as_bytes()) {
        Ok(plan) => plan.with_evaluators(evaluators),
        Err(e) => {
            return accept(
                None,
                vec![format!("request not handled: invalid settings: {e}")],
            );
        }
    };
    let pipeline = pipeline::Pipeline {
        plan: &plan,
        request: &payload.request,
        raw_settings,
        lookup,
        cluster,
    };
    let outcome = pipeline.run(subject);
    match outcome.rejection {
        Some(message) => reject(message),
        None => {
            let mut verdict = accept(outcome.object.filter(|_| outcome.changed), outcome.warnings);
            if !outcome.audit_annotations.is_empty() {
                verdict.audit_annotations = Some(outcome.audit_annotations.into_iter().collect());
            }
            verdict
        }
    }
}

/// `validate`'s answer: the SDK's `ValidationResponse`, field for field, with
/// the mutated object written from what was received ([`admission::object::Object`]).
#[derive(serde::Serialize)]
pub struct Verdict<'a> {
    accepted: bool,
    message: Option<String>,
    code: Option<u16>,
    mutated_object: Option<admission::object::Object<'a>>,
    audit_annotations: Option<std::collections::HashMap<String, String>>,
    warnings: Option<Vec<String>>,
}

impl Verdict<'_> {
    pub fn into_response(self) -> ValidationResponse {
        let (mutated_object, warnings) = match self
            .mutated_object
            .map(admission::object::Object::into_value)
        {
            Some(Ok(object)) => (Some(object), self.warnings),
            None => (None, self.warnings),
            // Not reached: the fields decoded when they were received.
            Some(Err(e)) => (None, Some(vec![pipeline::not_handled(&e)])),
        };
        ValidationResponse {
            accepted: self.accepted,
            message: self.message,
            code: self.code,
            mutated_object,
            audit_annotations: self.audit_annotations,
            warnings,
        }
    }
}

fn accept(mutated_object: Option<admission::object::Object>, warnings: Vec<String>) -> Verdict {
    Verdict {
        accepted: true,
        message: None,
        code: None,
        mutated_object,
        audit_annotations: None,
        warnings: cap_warnings(warnings),
    }
}

fn reject(message: String) -> Verdict<'static> {
    Verdict {
        accepted: false,
        message: Some(format!("{WARNING_PREFIX}{message}")),
        code: None,
        mutated_object: None,
        audit_annotations: None,
        warnings: None,
    }
}

fn cap_warnings(warnings: Vec<String>) -> Option<Vec<String>> {
    if warnings.is_empty() {
        return None;
    }
    let total = warnings.len();
    let mut capped: Vec<String> = warnings
        .into_iter()
        .take(MAX_WARNINGS)
        .map(|w| format!("{WARNING_PREFIX}{w}"))
        .collect();
    if total > MAX_WARNINGS {
        capped.push(format!(
            "{WARNING_PREFIX}{} more warnings not shown",
            total.saturating_sub(MAX_WARNINGS)
        ));
    }
    Some(capped)
}
